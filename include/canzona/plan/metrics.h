// Load-balance metrics of a Plan: per rank of the PP x DP x TP grid, optimizer FLOPs per step
// and optimizer-state bytes, with max/mean ratios on the DP axis, the TP axis and the grid, and
// the lower bound no plan can beat.
//
// Definitions. A rank's load counts the matrix tasks it computes (full-matrix FLOPs and state on
// the host; on every TP rank when the task is not hosted) and the AdamW work on the element-wise
// elements it updates. DP axis: loads summed over TP, max/mean over DP ranks, worst stage. TP
// axis: loads summed over DP, max/mean over TP ranks, worst stage. Worst TP group: max/mean over
// the TP ranks of one DP rank, worst (stage, DP rank) with work. Grid: max/mean over the DP x TP
// ranks of a stage, worst stage.
//
// Lower bounds (src/plan/algorithms/bounds.h), per stage relative to that stage's mean, worst
// stage, at least 1: what no plan of this strategy's kind can beat. Atomic units: a whole matrix
// param (all its tasks, with their TP copies) on the DP axis; a task on the TP axis (summed over
// the DP ranks that compute it); a task on the grid. Element-wise work is divisible. A unit
// computed on several ranks (kAllTp, kEveryone) counts as that many independent copies, a
// relaxation. Each axis: makespan_lower_bound of those units plus the divisible rest on dp, tp or
// dp x tp bins. The grid also takes the DP and TP bounds: a grid rank's load is at least its DP
// row's load / tp (its TP column's / dp), and the grid mean is the DP (TP) mean / tp (/ dp), so
// grid max/mean >= DP max/mean and >= TP max/mean on every stage.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {

struct RankLoad {
  double flops = 0.0;   // optimizer FLOPs per step
  double memory = 0.0;  // optimizer-state bytes
};

struct Ratio {
  double memory = 1.0;
  double flops = 1.0;
};

// The loads of one stage's DP x TP ranks, row-major in one allocation (dp may be 2^20).
struct LoadGrid {
  int dp = 0, tp = 0;
  std::vector<RankLoad> cells;  // cells[d * tp + t]
  LoadGrid() = default;
  LoadGrid(int dp_ranks, int tp_ranks)
      : dp(dp_ranks), tp(tp_ranks), cells(static_cast<std::size_t>(dp_ranks) * tp_ranks) {}
  RankLoad& at(int d, int t) { return cells[static_cast<std::size_t>(d) * tp + t]; }
  const RankLoad& at(int d, int t) const { return cells[static_cast<std::size_t>(d) * tp + t]; }
};

struct Metrics {
  std::vector<LoadGrid> loads;                             // [stage]
  Ratio dp, tp, grid;                                      // max/mean
  Ratio tp_worst_group;                                    // max/mean inside the worst TP group
  Ratio lower_bound_dp, lower_bound_tp, lower_bound_grid;  // <= dp, tp, grid respectively
  RankLoad max_rank, mean_rank;                            // over the whole grid
  int split_tensors = 0;            // params an equal-chunk ZeRO-1 shard of Megatron's layout
                                    // (layout::build_layout) would split
  int divided_params = 0;           // element-wise params this plan's cuts divide
  int idle_ranks = 0;               // grid ranks with no optimizer work (legal)
  int tp_groups = 0;                // micro groups over all stages and DP ranks
  double group_makespan_sum = 0.0;  // max over (stage, DP rank) of Σ group makespans (cost unit)
  double bucket_comm_imbalance = 1.0;  // max over buckets of max/mean shard size (1 without cuts)
  std::vector<double> bucket_shard_ratio;  // per bucket (stage order), max/mean shard size
  std::int64_t padding_elements = 0;       // Σ stages, buckets: bucket numel - Σ slot numel
  std::int64_t buffer_elements = 0;        // Σ stages: layout numel (padding included)
  // A MoE plan (plan.expert): the metrics above are the dense buffer's over DP x TP; `expert` the
  // expert buffer's over expert DP x ETP (of one EP rank: every EP rank's are the same), and
  // `whole_grid` the max/mean over a stage's dp x tp ranks of each rank's dense plus expert load
  // (the expert coordinates of ParallelDims::expert_coord), worst stage. Null and 1 for a dense
  // plan.
  std::shared_ptr<const Metrics> expert;
  Ratio whole_grid;
};

Metrics compute_metrics(const model::ModelSpec& model, const Plan& plan);

// The same with the lower bounds and split_tensors copied from `bounds`, the metrics of another
// plan of the same model, options and strategy (a planner's candidates): the bounds depend only on
// the tasks, how many ranks compute each, and the mean loads, which every such plan shares;
// split_tensors only on Megatron's layout.
Metrics compute_metrics(const model::ModelSpec& model, const Plan& plan, const Metrics& bounds);

// The same without the lower bounds (left at 1) and split_tensors (0), for comparing plans on
// max/mean alone.
Metrics compute_balance(const model::ModelSpec& model, const Plan& plan);

}  // namespace canzona::plan
