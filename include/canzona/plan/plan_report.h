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

// Per-rank optimizer FLOPs and optimizer-state memory of `peer` (grey; none when null) and
// `ours` (green), rank by rank in grid order: the x-axis in DP ranks (a tick per DP group,
// pipeline stages separated), the y-axes in FLOP and byte units, each series' max, mean and the
// max/mean the table prints (the grid ratio) in the legend, ours' mean per stage and, for one
// stage, its lower-bound line. A MoE plan's dense buffer. The title names both runs, and calls
// the peer the strongest when `strongest_peer` (peer_rule.h picked it).
std::string loads_svg(const model::ModelSpec& model, const PlanRun* peer, const PlanRun& ours,
                      bool strongest_peer);

}  // namespace canzona::plan
