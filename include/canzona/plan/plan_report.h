// Presentation of plans (`canzona plan`): the before/after balance table, the JSON document other
// tools consume, and an SVG bar chart of per-rank loads. Pure functions of their arguments: they
// return text and JSON; the caller writes them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {

// One plan with its metrics and its planning time, labelled for the table ("asc", ...). plan_ms is
// measured by the caller (the plan itself is deterministic; its timing is not).
struct PlanRun {
  std::string label;
  plan::Plan plan;
  plan::Metrics metrics;
  double plan_ms = 0.0;
};

// Throws canzona::Error (an internal fault, exit 1) naming the run and the value when any number
// the table, the JSON or the SVG would show is not finite: planning time, every metric (ratios,
// lower bounds, per-rank loads, makespans, bucket shard ratios) and every task's cost, FLOPs and
// state bytes and every micro group's makespan. Call before printing or writing anything.
void require_finite(const PlanRun& run);

// Figure-3-style table: one column per run, rows for DP/TP/grid memory and FLOPs max/mean, the
// lower bounds, groups, split tensors and planning time.
std::string balance_table(const model::ModelSpec& model, const std::vector<PlanRun>& runs);

// The stable JSON document of one run (keys documented in docs/cli.md, "`canzona plan`").
nlohmann::json plan_json(const model::ModelSpec& model, const PlanRun& run);

// Per-rank FLOPs and memory bars of `before` and `after` with mean and lower-bound lines.
std::string loads_svg(const PlanRun& before, const PlanRun& after);

}  // namespace canzona::plan
