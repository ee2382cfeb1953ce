// Internal to the plan layer: the TP half of replan (replan_tp.cpp), used by replan.cpp.
#pragma once

#include "algorithms/holdings.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

// TP-axis max/mean of a stage in the planner's unit: per TP rank, the hosted tasks' cost plus the
// work every TP rank does alike (replicated matrices, AdamW elements).
double tp_axis_ratio(const model::ModelSpec& model, const PlanOptions& o, const StagePlan& stage);

// Hosts and micro groups of stage `stage_index` (tasks' DP owners already set), replacing any
// there: DP ranks below `keep_ranks` keep the old plan's host of each task they already owned,
// largest state first, while their busiest host stays within (1 + tolerance) x a from-scratch LPT
// placement of their tasks, place the rest by LPT and pack micro groups first-fit by C_max; the
// other ranks are placed as make_plan does (Algorithm 2 for --planner paper; ours relabelled
// towards the TP axis's balance). asc keeps make_plan's round-robin groups.
void host_stage(const model::ModelSpec& model, const PlanOptions& o, const Holdings& old,
                int stage_index, double tolerance, int keep_ranks, StagePlan& stage);

}  // namespace canzona::plan::detail
