// Internal to the plan layer: our planner's selection among its DP candidates so that the plan is
// never behind a peer (docs/design.md section 1: baselines at their strongest).
#pragma once

#include <vector>

#include "algorithms/stage_common.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

// The candidate (laid out, cut, owned and grouped by `form`) behind the peers on the fewest
// metrics, then with the best grid score (earliest on ties). The peers are planned from the same
// stage base: the authors' Megatron-Canzona plan and Megatron-LM's layer-wise plans (duplicated
// and layer-sharded TP). `candidates` holds at least two.
StagePlan never_behind(const model::ModelSpec& model, const StagePlan& stage,
                       std::vector<LaidCuts> candidates, const PlanOptions& o, GroupFormer form);

}  // namespace canzona::plan::detail
