// Internal to the plan layer: the state and phases of our DP planner (balanced_cuts in
// src/plan/algorithms/dp.h), split over dp_placement.cpp (phase 1) and balanced_dp.cpp
// (phases 2 and 3 and the driver).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "algorithms/dp.h"

namespace canzona::plan::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
// Atomic items x ranks past which our DP planners run fewer candidates (dp.h): Qwen3-32B at DP
// 1024 is 4.6e5.
inline constexpr double kLargeWork = 2e6;

struct BucketState {
  std::vector<int> atomic;                       // item indices of atomic items, in order
  std::vector<int> owner;                        // [item] owner of an atomic item, -1 for divisible
  std::vector<std::vector<std::int64_t>> parts;  // [item] element counts of the ranks
                                                 // parts_lo[item] ... (divisible), so its size
                                                 // is the ranks the item may span, not R
  std::vector<int> parts_lo;                     // [item] rank of parts[item][0]
  std::vector<int> first_rank, last_rank;        // [item] ranks holding the item, -1 if unplaced
  std::vector<int> cap_lo, cap_hi;               // [atomic position] ranks the item may ever go to
};

// Phase 1 per bucket: buckets in descending total time (ties by index), each assigned by the
// exact monotone solver minimising Σ_r (L_r + S_r)^2 within each item's caps, or, for a bucket too
// large for it, by Algorithm 1 targeting (which ignores caps). Returns the loads.
std::vector<double> place_per_bucket(std::vector<BucketState>& state,
                                     const std::vector<std::vector<DpItem>>& items,
                                     const std::vector<double>& totals, int ranks, double mu);

// Phase 1 globally: all atomic items by descending time, each to the least-loaded rank within its
// caps that keeps its bucket's cuts monotone given the items already placed; ties to the lowest
// rank, or to the middle of the allowed range when `middle_ties`. Returns the loads.
std::vector<double> place_by_lpt(std::vector<BucketState>& state,
                                 const std::vector<std::vector<DpItem>>& items, int ranks,
                                 bool middle_ties);

// Phase 1 on the grid: capped items first, then by descending time, each to the DP rank (within its
// caps and the monotone limits) where adding its TP tasks, largest first to the least-loaded host,
// gives the lowest busiest-host load (then the lowest DP load; then the lowest rank). Returns the
// DP loads. Work grows with items x ranks x tasks x tp, so callers use it only for models of
// moderate size.
std::vector<double> place_on_grid(std::vector<BucketState>& state,
                                  const std::vector<std::vector<DpItem>>& items, int ranks, int tp);

// Sets caps that keep each big divisible item (an embedding, an output layer) free to span most
// ranks: the atomic items before it in its bucket may only go to the first ranks (enough for their
// time, at least min_edge), those after it to the last.
void cap_around_big_divisible(std::vector<BucketState>& state,
                              const std::vector<std::vector<DpItem>>& items, int ranks,
                              int min_edge);

// Memory each rank in [lo, hi] receives so that all of them rise towards a common level
// (water-filling); the amounts sum to `amount`. Element k is rank lo + k's.
std::vector<double> water_fill(const std::vector<double>& memory, int lo, int hi, double amount);

// Phase 3: divisible items. A *run* is a maximal sequence of adjacent divisible items in a bucket
// (between two atomic items or a bucket end); it may be cut anywhere, so a run is water-filled as
// one unit over the ranks its atomic neighbours allow, largest run first, and then sliced in buffer
// order (item by item, element by element) at the resulting memory boundaries. Needs every atomic
// item's owner; returns the memory per rank.
std::vector<double> fill_divisible(std::vector<BucketState>& state,
                                   const std::vector<std::vector<DpItem>>& items, int ranks);

// Element cuts of a placed state: cut[r] = first element owned by a rank >= r.
DpCuts element_cuts(const std::vector<BucketState>& state,
                    const std::vector<std::vector<DpItem>>& items,
                    const std::vector<std::vector<std::int64_t>>& starts,
                    const std::vector<std::int64_t>& bucket_numel, int ranks);

// A state with no item placed: every atomic item listed, caps open.
std::vector<BucketState> empty_state(const std::vector<std::vector<DpItem>>& items, int ranks);

}  // namespace canzona::plan::detail
