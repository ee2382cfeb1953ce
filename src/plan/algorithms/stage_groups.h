// Internal to the plan layer: the two steps every TP host placement ends with (make_plan's
// plan_tp in stage_common.cpp and replan's host_stage in replan_tp.cpp).
#pragma once

#include <vector>

#include "algorithms/tp.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

// Ours: hosts are interchangeable inside one DP rank's TP group, so relabel them: the most loaded
// host of `groups` (costs of `tasks`) becomes the TP rank with the least work in `tp_total`
// (work per TP rank over the DP ranks placed so far), the next most loaded the next least, ...
// The grid is unchanged; the TP axis is balanced. Returns the load of each new label.
std::vector<double> relabel_hosts(std::vector<TpGroup>& groups, const std::vector<TpTask>& tasks,
                                  const std::vector<double>& tp_total);

// Writes `groups` (indices into `ids`, the stage task indices of DP rank d's hosted tasks) into
// the stage: each task's host and group, and stage.groups[d] in order.
void assign_groups(StagePlan& stage, int d, const std::vector<int>& ids,
                   const std::vector<TpGroup>& groups);

}  // namespace canzona::plan::detail
