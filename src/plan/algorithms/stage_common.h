// Internal to the plan layer: what the strategies' stage planners (strategy_*.cpp, variant_*.cpp)
// share. A stage's C_max and layout options, the element-wise price, owners from DP cuts, our
// planner's DP items of a layout, a DP candidate (layout + cuts) and the TP step that turns a
// stage with owners into micro groups through the strategy's group former.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/dp.h"
#include "algorithms/tp.h"
#include "canzona/layout/layout.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

inline constexpr double kMiB = 1024.0 * 1024.0;

// C_max in bytes (o validated).
std::int64_t capacity_bytes(const PlanOptions& o);

// Whether p's update runs on one TP host (the strategy's TP exchange is micro groups), not on
// every TP rank.
bool tp_hosted(const model::ParamSpec& p, const PlanOptions& o);

// The layout options of the plan's grid.
layout::LayoutOptions stage_layout_options(const PlanOptions& o);

// Element-wise (AdamW) cost of `numel` elements.
double adam_cost(std::int64_t numel, const PlanOptions& o);

// The owner of every param from element cuts: the rank whose shard holds the slot's start, or
// kDivided when an element-wise slot straddles a cut.
void owners_from_cuts(const layout::Layout& layout,
                      const std::vector<std::vector<std::int64_t>>& cuts,
                      const model::ModelSpec& model, std::vector<int>& owner);

// Element cuts of item cuts: each cut at its item's slot start, the bucket end past the last.
std::vector<std::int64_t> item_to_element_cuts(const layout::Bucket& bucket, const ItemCuts& u,
                                               int ranks);

// A DP candidate: the stage's layout (re-laid or as built) and its cuts ([bucket] R+1 offsets).
struct LaidCuts {
  layout::Layout layout;
  std::vector<std::vector<std::int64_t>> cuts;
};

// Our planner's DP items of a layout: full-task cost summed over the TP group that runs it;
// element-wise params divisible.
struct StageItems {
  std::vector<std::vector<DpItem>> items;  // [bucket][slot]
  std::vector<std::vector<std::int64_t>> starts;
  std::vector<std::int64_t> numel;
};
StageItems canzona_items(const model::ModelSpec& model, const layout::Layout& layout,
                         const std::vector<Task>& tasks, const PlanOptions& o);

// A free-order candidate (dp.h): the buckets re-laid by owner and cut there.
LaidCuts laid_cuts(const layout::Layout& layout, const StageItems& s, const FreeOrder& f,
                   const PlanOptions& o);

// Micro groups of one DP rank's TP-hosted tasks. `ids` index stage.tasks, tp_tasks[k] is task
// ids[k]'s cost and bytes; tp_load is the work per TP rank over the DP ranks formed so far, which
// a former may read and must update when it balances the TP axis.
using GroupFormer = std::vector<TpGroup> (*)(const StagePlan& stage, const std::vector<int>& ids,
                                             const std::vector<TpTask>& tp_tasks,
                                             const PlanOptions& o, std::vector<double>& tp_load);

// The group former of a strategy whose TP exchange is the redundant gather (sc, layerwise-paper,
// fsdp-a2a): plan_tp never calls it, as no task is hosted on one TP rank (an Error if it is).
std::vector<TpGroup> no_tp_groups(const StagePlan& stage, const std::vector<int>& ids,
                                  const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                  std::vector<double>& tp_load);

// The TP step: every task's dp_owner from stage.owner, then the micro groups of each DP rank's
// hosted tasks by `form`.
void plan_tp(const PlanOptions& o, StagePlan& stage, const model::ModelSpec& model,
             GroupFormer form);

// A stage with a DP candidate's layout and cuts, its owners, and micro groups by `form`.
StagePlan stage_with_cuts(const model::ModelSpec& model, const StagePlan& stage, LaidCuts c,
                          const PlanOptions& o, GroupFormer form);

}  // namespace canzona::plan::detail
