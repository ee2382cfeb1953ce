// A launch's job options and each library's share of them (job.h).
#include "canzona/launch/job.h"

#include <algorithm>
#include <cmath>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/hex.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer_spec.h"
#include "canzona/optim/registry.h"

namespace canzona::launch {

void validate(const JobOptions& o) {
  // The grid, --alpha and --cmax-mb: the checks `plan`, `simulate`, `run` and `train` share.
  plan::PlanOptions shared;
  shared.dims = o.dims;
  shared.alpha = o.alpha;
  shared.cmax_mb = o.cmax_mb;
  plan::validate_options(shared);
  require_in_range(o.bucket_size, 0, kMaxBucketSize, "--bucket-size", "kMaxBucketSize");
  const std::vector<std::string> matrix = optim::optimizer_names(optim::OptimizerShape::kMatrix);
  CANZONA_REQUIRE(std::find(matrix.begin(), matrix.end(), o.optimizer) != matrix.end(),
                  "--optimizer must be a matrix optimizer: ", cost::matrix_optimizer_list(),
                  " (got '", o.optimizer, "'; element-wise params always use ",
                  cost::kElementwiseOptimizer, ")");
  CANZONA_REQUIRE(o.optimizer_options.is_object(), "optimizer options must be a JSON object");
  CANZONA_REQUIRE(o.adamw_options.is_object(), "adamw options must be a JSON object");
  // Builds one instance so unknown or mistyped option keys fail here, before any MPI work.
  optim::create_optimizer(o.optimizer, optim::ParamInfo{"options check", 2, 2},
                          o.optimizer_options);
  optim::create_optimizer(cost::kElementwiseOptimizer, optim::ParamInfo{"options check", 1, 2},
                          o.adamw_options);
}

model::BuildOptions build_options(const JobOptions& o) {
  model::BuildOptions build;
  build.tp = o.dims.tp;
  build.qkv_split = o.qkv_split;
  build.split_fc1 = o.split_fc1;
  return build;
}

model::ModelSpec load_model(const JobOptions& o) {
  return model::load_model(o.model, build_options(o));
}

engine::EngineOptions engine_options(const JobOptions& o) {
  engine::EngineOptions e;
  e.optimizer = o.optimizer;
  e.optimizer_options = o.optimizer_options;
  e.adamw_options = o.adamw_options;
  e.pipeline = o.pipeline;
  e.zero_stage = o.zero_stage;
  e.param_dtype = o.precision;
  e.grad_reduce_in_fp32 = o.grad_reduce_in_fp32;
  return e;
}

namespace {

// --ns-dtype / --ns-algorithm into the optimizer options (apply_planning_args).
void add_ns_args(const PlanningArgs& a, JobOptions& o, DimNames names) {
  const struct {
    const char* flag;
    const char* key;
    const std::string& value;
    void (*check)(const std::string&);
  } args[] = {
      {"--ns-dtype", "ns_dtype", a.ns_dtype,
       [](const std::string& v) { optim::parse_ns_dtype(v); }},
      {"--ns-algorithm", "ns_algorithm", a.ns_algorithm,
       [](const std::string& v) { optim::parse_ns_algorithm(v); }},
  };
  for (const auto& arg : args) {
    if (arg.value.empty()) continue;
    const char* name = names == DimNames::kFlags ? arg.flag : arg.key;
    try {
      arg.check(arg.value);
    } catch (const UsageError& e) {
      throw UsageError(str(name, ": ", e.what()));
    }
    CANZONA_REQUIRE(
        optim::find_optimizer_spec(o.optimizer).shape == optim::OptimizerShape::kMatrix &&
            optim::effective_options(o.optimizer, nlohmann::json::object()).contains(arg.key),
        name,
        " is an option of Muon's Newton-Schulz iteration; the matrix "
        "optimizer here is ",
        o.optimizer);
    if (!o.optimizer_options.is_object()) break;  // validate() names the non-object options
    if (o.optimizer_options.contains(arg.key))
      CANZONA_REQUIRE(o.optimizer_options[arg.key] == arg.value, name, " ", arg.value,
                      " disagrees with ",
                      names == DimNames::kFlags ? "--optimizer-options" : "optimizer_options",
                      "' \"", arg.key, "\": ", o.optimizer_options[arg.key].dump());
    o.optimizer_options[arg.key] = arg.value;
  }
}

}  // namespace

void apply_planning_args(const PlanningArgs& a, JobOptions& o, DimNames names) {
  o.planner = plan::parse_variant(a.planner);
  o.dims = a.dims;
  o.pp_layout = a.pp_layout;
  o.alpha = a.alpha;
  o.cmax_mb = a.cmax_mb;
  o.bucket_size = a.bucket_size;
  o.zero_stage = parse_zero_stage(a.zero_stage);
  o.layerwise_tp = plan::parse_layerwise_tp(a.layerwise_tp);
  o.layerwise_buckets = plan::parse_layerwise_buckets(a.layerwise_buckets);
  o.reorder_buckets = plan::parse_bucket_order(a.bucket_order);
  o.optimizer = a.optimizer;
  o.cost = cost::parse_cost_kind(a.cost);
  o.qkv_split = model::parse_qkv_split(a.split_qkv);
  o.split_fc1 = a.split_fc1;
  o.precision = parse_precision(a.precision);
  // fp32 gradients are what an fp32 run has anyway: the flag changes nothing there.
  o.grad_reduce_in_fp32 = a.grad_reduce_in_fp32 && o.precision == DType::kBF16;
  add_ns_args(a, o, names);
}

plan::PlanOptions plan_options(const JobOptions& o, plan::Strategy strategy) {
  plan::PlanOptions p;
  p.strategy = strategy;
  p.variant = o.planner;
  p.layerwise_tp = o.layerwise_tp;
  p.layerwise_buckets = o.layerwise_buckets;
  p.reorder_buckets = o.reorder_buckets;
  p.dims = o.dims;
  p.pp_layout = o.pp_layout;
  p.alpha = o.alpha;
  p.cmax_mb = o.cmax_mb;
  p.cost.kind = o.cost;
  p.cost.matrix_optimizer = o.optimizer;
  p.cost.optimizer_options = o.optimizer_options;
  p.layout.bucket_size = o.bucket_size;
  p.layout.zero_stage = o.zero_stage;
  p.cost.zero_stage = o.zero_stage;
  p.cost.precision = o.precision;
  p.cost.grad_reduce_in_fp32 = o.grad_reduce_in_fp32;
  return p;
}

Settings job_settings(const JobOptions& o, const std::vector<plan::Strategy>& strategies,
                      const model::ModelSpec& model, const Settings& loop) {
  std::string strategy_list;
  for (plan::Strategy s : strategies) {
    if (!strategy_list.empty()) strategy_list += ',';
    strategy_list += plan::to_string(s);
  }
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  Settings settings{
      {"--model", o.model},
      {"model spec", hex64(model_hash(model))},
      {"--split-qkv", model::to_string(o.qkv_split)},
      {"--split-fc1", flag(o.split_fc1)},
      {"--dp", std::to_string(o.dims.dp)},
      {"--tp", std::to_string(o.dims.tp)},
      {"--pp", std::to_string(o.dims.pp)},
      {"--ep", std::to_string(o.dims.ep)},
      {"--etp", std::to_string(o.dims.etp)},
      {"--optimizer", o.optimizer},
      {"--planner", plan::to_string(o.planner)},
      {"--layerwise-tp", plan::to_string(o.layerwise_tp)},
      {"--layerwise-buckets", plan::to_string(o.layerwise_buckets)},
      {"--bucket-order", o.reorder_buckets ? "free" : "keep"},
      {"--alpha", setting_value(o.alpha)},
      {"--cmax-mb", setting_value(o.cmax_mb)},
      {"--cost", cost::to_string(o.cost)},
      {"--bucket-size", std::to_string(o.bucket_size)},
      {"--zero-stage", std::to_string(to_int(o.zero_stage))},
  };
  if (!o.pp_layout.empty()) {
    std::string layout;
    for (int n : o.pp_layout) {
      if (!layout.empty()) layout += ',';
      layout += std::to_string(n);
    }
    settings.push_back({"--pp-layout", layout});
  }
  settings.insert(settings.end(), loop.begin(), loop.end());
  settings.insert(settings.end(), {{"--seed", std::to_string(o.seed)},
                                   {"--no-pipeline", flag(!o.pipeline)},
                                   {"--reduce-mode", comm::to_string(o.reduce_mode)},
                                   {"--precision", to_string(o.precision)},
                                   {"--grad-reduce-in-fp32", flag(o.grad_reduce_in_fp32)},
                                   {"--strategy", strategy_list}});
  // One setting per option the optimizers run with (given values over the defaults, keys sorted),
  // so {} and {"ns_steps": 5} agree and a disagreement names the key.
  const auto add_options = [&settings](const std::string& prefix, const nlohmann::json& options) {
    for (const auto& [key, value] : options.items())
      settings.push_back({str(prefix, " ", key), value.dump()});
  };
  add_options("--optimizer-options", optim::effective_options(o.optimizer, o.optimizer_options));
  add_options("adamw options", optim::effective_options("adamw", o.adamw_options));
  return settings;
}

}  // namespace canzona::launch
