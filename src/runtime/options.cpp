#include "canzona/runtime/options.h"

#include "canzona/common/error.h"
#include "canzona/optim/optimizer.h"

namespace canzona::runtime {

void validate(const RunOptions& o) {
  CANZONA_REQUIRE(o.dp > 0, "--dp must be positive (got ", o.dp, ")");
  CANZONA_REQUIRE(o.tp > 0, "--tp must be positive (got ", o.tp, ")");
  CANZONA_REQUIRE(o.pp == 1, "--pp ", o.pp,
                  ": run and compare execute one pipeline stage only (use --pp 1; `canzona plan` "
                  "and `canzona simulate` handle pp > 1)");
  CANZONA_REQUIRE(o.steps >= 1, "--steps must be >= 1 (got ", o.steps, ")");
  CANZONA_REQUIRE(o.warmup >= 0, "--warmup must be >= 0 (got ", o.warmup, ")");
  CANZONA_REQUIRE(o.compute_scale >= 0.0, "--compute-scale must be >= 0 (got ", o.compute_scale,
                  ")");
  CANZONA_REQUIRE(o.tokens > 0, "--tokens must be positive (got ", o.tokens, ")");
  CANZONA_REQUIRE(o.bucket_size >= 0, "--bucket-size must be >= 0 (got ", o.bucket_size, ")");
  CANZONA_REQUIRE(o.alpha >= 0.0 && o.alpha <= 1.0, "--alpha must be in [0, 1] (got ", o.alpha,
                  ")");
  CANZONA_REQUIRE(o.cmax_mb > 0.0, "--cmax-mb must be positive (got ", o.cmax_mb, ")");
  CANZONA_REQUIRE(o.optimizer == "muon" || o.optimizer == "shampoo" || o.optimizer == "soap",
                  "--optimizer must be a matrix optimizer: muon, shampoo or soap (got '",
                  o.optimizer, "'; element-wise params always use adamw)");
  CANZONA_REQUIRE(o.optimizer_options.is_object(), "optimizer options must be a JSON object");
  CANZONA_REQUIRE(o.adamw_options.is_object(), "adamw options must be a JSON object");
  // Builds one instance so unknown or mistyped option keys fail here, before any MPI work.
  optim::create_optimizer(o.optimizer, optim::ParamInfo{"options check", 2, 2},
                          o.optimizer_options);
  optim::create_optimizer("adamw", optim::ParamInfo{"options check", 1, 2}, o.adamw_options);
}

model::ModelSpec load_model(const RunOptions& o) {
  model::BuildOptions build;
  build.tp = o.tp;
  build.qkv_split = o.qkv_split;
  build.split_fc1 = o.split_fc1;
  return model::load_model(o.model, build);
}

plan::PlanOptions plan_options(const RunOptions& o, plan::Strategy strategy) {
  plan::PlanOptions p;
  p.strategy = strategy;
  p.variant = o.planner;
  p.dp = o.dp;
  p.tp = o.tp;
  p.pp = o.pp;
  p.alpha = o.alpha;
  p.cmax_mb = o.cmax_mb;
  p.cost.kind = o.cost;
  p.cost.matrix_optimizer = cost::parse_optimizer(o.optimizer);
  const nlohmann::json& opt = o.optimizer_options;
  if (opt.contains("ns_steps")) p.cost.ns_steps = opt["ns_steps"].get<int>();
  if (opt.contains("precondition_frequency"))
    p.cost.precondition_frequency = opt["precondition_frequency"].get<int>();
  if (opt.contains("max_precond_dim"))
    p.cost.max_precond_dim = opt["max_precond_dim"].get<std::int64_t>();
  p.layout.bucket_size = o.bucket_size;
  return p;
}

comm::ReduceMode parse_reduce_mode(const std::string& name) {
  if (name == "deterministic") return comm::ReduceMode::kDeterministic;
  if (name == "native") return comm::ReduceMode::kNative;
  throw UsageError(str("--reduce-mode must be deterministic or native (got '", name, "')"));
}

const char* to_string(comm::ReduceMode mode) {
  return mode == comm::ReduceMode::kDeterministic ? "deterministic" : "native";
}

}  // namespace canzona::runtime
