// `canzona simulate`: projects plans onto a cluster of GPUs (docs/simulator.md). Plans the model
// under each requested strategy, simulates one iteration of each and prints a table; optionally
// writes JSON and an SVG of stacked bars, or sweeps one knob across the paper's ranges.
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/cost/calibration.h"
#include "canzona/cost/cost.h"
#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/optim/registry.h"
#include "canzona/sim/cluster.h"
#include "canzona/sim/sim_report.h"
#include "canzona/sim/sweep.h"
#include "command.h"
#include "planning_flags.h"

namespace canzona::apps {

namespace {

// The planning flags (PlanningFlags) become scenario.plan and scenario.build in resolve().
struct SimulateArgs : PlanningFlags {
  sim::Scenario scenario;
  std::string strategies = "all";
  cost::OptimizerFlags optimizer_flags;  // unset: the optimizer's own defaults
  std::string grad_dtype = "fp32";
  std::string param_dtype = "bf16";
  CLI::Option* grad_dtype_flag = nullptr;
  CLI::Option* param_dtype_flag = nullptr;
  std::string var_collective = "grouped";
  std::string cluster = "h100-8";
  bool no_tp_pipeline = false;
  bool no_attention_flops = false;
  std::string sweep;
  std::string sweep_values;
  std::string json_path;
  std::string svg_path;
  std::string dump_cluster_path;
  // Whether --json/--svg/--dump-cluster were given at all (an empty path given is an error, not
  // "no output").
  bool json_given = false;
  bool svg_given = false;
  bool dump_cluster_given = false;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Completes the scenario from the string flags; throws UsageError on a bad value. `calibration`
// must outlive the scenario (the plan options borrow it).
void resolve(SimulateArgs& a, cost::Calibration& calibration) {
  auto& plan = a.scenario.plan;
  plan = to_plan_options(a);
  plan.cost.kind = cost::parse_cost_kind(a.cost);
  if (!a.calibration.empty()) {
    calibration = cost::Calibration::read(a.calibration);
    plan.cost.calibration = &calibration;
  }
  CANZONA_REQUIRE(plan.cost.kind != cost::CostKind::kCalibrated || !a.calibration.empty(),
                  "--cost calibrated needs --calibration FILE (written by canzona bench-kernels)");
  cost::set_matrix_optimizer(plan.cost, a.optimizer, a.optimizer_flags);
  CANZONA_REQUIRE(optim::find_optimizer(a.optimizer).shape == optim::OptimizerShape::kMatrix,
                  "--optimizer: give a matrix optimizer (", cost::matrix_optimizer_list(), ")");
  a.scenario.build = to_build_options(a);
  // --precision (and --grad-reduce-in-fp32), the spelling run, compare and plan share, sets the
  // dtypes --param-dtype and --grad-dtype otherwise set (defaults: bf16 params, fp32 gradients);
  // --grad-reduce-in-fp32 alone keeps the param dtype and makes the gradients fp32.
  const bool precision_given = a.precision_flag->count() > 0;
  const bool grad_fp32_given = a.grad_fp32_flag->count() > 0;
  CANZONA_REQUIRE(!(precision_given && a.param_dtype_flag->count() > 0) &&
                      !((precision_given || grad_fp32_given) && a.grad_dtype_flag->count() > 0),
                  "--precision and --grad-reduce-in-fp32 set --param-dtype and --grad-dtype: "
                  "give one spelling");
  if (precision_given) a.param_dtype = a.precision;
  if (precision_given || grad_fp32_given)
    a.grad_dtype = a.grad_reduce_in_fp32 ? "fp32" : a.param_dtype;
  CANZONA_REQUIRE(a.grad_dtype == "fp32" || a.grad_dtype == "bf16",
                  "--grad-dtype: expected fp32 or bf16, got '", a.grad_dtype, "'");
  a.scenario.workload.grad_bytes = a.grad_dtype == "fp32" ? 4.0 : 2.0;
  CANZONA_REQUIRE(a.param_dtype == "fp32" || a.param_dtype == "bf16",
                  "--param-dtype: expected fp32 or bf16, got '", a.param_dtype, "'");
  a.scenario.workload.param_bytes = a.param_dtype == "fp32" ? 4.0 : 2.0;
  // The plan's memory model at the dtypes simulated.
  plan.cost.precision = parse_precision(a.param_dtype, "--param-dtype");
  plan.cost.grad_reduce_in_fp32 = a.param_dtype == "bf16" && a.grad_dtype == "fp32";
  a.scenario.workload.tp_pipeline = !a.no_tp_pipeline;
  a.scenario.workload.var_collective = sim::parse_var_collective(a.var_collective);
  a.scenario.workload.attention_flops = !a.no_attention_flops;
}

nlohmann::json scenario_json(const SimulateArgs& a, const sim::Cluster& cluster) {
  const auto& s = a.scenario;
  const auto& w = s.workload;
  return {{"model", s.model},
          {"gpus", s.gpus},
          {"dp", s.plan.dims.dp},
          {"tp", s.plan.dims.tp},
          {"pp", s.plan.dims.pp},
          {"ep", s.plan.dims.ep},
          {"etp", s.plan.dims.etp},
          {"optimizer", a.optimizer},
          {"alpha", s.plan.alpha},
          {"cmax_mb", s.plan.cmax_mb},
          {"planner", a.planner},
          {"cost", a.cost},
          {"split_qkv", a.split_qkv},
          {"split_fc1", s.build.split_fc1},
          {"bucket_size", s.plan.layout.bucket_size},
          {"var_collective", sim::to_string(s.workload.var_collective)},
          {"cluster", sim::to_json(cluster)},
          {"workload",
           {{"tokens", w.tokens},
            {"seq_len", w.seq_len},
            {"micro_batch", w.micro_batch},
            {"grad_bytes", w.grad_bytes},
            {"param_bytes", w.param_bytes},
            {"adamw_bytes_per_element", w.adamw_bytes_per_element},
            {"attention_flops", w.attention_flops},
            {"tp_pipeline", w.tp_pipeline}}}};
}

void print_header(const SimulateArgs& a, const sim::Cluster& cluster, const std::string& dp_text) {
  const auto& p = a.scenario.plan;
  const auto& w = a.scenario.workload;
  const std::int64_t gpus =
      a.scenario.gpus > 0 ? a.scenario.gpus : std::int64_t{p.dims.dp} * p.dims.tp * p.dims.pp;
  std::printf(
      "model %s  dp=%s tp=%d pp=%d%s (%lld GPUs)  optimizer=%s  planner=%s  cost=%s  "
      "alpha=%g  cmax=%g MiB\ncluster %s (%s, %d GPUs/node)  tokens/iteration=%lld  "
      "seq_len=%lld  micro_batch=%lld  TP micro groups %s\n\n",
      a.scenario.model.c_str(), dp_text.c_str(), p.dims.tp, p.dims.pp,
      p.dims.ep != 1 || p.dims.etp != 1 ? str(" ep=", p.dims.ep, " etp=", p.dims.etp).c_str() : "",
      static_cast<long long>(gpus), a.optimizer.c_str(), a.planner.c_str(), a.cost.c_str(), p.alpha,
      p.cmax_mb, cluster.name.c_str(), cluster.device.name.c_str(), cluster.gpus_per_node,
      static_cast<long long>(w.tokens), static_cast<long long>(w.seq_len),
      static_cast<long long>(w.micro_batch), w.tp_pipeline ? "pipelined" : "sequential");
}

// Checks every output path before any work, so a bad --json/--svg/--dump-cluster costs nothing
// and writes nothing.
void check_outputs(const SimulateArgs& a) {
  struct Output {
    const std::string* path;
    bool given;
    const char* flag;
  };
  const Output outputs[] = {{&a.json_path, a.json_given, "--json"},
                            {&a.svg_path, a.svg_given, "--svg"},
                            {&a.dump_cluster_path, a.dump_cluster_given, "--dump-cluster"}};
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    const auto& [path, given, flag] = outputs[i];
    if (!given) continue;
    check_output_path(*path, flag);
    for (std::size_t j = 0; j < i; ++j) {
      CANZONA_REQUIRE(!outputs[j].given || *outputs[j].path != *path, flag, " and ",
                      outputs[j].flag, " name the same file '", *path, "'");
    }
  }
}

// Runs the scenario and writes every output; stdout and the files are produced only once the
// whole simulation succeeded, so a failure leaves nothing behind.
void run(SimulateArgs& a) {
  cost::Calibration calibration;
  resolve(a, calibration);
  auto& p = a.scenario.plan;
  const int gpus = a.scenario.gpus;
  CANZONA_REQUIRE(gpus == 0 || a.sweep != "dp", "--gpus fixes dp; it cannot be swept");
  CANZONA_REQUIRE(!a.sweep.empty() || a.sweep_values.empty(), "--sweep-values needs --sweep");
  if (a.sweep != "tp") {
    sim::check_scenario(a.scenario);
    if (gpus > 0) p.dims.dp = gpus / (p.dims.tp * p.dims.pp);
  }
  check_outputs(a);
  const sim::Cluster cluster = sim::load_cluster(a.cluster);
  const auto strategies = plan::strategies_for_stage(a.strategies, p.layout.zero_stage);
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      CANZONA_REQUIRE(strategies[i] != strategies[j], "--strategy lists '",
                      plan::to_string(strategies[i]), "' more than once");
    }
  }
  if (a.sweep != "tp") sim::tp_link(cluster, p.dims.tp);  // a TP group must fit in a node
  const std::string dp_text =
      gpus > 0 && a.sweep == "tp" ? "gpus/(tp*pp)" : std::to_string(p.dims.dp);

