// `canzona plan`: plans a model for a DP x TP x PP grid and prints the balance before (asc, no
// balancing) and after (lb-asc as published, and ours), like the paper's Figure 3.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/cost/calibration.h"
#include "canzona/model/load.h"
#include "canzona/plan/report.h"
#include "command.h"
#include "planning_flags.h"

namespace canzona::apps {
namespace {

struct PlanFlags : PlanningFlags {
  std::string model;
  std::string strategy = "lb-asc";
  cost::OptimizerFlags optimizer_flags;  // unset: the optimizer's own defaults
  std::string json, svg, dump_params;
  bool json_given = false, svg_given = false, dump_params_given = false;  // even when empty
};

// Median of five planning runs of `options` (the plan itself is deterministic).
plan::PlanRun timed_plan(const model::ModelSpec& model, const plan::PlanOptions& options,
                         std::string label) {
  plan::PlanRun run;
  run.label = std::move(label);
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run.plan = plan::make_plan(model, options);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (ms.back() > 200.0) break;  // large plans: one timing is enough
  }
  std::sort(ms.begin(), ms.end());
  run.plan_ms = ms[ms.size() / 2];
  run.metrics = plan::compute_metrics(model, run.plan);
  return run;
}

int run_plan(const PlanFlags& f) {
  // Unusable output paths (empty, a directory, a missing or read-only directory) are found before
  // any work, so a long plan is never thrown away at the end.
  if (f.json_given) check_output_path(f.json, "--json");
  if (f.svg_given) check_output_path(f.svg, "--svg");
  if (f.dump_params_given) check_output_path(f.dump_params, "--dump-params");
  plan::PlanOptions options = to_plan_options(f);
  options.strategy = plan::parse_strategy(f.strategy);
  options.cost.kind = cost::parse_cost_kind(f.cost);
  cost::set_matrix_optimizer(options.cost, f.optimizer, f.optimizer_flags);
  // Flags first (plan::validate_options: grid, alpha, C_max, cost), then the files they name.
  plan::validate_options(options);
  CANZONA_REQUIRE(options.cost.kind != cost::CostKind::kCalibrated || !f.calibration.empty(),
                  "--cost calibrated needs --calibration FILE (written by canzona bench-kernels)");
  const model::ModelSpec model = model::load_model(f.model, to_build_options(f));

  cost::Calibration calibration;
  if (!f.calibration.empty()) {
    calibration = cost::Calibration::read(f.calibration);
    options.cost.calibration = &calibration;
  }

  // Before: asc (start-index, round-robin). After: the requested strategy; for lb-asc also the
  // paper's algorithms so every improvement is measured against them.
  std::vector<plan::PlanRun> runs;
  plan::PlanOptions before = options;
  before.strategy = plan::Strategy::kAsc;
  runs.push_back(timed_plan(model, before, "asc"));
  if (options.strategy == plan::Strategy::kLbAsc &&
      options.variant == plan::PlannerVariant::kCanzona) {
    plan::PlanOptions paper = options;
    paper.variant = plan::PlannerVariant::kPaper;
    runs.push_back(timed_plan(model, paper, "lb-asc (paper)"));
  }
  if (options.strategy != plan::Strategy::kAsc) {
    std::string label = plan::to_string(options.strategy);
    if (options.strategy == plan::Strategy::kLbAsc)
      label += options.variant == plan::PlannerVariant::kPaper ? " (paper)" : " (canzona)";
    runs.push_back(timed_plan(model, options, label));
  }
  for (const plan::PlanRun& run : runs) plan::require_finite(run);
  std::cout << plan::balance_table(model, runs);
  if (options.alpha != 1.0 && options.variant == plan::PlannerVariant::kCanzona)
    std::cout << "note: --alpha shapes Algorithm 1 (--planner paper); our planner places params by "
                 "load, so it ignores alpha\n";
  if (f.dump_params_given) model::write_param_list(f.dump_params, model);
  if (f.json_given) write_json_file(f.json, plan::plan_json(model, runs.back()));
  if (f.svg_given) write_text_file(f.svg, plan::loads_svg(runs.front(), runs.back()));
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  auto* sub = app.add_subcommand("plan", "Plan DP cuts, TP hosts and micro groups; print balance");
  sub->add_option("--model", flags->model,
                  "Preset name (qwen3-0.6b ... qwen3-32b, qwen3-tiny, qwen3-mini), a Hugging "
                  "Face config.json, or a param-list JSON")
      ->required();
  sub->add_option("--strategy", flags->strategy, "sc | layerwise | asc | lb-asc")
      ->capture_default_str();
  add_planning_flags(sub, *flags, PlanningCommand::kPlan);
  sub->add_option("--ns-steps", flags->optimizer_flags.ns_steps,
                  "Muon Newton-Schulz steps (cost model; default " +
                      cost::default_option("muon", "ns_steps") + ")");
  sub->add_option("--precondition-frequency", flags->optimizer_flags.precondition_frequency,
                  "Shampoo/SOAP preconditioner refresh interval (cost model; default " +
                      cost::default_option("shampoo", "precondition_frequency") + ")");
  sub->add_option("--max-precond-dim", flags->optimizer_flags.max_precond_dim,
                  "Shampoo/SOAP: sides above this are not preconditioned (default " +
                      cost::default_option("shampoo", "max_precond_dim") + ")");
  auto* json = sub->add_option("--json", flags->json, "Write the plan and its metrics as JSON");
  auto* svg =
      sub->add_option("--svg", flags->svg, "Write a per-rank load bar chart (before/after)");
  auto* dump =
      sub->add_option("--dump-params", flags->dump_params, "Write the model's param list as JSON");
  sub->callback([flags, json, svg, dump, &exit_code] {
    flags->json_given = json->count() > 0;
    flags->svg_given = svg->count() > 0;
    flags->dump_params_given = dump->count() > 0;
    exit_code = run_plan(*flags);
  });
}

}  // namespace canzona::apps
