// Cost models (cost.h): every optimizer-specific number comes from the optimizer's registry
// descriptor (optim/registry.h); this file only chooses the view and the options.
#include "canzona/cost/cost.h"

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/cost/calibration.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::cost {
std::string matrix_optimizer_list() {
  std::string names;
  for (const std::string& name : optim::optimizer_names(optim::OptimizerShape::kMatrix))
    names += (names.empty() ? "" : ", ") + name;
  return names;
}

void check_options(const CostOptions& options) {
  const optim::OptimizerSpec& d = optim::find_optimizer_spec(options.matrix_optimizer);
  CANZONA_REQUIRE(d.shape == optim::OptimizerShape::kMatrix,
                  "--optimizer must be a matrix optimizer (", matrix_optimizer_list(), "), got '",
                  options.matrix_optimizer, "'");
  optim::effective_options(options.matrix_optimizer, options.optimizer_options);
}

const nlohmann::json& options_for(const std::string& optimizer, const CostOptions& options) {
  static const nlohmann::json kDefaults = nlohmann::json::object();
  return optimizer == options.matrix_optimizer ? options.optimizer_options : kDefaults;
}

CostKind parse_cost_kind(const std::string& name) {
  if (name == "numel") return CostKind::kNumel;
  if (name == "flops") return CostKind::kFlops;
  if (name == "memory") return CostKind::kMemory;
  if (name == "calibrated") return CostKind::kCalibrated;
  throw UsageError(
      str("unknown cost model '", name, "' (expected numel, flops, memory or calibrated)"));
}

const char* to_string(CostKind kind) {
  switch (kind) {
    case CostKind::kNumel:
      return "numel";
    case CostKind::kFlops:
      return "flops";
    case CostKind::kMemory:
      return "memory";
    case CostKind::kCalibrated:
      return "calibrated";
  }
  return "?";
}

double optimizer_flops(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                       const CostOptions& options) {
  return optim::find_optimizer_spec(optimizer).flops(rows, cols, options_for(optimizer, options));
}

double state_bytes(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                   const CostOptions& options) {
  const double state = optim::find_optimizer_spec(optimizer).state_bytes(
      rows, cols, options_for(optimizer, options));
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);
  const bool elementwise = optimizer == kElementwiseOptimizer;
  const bool bf16 = options.precision == DType::kBF16;
  // The fp32 main copy: a matrix task's always, an element-wise task's under bf16 only.
  const double main = elementwise && !bf16 ? 0.0 : 4.0;
  if (options.zero_stage != ZeroStage::kThree)
    return state + (elementwise && bf16 ? 4.0 : 0.0) * elements;
  const double param = static_cast<double>(dtype_bytes(options.precision));
  const double grad = options.grad_reduce_in_fp32 ? 4.0 : param;
  return state + (param + grad + main) * elements;
}

ElementwiseRates elementwise_rates(const CostOptions& options) {
  return {optimizer_flops(kElementwiseOptimizer, 1, 1, options),
          state_bytes(kElementwiseOptimizer, 1, 1, options)};
}

double factorization_flops(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                           const CostOptions& options) {
  const optim::OptimizerSpec& d = optim::find_optimizer_spec(optimizer);
  const nlohmann::json& o = options_for(optimizer, options);
  if (d.factorization_flops == nullptr) {
    d.flops(rows, cols, o);  // checks the options like every other cost function
    return 0.0;
  }
  return d.factorization_flops(rows, cols, o);
}

double task_cost(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options) {
  switch (options.kind) {
    case CostKind::kNumel:
      optimizer_flops(optimizer, rows, cols, options);  // checks name and options
      return static_cast<double>(rows) * static_cast<double>(cols);
    case CostKind::kFlops:
      return optimizer_flops(optimizer, rows, cols, options);
    case CostKind::kMemory:
      return state_bytes(optimizer, rows, cols, options);
    case CostKind::kCalibrated:
      CANZONA_REQUIRE(options.calibration != nullptr,
                      "cost model 'calibrated' needs a calibration file (--calibration FILE)");
      return options.calibration->seconds(optimizer, rows, cols, options);
  }
  return 0.0;
}

void set_matrix_optimizer(CostOptions& options, const std::string& name,
                          const OptimizerFlags& flags) {
  if (flags.ns_steps)
    require_in_range(*flags.ns_steps, 1, kMaxNsSteps, "--ns-steps", "kMaxNsSteps");
  if (flags.precondition_frequency)
    require_in_range(*flags.precondition_frequency, 1, kMaxPreconditionFrequency,
                     "--precondition-frequency", "kMaxPreconditionFrequency");
  if (flags.max_precond_dim)
    require_in_range(*flags.max_precond_dim, 0, kMaxPrecondDim, "--max-precond-dim",
                     "kMaxPrecondDim");
  optim::find_optimizer_spec(name);
  const nlohmann::json known = optim::effective_options(name, nlohmann::json::object());
  // Options already set for this optimizer (--ns-dtype, --ns-algorithm: the planning flags) stay.
  nlohmann::json given = options.matrix_optimizer == name && options.optimizer_options.is_object()
                             ? options.optimizer_options
                             : nlohmann::json::object();
  if (flags.ns_steps && known.contains("ns_steps")) given["ns_steps"] = *flags.ns_steps;
  if (flags.precondition_frequency && known.contains("precondition_frequency"))
    given["precondition_frequency"] = *flags.precondition_frequency;
  if (flags.max_precond_dim && known.contains("max_precond_dim"))
    given["max_precond_dim"] = *flags.max_precond_dim;
  optim::effective_options(name, given);
  options.matrix_optimizer = name;
  options.optimizer_options = std::move(given);
}

std::string default_option(const std::string& name, const std::string& key) {
  const nlohmann::json defaults = optim::effective_options(name, nlohmann::json::object());
  return defaults.contains(key) ? defaults.at(key).dump() : "";
}

}  // namespace canzona::cost
