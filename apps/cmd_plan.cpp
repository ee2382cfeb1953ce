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
#include "canzona/layout/layout.h"
#include "canzona/model/load.h"
#include "command.h"
#include "plan_report.h"

namespace canzona::apps {
namespace {

struct PlanFlags {
  std::string model;
  std::string strategy = "lb-asc";
  std::string planner = "canzona";
  std::string optimizer = "muon";
  std::string cost = "flops";
  std::string calibration;
  std::string split_qkv = "none";
  bool split_fc1 = false;
  int dp = 1, tp = 1, pp = 1;
  double alpha = 1.0;
  double cmax_mb = 512.0;
  std::int64_t bucket_size = 0;
  int ns_steps = 5;
  int precondition_frequency = 10;
  std::int64_t max_precond_dim = 10000;
  std::string json, svg, dump_params;
  bool json_given = false, svg_given = false, dump_params_given = false;  // even when empty
};

// Median of five planning runs of `options` (the plan itself is deterministic).
PlanRun timed_plan(const model::ModelSpec& model, const plan::PlanOptions& options,
                   std::string label) {
  PlanRun run;
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
  CANZONA_REQUIRE(f.bucket_size >= 0, "--bucket-size must be >= 0, 0 = Megatron default (got ",
                  f.bucket_size, ")");
  require_in_range(f.bucket_size, 0, layout::kMaxBucketSize, "--bucket-size", "kMaxBucketSize");
  plan::PlanOptions options;
  options.strategy = plan::parse_strategy(f.strategy);
  options.variant = plan::parse_variant(f.planner);
  options.dp = f.dp;
  options.tp = f.tp;
  options.pp = f.pp;
  options.alpha = f.alpha;
  options.cmax_mb = f.cmax_mb;
  options.layout.bucket_size = f.bucket_size;
  options.cost.kind = cost::parse_cost_kind(f.cost);
  options.cost.matrix_optimizer = cost::parse_optimizer(f.optimizer);
  options.cost.ns_steps = f.ns_steps;
  options.cost.precondition_frequency = f.precondition_frequency;
  options.cost.max_precond_dim = f.max_precond_dim;
  // Flags first (plan::validate_options: grid, alpha, C_max, cost), then the files they name.
  plan::validate_options(options);
  CANZONA_REQUIRE(options.cost.kind != cost::CostKind::kCalibrated || !f.calibration.empty(),
                  "--cost calibrated needs --calibration FILE (written by canzona bench-kernels)");
  model::BuildOptions build;
  build.tp = f.tp;
  build.qkv_split = model::parse_qkv_split(f.split_qkv);
  build.split_fc1 = f.split_fc1;
  const model::ModelSpec model = model::load_model(f.model, build);

  cost::Calibration calibration;
  if (!f.calibration.empty()) {
    calibration = cost::Calibration::read(f.calibration);
    options.cost.calibration = &calibration;
  }

  // Before: asc (start-index, round-robin). After: the requested strategy; for lb-asc also the
  // paper's algorithms so every improvement is measured against them.
  std::vector<PlanRun> runs;
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
  for (const PlanRun& run : runs) require_finite(run);
  std::cout << balance_table(model, runs);
  if (options.alpha != 1.0 && options.variant == plan::PlannerVariant::kCanzona)
    std::cout << "note: --alpha shapes Algorithm 1 (--planner paper); our planner places params by "
                 "load, so it ignores alpha\n";
  if (f.dump_params_given) model::write_param_list(f.dump_params, model);
  if (f.json_given) write_json_file(f.json, plan_json(model, runs.back()));
  if (f.svg_given) write_text_file(f.svg, loads_svg(runs.front(), runs.back()));
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
  sub->add_option("--dp", flags->dp, "Data-parallel degree")->capture_default_str();
  sub->add_option("--tp", flags->tp, "Tensor-parallel degree")->capture_default_str();
  sub->add_option("--pp", flags->pp, "Pipeline stages (layers split evenly)")
      ->capture_default_str();
  sub->add_option("--strategy", flags->strategy, "sc | layerwise | asc | lb-asc")
      ->capture_default_str();
  sub->add_option("--planner", flags->planner, "canzona (ours) | paper (Algorithms 1 and 2)")
      ->capture_default_str();
  sub->add_option("--optimizer", flags->optimizer, "Matrix optimizer: muon | shampoo | soap")
      ->capture_default_str();
  sub->add_option("--cost", flags->cost, "Cost model: numel | flops | memory | calibrated")
      ->capture_default_str();
  sub->add_option("--calibration", flags->calibration,
                  "Calibration JSON from `canzona bench-kernels --calibration`");
  sub->add_option("--alpha", flags->alpha, "Algorithm 1 blend in [0, 1]")->capture_default_str();
  sub->add_option("--cmax-mb", flags->cmax_mb,
                  "Fused all-to-all capacity per host per micro group, MiB")
      ->capture_default_str();
  sub->add_option("--bucket-size", flags->bucket_size,
                  "DP bucket size in elements (0 = Megatron default max(40M, 1M x dp))")
      ->capture_default_str();
  sub->add_option("--split-qkv", flags->split_qkv, "Split fused QKV: none | qkv | head")
      ->capture_default_str();
  sub->add_flag("--split-fc1", flags->split_fc1, "Split fc1 into gate and up tasks");
  sub->add_option("--ns-steps", flags->ns_steps, "Muon Newton-Schulz steps (cost model)")
      ->capture_default_str();
  sub->add_option("--precondition-frequency", flags->precondition_frequency,
                  "Shampoo/SOAP preconditioner refresh interval (cost model)")
      ->capture_default_str();
  sub->add_option("--max-precond-dim", flags->max_precond_dim,
                  "Shampoo/SOAP: sides above this are not preconditioned")
      ->capture_default_str();
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
