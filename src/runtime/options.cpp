#include "canzona/runtime/options.h"

#include <algorithm>
#include <cmath>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/optim/registry.h"

namespace canzona::runtime {
namespace {

// Throws UsageError "<what> = value must be a finite number in [lo, hi] (<why>)" otherwise.
void require_real(double value, double lo, double hi, const char* what, const char* why) {
  if (!(std::isfinite(value) && value >= lo && value <= hi))
    throw UsageError(
        str(what, " = ", value, " must be a finite number in [", lo, ", ", hi, "] (", why, ")"));
}

}  // namespace

void validate(const RunOptions& o) {
  // The grid, --alpha and --cmax-mb: the checks `plan`, `simulate` and `run` share.
  plan::PlanOptions shared;
  shared.dp = o.dp;
  shared.tp = o.tp;
  shared.pp = o.pp;
  shared.alpha = o.alpha;
  shared.cmax_mb = o.cmax_mb;
  plan::validate_options(shared);
  CANZONA_REQUIRE(o.pp == 1, "--pp ", o.pp,
                  ": run and compare execute one pipeline stage only (use --pp 1; `canzona plan` "
                  "and `canzona simulate` handle pp > 1)");
  require_in_range(o.steps, 1, kMaxSteps, "--steps", "kMaxSteps");
  require_in_range(o.warmup, 0, kMaxSteps, "--warmup", "kMaxSteps");
  require_real(o.compute_scale, 0.0, kMaxComputeScale, "--compute-scale", "kMaxComputeScale");
  require_in_range(o.tokens, 1, kMaxTokens, "--tokens", "kMaxTokens");
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

model::ModelSpec load_model(const RunOptions& o) {
  model::BuildOptions build;
  build.tp = o.tp;
  build.qkv_split = o.qkv_split;
  build.split_fc1 = o.split_fc1;
  return model::load_model(o.model, build);
}

engine::EngineOptions engine_options(const RunOptions& o) {
  engine::EngineOptions e;
  e.optimizer = o.optimizer;
  e.optimizer_options = o.optimizer_options;
  e.adamw_options = o.adamw_options;
  e.pipeline = o.pipeline;
  return e;
}

plan::PlanOptions plan_options(const RunOptions& o, plan::Strategy strategy) {
  plan::PlanOptions p;
  p.strategy = strategy;
  p.variant = o.planner;
  p.layerwise_tp = o.layerwise_tp;
  p.layerwise_buckets = o.layerwise_buckets;
  p.reorder_buckets = o.reorder_buckets;
  p.dp = o.dp;
  p.tp = o.tp;
  p.pp = o.pp;
  p.alpha = o.alpha;
  p.cmax_mb = o.cmax_mb;
  p.cost.kind = o.cost;
  p.cost.matrix_optimizer = o.optimizer;
  p.cost.optimizer_options = o.optimizer_options;
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