  nlohmann::json json = scenario_json(a, cluster);
  std::vector<sim::ResultGroup> groups;
  std::string table;
  if (a.sweep.empty()) {
    auto results = sim::run_strategies(a.scenario, cluster, strategies);
    table = sim::format_table(results);
    json["strategies"] = sim::to_json(results);
    groups.push_back({"", std::move(results)});
  } else {
    const sim::SweepKind kind = sim::parse_sweep_kind(a.sweep);
    auto values =
        a.sweep_values.empty() ? sim::default_sweep_values(kind) : split_list(a.sweep_values);
    groups = sim::run_sweep(a.scenario, cluster, strategies, kind, values);
    table = sim::format_sweep_table(sim::to_string(kind), groups);
    json["sweep"] = sim::to_string(kind);
    json["points"] = nlohmann::json::array();
    for (const auto& g : groups) {
      json["points"].push_back({{"value", g.label}, {"strategies", sim::to_json(g.results)}});
    }
  }
  std::string svg;
  if (a.svg_given) {
    std::string title = a.scenario.model + " " + a.optimizer + ", DP=" + dp_text +
                        " TP=" + std::to_string(p.dims.tp) + " PP=" + std::to_string(p.dims.pp) +
                        " on " + cluster.name + (a.sweep.empty() ? "" : ", sweep " + a.sweep);
    svg = sim::render_svg(title, groups);
  }
  if (a.dump_cluster_given) write_json_file(a.dump_cluster_path, sim::to_json(cluster));
  if (a.json_given) write_json_file(a.json_path, json);
  if (a.svg_given) write_text_file(a.svg_path, svg);
  print_header(a, cluster, dp_text);
  std::fputs(table.c_str(), stdout);
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SimulateArgs>();
  auto& a = *args;
  auto& work = a.scenario.workload;
  a.dims.dp = 32;  // the paper's Figure 4 setup: 256 GPUs, DP=32, TP=8
  a.dims.tp = 8;
  auto* sub = app.add_subcommand(
      "simulate", "Project one training iteration of each strategy onto a GPU cluster");
  sub->add_option("--model", a.scenario.model, "preset name, HF config.json or param-list JSON")
      ->capture_default_str();
  add_planning_flags(sub, a, PlanningCommand::kSimulate);
  sub->add_option("--gpus", a.scenario.gpus,
                  "keep dp * tp * pp at this many GPUs (dp follows tp and pp; 0 = use --dp)")
      ->capture_default_str();
  sub->add_option("--strategy", a.strategies, "sc|layerwise|asc|lb-asc, a comma list, or all")
      ->capture_default_str();
  sub->add_option(
      "--ns-steps", a.optimizer_flags.ns_steps,
      "Muon Newton-Schulz steps (default " + cost::default_option("muon", "ns_steps") + ")");
  sub->add_option("--precondition-frequency", a.optimizer_flags.precondition_frequency,
                  "Shampoo/SOAP: eigendecomposition every f steps (default " +
                      cost::default_option("shampoo", "precondition_frequency") + ")");
  sub->add_option("--max-precond-dim", a.optimizer_flags.max_precond_dim,
                  "Shampoo/SOAP: sides above this are not preconditioned (default " +
                      cost::default_option("shampoo", "max_precond_dim") + ")");
  sub->add_option("--cluster", a.cluster, "h100-8|h200-8 or a cluster JSON file")
      ->capture_default_str();
  sub->add_option("--tokens", work.tokens, "global batch, tokens per iteration")
      ->capture_default_str();
  sub->add_option("--seq-len", work.seq_len, "tokens per sequence")->capture_default_str();
  sub->add_option("--micro-batch", work.micro_batch, "sequences per micro batch")
      ->capture_default_str();
  a.grad_dtype_flag =
      sub->add_option("--grad-dtype", a.grad_dtype,
                      "fp32|bf16 gradient buffer (or say --precision and --grad-reduce-in-fp32)")
          ->capture_default_str();
  a.param_dtype_flag =
      sub->add_option("--param-dtype", a.param_dtype,
                      "fp32|bf16 params in the param All-Gather (bf16: Megatron's model params; "
                      "fp32: Canzona's CPU runtime; or say --precision)")
          ->capture_default_str();
  sub->add_flag("--no-tp-pipeline", a.no_tp_pipeline,
                "run TP micro groups one after another (official code)");
  sub->add_option("--varsize-collectives", a.var_collective,
                  "uneven Reduce-Scatter/All-Gather: grouped (per-shard ring reduce) | padded | "
                  "direct (one exchange per collective, Canzona's MPI runtime)")
      ->capture_default_str();
  sub->add_flag("--no-attention-flops", a.no_attention_flops,
                "count only 6 * params * tokens for forward-backward");
  sub->add_option("--sweep", a.sweep, "model|dp|tp|alpha|cmax: one row per value");
  sub->add_option("--sweep-values", a.sweep_values, "comma list overriding the sweep's values");
  auto* json = sub->add_option("--json", a.json_path, "write results as JSON");
  auto* svg = sub->add_option("--svg", a.svg_path, "write stacked bars as SVG");
  auto* dump = sub->add_option("--dump-cluster", a.dump_cluster_path,
                               "write the resolved cluster as JSON (a template for your own)");
  sub->callback([args, json, svg, dump, &exit_code] {
    args->json_given = json->count() > 0;
    args->svg_given = svg->count() > 0;
    args->dump_cluster_given = dump->count() > 0;
    run(*args);
    exit_code = 0;
  });
}

}  // namespace canzona::apps
