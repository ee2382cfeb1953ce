// The authors' published planning code (liangyuwang/Megatron-Canzona,
// megatron/core/optimizer/matrix_based_optimizer/) re-expressed as pure functions, so the plans
// it really produces can be compared with the paper's algorithms (dp.h, tp.h) and with ours.
// Written from reading that code; none of it is copied.
//
// Terms. A *buffer* is one Megatron param_and_grad_buffer (one per dtype pair; dense and expert
// params have their own); upstream plans each buffer on its own, so call dp_item_cuts once per
// buffer. A bucket holds n *items* (params) at element offsets `starts` (ascending, relative to
// the bucket) with `numel` >= 1 elements each, non-overlapping, possibly with padding gaps. A
// *position* is an element offset in a bucket; an item's *end* is start + numel. Upstream cuts a
// bucket at R+1 positions pos[0..R] and DP rank r owns the items whose start lies in
// [pos[r], pos[r+1]). A bucket's *total* is its last item's end (padding after it excluded).
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/dp.h"
#include "algorithms/tp.h"

namespace canzona::plan::megatron_canzona {

// get_balance_ratio (load_balanced_dp_buffer.py): max / (sum / R), 1.0 when the sum is 0.
double balance_ratio(const std::vector<double>& loads);

// greedy_lpt_with_ranges (load_balanced_dp_buffer.py, bucket_order "by_total_desc"): R+1
// positions per bucket, each on 0 or an item end, pos[0] = 0, pos[R] = the bucket's total.
// Buckets are visited by total descending (stable: ties by index). μ = Σ totals / R; L_r counts
// positions (elements, padding gaps between items included), never a cost. Per bucket with total
// T: deficits d_r = max(0, μ - L_r); greedy_r = (d_r / Σd)·T, or T/R when Σd <= 1e-9; target_r =
// (1-α)·T/R + α·greedy_r; for r = 0..R-2, C += target_r and pos[r+1] is the end (or 0) at or after
// pos[r] nearest to C, the smaller one on ties; the last rank takes the rest. Upstream also offers
// the other buckets' item ends (at negative or beyond-total positions) as candidates; they can
// never be nearest, so only this bucket's are used. Needs 0 <= α <= 1 (upstream does not check).
std::vector<std::vector<std::int64_t>> greedy_positions(
    const std::vector<std::vector<std::int64_t>>& item_numel,
    const std::vector<std::vector<std::int64_t>>& item_starts, int ranks, double alpha);

struct DpResult {
  std::vector<ItemCuts> cuts;      // the plan upstream uses, one per bucket
  bool greedy_kept = false;        // true when the greedy plan replaced the start-index one
  double start_index_ratio = 1.0;  // balance_ratio of the start-index plan's loads
  double greedy_ratio = 1.0;       // balance_ratio of the greedy plan's loads
};

// build_dp_load_balanced_dist_opt_buffer_slices_pos (load_balanced_dp_buffer.py): the original
// slicing (the start-index rule of DistMatrixBasedOptimizer._build_model_gbuf_param_range_map_
// whole_tensor, distrib_optimizer.py: item to the rank whose [r·S, (r+1)·S) holds its start,
// S = bucket_numel / R) against greedy_positions; the greedy plan replaces it only when its
// balance_ratio, over the per-rank loads summed over all buckets of the buffer, is strictly lower.
// Those loads sum compare_cost[b][i] (upstream's --dp-balanced-opt-cost: the item's numel by
// default, its optimizer FLOPs or memory otherwise) over the items each rank owns, bucket by
// bucket in index order. The greedy cuts themselves always balance positions whatever that cost.
// Upstream asserts bucket_numel % R == 0; here S may be fractional (start_index_cuts is exact).
// Deterministic; throws a check failure for malformed input.
DpResult dp_item_cuts(const std::vector<std::vector<std::int64_t>>& item_numel,
                      const std::vector<std::vector<std::int64_t>>& item_starts,
                      const std::vector<std::int64_t>& bucket_numel, int ranks, double alpha,
                      const std::vector<std::vector<double>>& compare_cost);
// The same with compare_cost = item_numel (upstream's default).
DpResult dp_item_cuts(const std::vector<std::vector<std::int64_t>>& item_numel,
                      const std::vector<std::vector<std::int64_t>>& item_starts,
                      const std::vector<std::int64_t>& bucket_numel, int ranks, double alpha);

// --tp-balanced-opt-fuse-space 400 (the scripts' value): MiB of elements, 400·2^20.
inline constexpr std::int64_t kTpCapacityElements = 400LL * 1024 * 1024;

// AsyncGroupExecutor.get_globally_optimized_micro_groups (load_balanced_tp_executor.py), the
// "global" mode that --use-tp-balanced-opt selects, for the tasks of one DP rank's param group.
// key[t] is what upstream's cost_fn returns for task t's TP-local shard (p.view(s), s the local
// shape): its element count under --tp-balanced-opt-cost numel (the default), its Muon FLOPs under
// flops. The one key both orders the tasks and fills the capacity. Tasks sorted by (key, index)
// *descending*: equal keys go higher index first. The candidate group takes the next task; it
// overflows when Σkey / hosts > capacity or when LPT of the candidate from zero loads (key desc,
// stable; each to the least-loaded host, lowest index on ties) puts more than `capacity` on a host.
// On overflow the group closes without the task, which starts the next group. Groups come out in
// that order; tasks in each in LPT order with their host (a host's tasks in upstream's slot order).
// Deviation: upstream raises ValueError for a task whose key alone exceeds capacity; here it forms
// a group of its own on host 0 (upstream's own branch for a lone overflowing task, unreachable
// there). makespan and max_host_bytes are filled from tasks[t].cost and tasks[t].bytes, which do
// not steer anything. Keys must be >= 0 and not NaN; O(n log n).
std::vector<TpGroup> tp_groups_by_key(const std::vector<TpTask>& tasks,
                                      const std::vector<double>& key, int hosts, double capacity);
// The default numel mode: key = TP-local shard elements, capacity in elements.
std::vector<TpGroup> tp_groups(const std::vector<TpTask>& tasks,
                               const std::vector<std::int64_t>& shard_elements, int hosts,
                               std::int64_t capacity_elements = kTpCapacityElements);

}  // namespace canzona::plan::megatron_canzona
