// Runs the four strategies side by side on one scenario, and sweeps one knob across the ranges of
// the paper's figures (model size 1.7B-32B, DP 16-128, TP 2-8, α 0-1, C_max).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "canzona/model/load.h"
#include "canzona/plan/plan.h"
#include "canzona/sim/sim_report.h"
#include "canzona/sim/simulate.h"

namespace canzona::sim {

// Limits of a simulated point (check_scenario). kMaxGridRanks is the grid's bound on dp x tp x pp
// (kMaxRanks, 2^20 GPUs, beyond any cluster built); kMaxSweepValues bounds the work of one
// --sweep (each value plans and simulates every strategy).
inline constexpr std::int64_t kMaxGridRanks = kMaxRanks;
inline constexpr std::size_t kMaxSweepValues = 32;

// Everything one simulated point needs except the strategy, which each run overrides.
struct Scenario {
  std::string model = "qwen3-32b";  // --model: preset, HF config.json or param list
  model::BuildOptions build;        // build.tp is overwritten with plan.tp
  plan::PlanOptions plan;
  Workload workload;
  int gpus = 0;  // > 0: keep dp * tp * pp == gpus (dp derived from tp and pp), e.g. in a TP sweep
};

enum class SweepKind { kModel, kDp, kTp, kAlpha, kCmax };
SweepKind parse_sweep_kind(const std::string& name);  // model|dp|tp|alpha|cmax; UsageError
const char* to_string(SweepKind kind);

// Values of each sweep when the user gives none: model qwen3-1.7b..qwen3-32b; dp 16, 32, 64, 128;
// tp 2, 4, 8; alpha 0, 0.25, 0.5, 0.75, 1; cmax (MiB) 1, 64, 128, 256, 512, 1024, 2048.
std::vector<std::string> default_sweep_values(SweepKind kind);

// Throws UsageError naming the flag and the limit unless the grid passes ParallelDims::check
// (with gpus > 0: gpus in [1, kMaxGridRanks], a multiple of tp x pp, and the grid checked with
// dp = gpus / (tp x pp)), the workload is valid (check_workload) and the cost options are
// (cost::check_options). No product can overflow.
void check_scenario(const Scenario& scenario);

// Loads the model, plans it under each strategy and simulates each plan. Results in the order of
// `strategies`. Throws UsageError as check_scenario (when gpus > 0 is not a multiple of tp * pp,
// among others).
std::vector<Breakdown> run_strategies(const Scenario& scenario, const Cluster& cluster,
                                      const std::vector<plan::Strategy>& strategies);

// `scenario` with one knob set from `value`. Throws UsageError when the value does not parse as
// a finite number (an integer in [1, kMaxGridRanks] for dp and tp).
Scenario with_value(Scenario scenario, SweepKind kind, const std::string& value);

// One ResultGroup per value, labelled with the value. Every value is parsed and its scenario
// checked (check_scenario) before the first point runs; throws UsageError for an empty list or
// more than kMaxSweepValues values.
std::vector<ResultGroup> run_sweep(const Scenario& scenario, const Cluster& cluster,
                                   const std::vector<plan::Strategy>& strategies, SweepKind kind,
                                   const std::vector<std::string>& values);

}  // namespace canzona::sim
