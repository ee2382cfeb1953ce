// Internal to the plan layer: one stage planner per strategy (strategy_*.cpp) and, for lb-asc,
// one per planner variant (variant_*.cpp). plan.cpp builds a stage's base and hands it to
// plan_stage, which looks the strategy up; no file branches on strategy names but its own.
#pragma once

#include <vector>

#include "algorithms/stage_common.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

// The plan of a stage under one strategy, from stage_base (Megatron's layout, the matrix tasks,
// no owner yet): layout, cuts, owners and micro groups.
using StagePlanner = StagePlan (*)(const model::ModelSpec& model, StagePlan stage,
                                   const PlanOptions& o);

StagePlan plan_sc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);
StagePlan plan_layerwise(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);
StagePlan plan_layerwise_paper(const model::ModelSpec& model, StagePlan stage,
                               const PlanOptions& o);
StagePlan plan_asc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);
StagePlan plan_lb_asc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);
StagePlan plan_fsdp_a2a(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);

// The stage plan of o.strategy (o.variant for lb-asc); what make_plan calls per stage and the
// never-behind selection calls for the peers.
StagePlan plan_stage(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o);

// Layer-wise's TP former (layer-sharded: one group per DP rank, homes by LPT), for the
// never-behind selection's layer-sharded peer.
std::vector<TpGroup> layerwise_groups(const StagePlan& stage, const std::vector<int>& ids,
                                      const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                      std::vector<double>& tp_load);

// Megatron-LM's layer-wise optimizer's DP rank of every param of every bucket (fixed buckets)
// and its soft-minimum two-buffer layout (strategy_layerwise.cpp); our planner tries both.
std::vector<std::vector<int>> layerwise_ranks(const model::ModelSpec& model,
                                              const layout::Layout& layout, const PlanOptions& o);
layout::Layout upstream_layerwise_layout(const model::ModelSpec& model,
                                         const std::vector<int>& params, const PlanOptions& o);

// lb-asc's planner variants: the DP candidates and the TP former of each.
struct VariantPlanner {
  std::vector<LaidCuts> (*dp_cut_candidates)(const model::ModelSpec& model,
                                             const layout::Layout& layout,
                                             const std::vector<Task>& tasks, const PlanOptions& o);
  GroupFormer tp_groups;
};
extern const VariantPlanner kPaperVariant;            // variant_paper.cpp
extern const VariantPlanner kMegatronCanzonaVariant;  // variant_megatron_canzona.cpp
extern const VariantPlanner kCanzonaVariant;          // variant_canzona.cpp

}  // namespace canzona::plan::detail
