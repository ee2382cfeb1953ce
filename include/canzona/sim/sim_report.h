// Presenting simulated iterations: a fixed-width table, JSON with stable keys, and an SVG of
// stacked bars (one bar per strategy, grouped per sweep point).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/sim/simulate.h"

namespace canzona::sim {

// One group of bars: a label (a sweep value, or empty for a single run) and one Breakdown per
// strategy.
struct ResultGroup {
  std::string label;
  std::vector<Breakdown> results;
};

// base.iteration_s / r.iteration_s, the iteration speedup of `r` over `base` the table and the SVG
// show. Throws Error (an internal fault) when it is not finite.
double iteration_speedup(const Breakdown& base, const Breakdown& r);

// Keys: strategy, iteration_s, fwd_bwd_s, dp_comm_exposed_s, optimizer_s, tp_comm_s,
// param_sync_s, dp_exchange_s, ep_comm_s, optimizer_step_s, expert_step_s, param_gather_total_s,
// param_gather_exposed_s, tp_comm_sequential_s, tp_comm_pipelined_s, dp_comm_total_s,
// optimizer_rank_max_s, optimizer_rank_mean_s, optimizer_balance, fwd_bwd_flops, micro_batches,
// critical_stage, micro_groups.
nlohmann::json to_json(const Breakdown& result);
// {"<strategy>": to_json(result), ...} in the given order.
nlohmann::json to_json(const std::vector<Breakdown>& results);

// One row per strategy with every phase in seconds and the step and iteration speedups over the
// first row, then dp_exchange_s, param_gather_total_s and param_gather_exposed_s; for MoE plans
// also ep_comm_s and expert_step_s.
std::string format_table(const std::vector<Breakdown>& results);
// One row per group: the label under `column`, then iteration and optimizer step per strategy.
std::string format_sweep_table(const std::string& column, const std::vector<ResultGroup>& groups);

// Stacked bars (fwd-bwd, exposed DP comm, optimizer, TP comm, owner exchange, param sync, EP
// comm) per strategy, grouped by ResultGroup, each bar labelled with its iteration time and its
// iteration speedup over the group's first strategy, with a seconds axis and a legend inside the
// canvas. When the strategies, sorted by their tallest bar, drop to less than half at some point
// (after sc's, usually), a second panel repeats those after the drop on their own scale and names
// what it leaves out. Self-contained SVG
// 1.1 text.
std::string render_svg(const std::string& title, const std::vector<ResultGroup>& groups);

}  // namespace canzona::sim
