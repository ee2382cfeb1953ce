// A launch's job options and each library's share of them (job.h).
#include "canzona/launch/job.h"

#include <algorithm>
#include <cmath>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/hex.h"
#include "canzona/optim/optimizer_spec.h"
#include "canzona/optim/registry.h"

namespace canzona::launch {

void validate(const JobOptions& o) {
  // The grid, --alpha and --cmax-mb: the checks `plan`, `simulate`, `run` and `train` share.
  plan::PlanOptions shared;
  shared.dp = o.dp;
  shared.tp = o.tp;
  shared.pp = o.pp;
  shared.ep = o.ep;
  shared.etp = o.etp;
  shared.alpha = o.alpha;
  shared.cmax_mb = o.cmax_mb;
  plan::validate_options(shared);
  CANZONA_REQUIRE(o.pp == 1, "--pp ", o.pp,
                  ": run and compare execute one pipeline stage only (use --pp 1; `canzona plan` "
                  "and `canzona simulate` handle pp > 1)");
  require_in_range(o.bucket_size, 0, kMaxBucketSize, "--bucket-size", "kMaxBucketSize");
  CANZONA_REQUIRE(o.zero_stage == 1 || o.zero_stage == 3, "--zero-stage ", o.zero_stage,
                  ": must be 1 (ZeRO-1) or 3 (ZeRO-3)");
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

bool shards_params(plan::Strategy s) {
  const plan::StrategyParts parts = plan::strategy_parts(s);
  return s != plan::Strategy::kLayerwise && parts.dp_sync == plan::DpSync::kReduceScatter &&
         parts.param_sync == plan::ParamSync::kBucketAllGather;
}

void check_zero_stage(int zero_stage, const std::vector<plan::Strategy>& strategies) {
  if (zero_stage != 3) return;
  for (plan::Strategy st : strategies)
    CANZONA_REQUIRE(shards_params(st), "--zero-stage 3: strategy ", plan::to_string(st),
                    plan::strategy_parts(st).dp_sync == plan::DpSync::kAllReduce
                        ? " All-Reduces gradients, so every rank keeps every param"
                        : " is Megatron-LM's layer-wise optimizer, which has no ZeRO-3",
                    "; ZeRO-3 runs asc, lb-asc and fsdp-a2a");
}

std::vector<plan::Strategy> strategies_for_stage(const std::string& list, int zero_stage) {
  std::vector<plan::Strategy> out = plan::parse_strategy_list(list);
  if (zero_stage == 3 && list == "all")
    out.erase(
        std::remove_if(out.begin(), out.end(), [](plan::Strategy s) { return !shards_params(s); }),
        out.end());
  check_zero_stage(zero_stage, out);
  return out;
}

model::BuildOptions build_options(const JobOptions& o) {
  model::BuildOptions build;
  build.tp = o.tp;
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
  return e;
}

void apply_planning_args(const PlanningArgs& a, JobOptions& o) {
  o.planner = plan::parse_variant(a.planner);
  o.dp = a.dp;
  o.tp = a.tp;
  o.pp = a.pp;
  o.ep = a.ep;
  o.etp = a.etp;
  o.alpha = a.alpha;
  o.cmax_mb = a.cmax_mb;
  o.bucket_size = a.bucket_size;
  o.zero_stage = a.zero_stage;
  o.layerwise_tp = plan::parse_layerwise_tp(a.layerwise_tp);
  o.layerwise_buckets = plan::parse_layerwise_buckets(a.layerwise_buckets);
  o.reorder_buckets = plan::parse_bucket_order(a.bucket_order);
  o.optimizer = a.optimizer;
  o.cost = cost::parse_cost_kind(a.cost);
  o.qkv_split = model::parse_qkv_split(a.split_qkv);
  o.split_fc1 = a.split_fc1;
}

plan::PlanOptions plan_options(const JobOptions& o, plan::Strategy strategy) {
  plan::PlanOptions p;
  p.strategy = strategy;
  p.variant = o.planner;
  p.layerwise_tp = o.layerwise_tp;
  p.layerwise_buckets = o.layerwise_buckets;
  p.reorder_buckets = o.reorder_buckets;
  p.dp = o.dp;
  p.tp = o.tp;
  p.pp = o.pp;
  p.ep = o.ep;
  p.etp = o.etp;
  p.alpha = o.alpha;
  p.cmax_mb = o.cmax_mb;
  p.cost.kind = o.cost;
  p.cost.matrix_optimizer = o.optimizer;
  p.cost.optimizer_options = o.optimizer_options;
  p.layout.bucket_size = o.bucket_size;
  p.layout.zero_stage = o.zero_stage;
  p.cost.zero_stage = o.zero_stage;
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
      {"--dp", std::to_string(o.dp)},
      {"--tp", std::to_string(o.tp)},
      {"--pp", std::to_string(o.pp)},
      {"--ep", std::to_string(o.ep)},
      {"--etp", std::to_string(o.etp)},
      {"--optimizer", o.optimizer},
      {"--planner", plan::to_string(o.planner)},
      {"--layerwise-tp", plan::to_string(o.layerwise_tp)},
      {"--layerwise-buckets", plan::to_string(o.layerwise_buckets)},
      {"--bucket-order", o.reorder_buckets ? "free" : "keep"},
      {"--alpha", setting_value(o.alpha)},
      {"--cmax-mb", setting_value(o.cmax_mb)},
      {"--cost", cost::to_string(o.cost)},
      {"--bucket-size", std::to_string(o.bucket_size)},
      {"--zero-stage", std::to_string(o.zero_stage)},
  };
  settings.insert(settings.end(), loop.begin(), loop.end());
  settings.insert(settings.end(), {{"--seed", std::to_string(o.seed)},
                                   {"--no-pipeline", flag(!o.pipeline)},
                                   {"--reduce-mode", comm::to_string(o.reduce_mode)},
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
