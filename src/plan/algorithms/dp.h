// DP planners: where each bucket is cut among the R data-parallel ranks (docs/design.md section 3).
//
// Terms. A bucket is seen as an ordered list of n *items* (its params, buffer order) with a cost
// each. An *item cut* is a vector u of R+1 monotone item indices, u[0] = 0, u[R] = n; DP rank r
// owns items [u[r], u[r+1]) (possibly none). Φ(u) is the summed cost of the first u items. μ is
// the total cost over all buckets divided by R; L_r is the load rank r has accumulated so far.
#pragma once

#include <cstdint>
#include <vector>

namespace canzona::plan {

using ItemCuts = std::vector<int>;  // R+1 item boundaries of one bucket

// Start-index rule (`asc`): item i goes to the rank r with r*S <= start(i) < (r+1)*S where
// S = bucket_numel / R (computed exactly in integers). `starts` are the items' element offsets in
// the bucket, ascending.
ItemCuts start_index_cuts(const std::vector<std::int64_t>& starts, std::int64_t bucket_numel,
                          int ranks);

// Paper Algorithm 1 (`lb-asc`, --planner paper): buckets visited in descending total cost (ties by
// index); per bucket, targets v_r = (1-α)/R + α·d_r/Σd with deficits d_r = max(0, μ - L_r) (even
// split when Σd = 0); walking r = 0..R-2 with cumulative target C, the cut u >= previous cut
// minimising |Φ(u) - C| (first such u on ties); the last rank takes the rest.
// costs[b][i] is the cost of item i of bucket b. Returns one ItemCuts per bucket.
std::vector<ItemCuts> alpha_balanced_cuts(const std::vector<std::vector<double>>& costs, int ranks,
                                          double alpha);

// Our DP planner (--planner canzona). Items have a time cost and a memory cost; `divisible` items
// (element-wise params) may be cut anywhere and are placed after the atomic ones. Phase 1 places
// atomic items bucket by bucket (descending total time) with a monotone assignment that
// minimises Σ_r (L_r + added_r)^2, i.e. the biggest items land on the least-loaded ranks while
// cuts stay monotone; phase 2 is a refinement pass that moves an item at a segment boundary to
// another rank allowed by monotonicity while that lowers the maximum time; phase 3 water-fills
// the divisible items over the ranks their position allows, towards equal memory.
struct DpItem {
  double time = 0.0;       // planner cost (FLOPs, seconds, ...) of the whole item
  double memory = 0.0;     // optimizer-state bytes of the whole item
  std::int64_t numel = 0;  // element extent in the bucket (divisible items are cut in elements)
  bool divisible = false;
  // Costs of the TP tasks the item splits into, each hosted whole on one TP rank of its DP rank;
  // empty when the item's time is spread evenly over the TP ranks (element-wise or replicated).
  std::vector<double> tasks;
};

struct DpBucketResult {
  // Element cut offsets relative to the bucket's first item, R+1 values, monotone. For atomic
  // items they sit on item starts; inside a divisible item they may fall anywhere.
  std::vector<std::int64_t> element_cuts;
};

// items[b] in buffer order; starts[b][i] the element offset of item i in bucket b; numel[b] the
// bucket's padded size. Deterministic. balanced_cut_candidates returns the candidates (one cut set
// per bucket each, in a fixed order) so the caller can judge them on the whole DP x TP plan: a
// capped twin whose caps change nothing is left out, and past 2e6 atomic items x ranks only the
// global LPT with lowest-rank ties and its capped twin run (refinement work is bounded in all, 4e6
// evaluated moves over the candidates). balanced_cuts returns the one with the lowest max(time
// max/mean, memory max/mean) on the DP axis (earliest on ties).
using DpCuts = std::vector<DpBucketResult>;  // one per bucket
// With tp > 1 one more candidate places items on the DP x TP grid directly (grid LPT: each item to
// the DP rank where its tasks, added LPT-style to that rank's TP hosts, raise the busiest host
// least).
std::vector<DpCuts> balanced_cut_candidates(const std::vector<std::vector<DpItem>>& items,
                                            const std::vector<std::vector<std::int64_t>>& starts,
                                            const std::vector<std::int64_t>& bucket_numel,
                                            int ranks, int tp = 1);
DpCuts balanced_cuts(const std::vector<std::vector<DpItem>>& items,
                     const std::vector<std::vector<std::int64_t>>& starts,
                     const std::vector<std::int64_t>& bucket_numel, int ranks);

// Free order (docs/design.md section 3, "order inside a bucket is free"): our planner's re-laid
// candidates. The atomic items of every bucket are placed regardless of their position, largest
// time first: (0) by LPT on time (ties: lower memory, then lower rank); (1) by LPT on time among
// the ranks whose memory stays within 1.1x, 1.3x the mean (the least-memory rank when none does;
// also without a cap), first without and then with *windows*: a bucket whose divisible run holds
// more than a rank's mean memory keeps ranks [0, R - s) free of its atomic items (s = ceil(2 R x
// the bucket's share of atomic time), 1 <= s < R), with the run's expected share counted on ranks
// 0..R-s; (2) with tp > 1 and a bounded amount of work, on the DP x TP grid (each item to the DP
// rank where its TP tasks, added largest first to the least-loaded host, raise that rank's busiest
// host least; ties: lower DP time, lower rank). Placements equal to an earlier one are left out;
// past 2e6 atomic items x ranks only (0) and the windowed 1.1x cap run. Each bucket is then laid
// out by owner (ranks ascending, items in their old relative order) with its divisible items as
// one run, put in the gap between two consecutive owners (or a bucket end) whose ranks water-fill
// to the lowest memory level; runs are placed largest first, as phase 3 fills them.
struct FreeOrder {
  std::vector<std::vector<int>> order;  // [bucket] item indices in their new buffer order
  std::vector<std::vector<int>> owner;  // [bucket][new position] atomic owner, -1 if divisible
};
std::vector<FreeOrder> free_order_candidates(const std::vector<std::vector<DpItem>>& items,
                                             int ranks, int tp);

// The same layout for owners chosen elsewhere (our planner lays the peers' placements out this
// way): owner[b][i] is the DP rank of atomic item i of bucket b (ignored for divisible items).
FreeOrder free_order_for_owners(const std::vector<std::vector<DpItem>>& items, int ranks,
                                const std::vector<std::vector<int>>& owner);

// Element cuts for buckets whose items are in buffer order with given atomic owners (monotone
// along each bucket, -1 for divisible items); divisible runs are water-filled as in phase 3.
DpCuts cuts_for_owners(const std::vector<std::vector<DpItem>>& items,
                       const std::vector<std::vector<int>>& owner,
                       const std::vector<std::vector<std::int64_t>>& starts,
                       const std::vector<std::int64_t>& bucket_numel, int ranks);

// Megatron-LM's layer-wise optimizer as shipped (megatron/core/optimizer/layer_wise_optimizer.py):
// each bucket's params are dealt by LPT on cost[b][i] = max·min² of the TP-shard shape, largest
// first (ties by position), to the DP rank with the lowest cost load among those whose elements in
// this bucket stay within numel_cap x the bucket's mean per rank (ties: lowest rank); a param no
// rank can take under the cap goes to the rank with the lowest load (plain LPT, lowest rank on
// ties).
// Loads are carried across buckets, visited in buffer order. Returns the rank of each param.
std::vector<std::vector<int>> layerwise_lpt_ranks(
    const std::vector<std::vector<double>>& cost,
    const std::vector<std::vector<std::int64_t>>& numel, int ranks, double numel_cap);

// Paper-era layerwise baseline (NVIDIA): items sorted by cost descending (ties by index) and dealt
// ping-pong 0..R-1, R-1..0, ... Returns the owner of each item.
std::vector<int> layerwise_owners(const std::vector<double>& costs, int ranks);

// Standard ZeRO-1 equal chunks: rank r owns [r*numel/R, (r+1)*numel/R).
std::vector<std::int64_t> equal_chunk_cuts(std::int64_t bucket_numel, int ranks);

}  // namespace canzona::plan
