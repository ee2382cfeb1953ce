// The planning flags `canzona plan`, `canzona simulate` and `canzona run` / `compare` share: one
// declaration of each flag (name, default, help text) and one mapping onto plan::PlanOptions and
// model::BuildOptions, with the flag checks every command makes alike.
//
// Terms. A command *takes* a flag when add_planning_flags declares it for that command. Every
// command takes the grid (--dp, --tp, --pp), the planner knobs (--planner, --alpha, --cmax-mb,
// --bucket-size, --cost), the matrix optimizer (--optimizer), the task splits (--split-qkv,
// --split-fc1) and the precision (--precision, --grad-reduce-in-fp32). `plan` and `simulate` also
// take --calibration (for --cost calibrated), which `run` and `compare` refuse. The cost model's
// fields (PlanOptions::cost, with the optimizer's knobs --ns-steps ... of cost::OptimizerFlags) are
// filled by each command; the range checks of the grid, alpha and C_max are those of the library
// that consumes the options (plan::validate_options, sim::check_scenario, launch::validate).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace canzona::apps {

// The defaults are the commands' defaults (a command may change one before declaring the flags,
// e.g. simulate's dp 32, tp 8; --help shows the value at that time). The fields and their mapping
// onto the job options are launch::PlanningArgs's, shared with the Python package.
struct PlanningFlags : launch::PlanningArgs {
  CLI::Option* precision_flag = nullptr;  // given: count() > 0
  CLI::Option* grad_fp32_flag = nullptr;
};

enum class PlanningCommand { kPlan, kSimulate, kRun };

// Declares the flags `command` takes (see the paragraph above) on `sub`, bound to `flags`, which
// must outlive the parse.
void add_planning_flags(CLI::App* sub, PlanningFlags& flags, PlanningCommand command);

// Throws UsageError unless --bucket-size is in [0, layout::kMaxBucketSize]:
// "--bucket-size must be >= 0, 0 = Megatron default (got N)", else require_in_range's message
// naming kMaxBucketSize.
void check_bucket_size(std::int64_t bucket_size);

// The plan options the flags give (launch::plan_options of the job they map to): planner variant,
// grid, alpha, C_max, bucket size, layerwise TP mode and bucket order, the cost unit and matrix
// optimizer; the strategy is left at its default and a command completes the cost model (the
// optimizer's knobs, a calibration). Checks the bucket size (check_bucket_size) and parses every
// named flag (UsageError on an unknown name); the other ranges are checked where the options are
// consumed (plan::validate_options, make_plan, sim::check_scenario).
plan::PlanOptions to_plan_options(const PlanningFlags& flags);

// The model build options: tp (vocabulary padding) and the task splits. Throws UsageError on an
// unknown --split-qkv.
model::BuildOptions to_build_options(const PlanningFlags& flags);
// Copies the planning flags into the job options of `command` (run/compare, train): grid,
// optimizer, alpha, C_max, bucket size, task splits, planner and its knobs, cost. Throws
// UsageError as to_plan_options does (the bucket size aside: launch::validate checks it), and for
// --cost calibrated (not executed).
void apply_planning_flags(const PlanningFlags& flags, const char* command,
                          launch::JobOptions& options);
// --seed of run, compare and train: decimal digits only, within uint64 (CLI11 would wrap "-1" and
// saturate 10^23). Throws UsageError naming --seed otherwise.
std::uint64_t parse_seed(const std::string& text);

}  // namespace canzona::apps
