// AdamW's spec (optimizer_spec.h): its option names and defaults, its cost formulas.
#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "options_reader.h"

namespace canzona::optim {

namespace detail {

AdamWOptions read_adamw_options(const nlohmann::json& options, nlohmann::json* effective) {
  AdamWOptions o;
  detail::OptionsReader reader("adamw", options, effective != nullptr);
  reader.read_in("lr", o.lr, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("beta1", o.beta1, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("beta2", o.beta2, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("eps", o.eps, detail::kMinEps, 1.0, "kMinEps");
  reader.read_in("weight_decay", o.weight_decay, 0.0, detail::kMaxRate, "kMaxRate");
  reader.finish();
  if (effective != nullptr) *effective = reader.effective();
  return o;
}

namespace {

double adamw_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  read_adamw_options(options, nullptr);
  return kAdamFlopsPerElement * static_cast<double>(rows) * static_cast<double>(cols);
}

double adamw_state_bytes(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  read_adamw_options(options, nullptr);
  constexpr double kF32 = sizeof(float);
  return 2.0 * kF32 * static_cast<double>(rows) * static_cast<double>(cols);
}

}  // namespace

OptimizerSpec adamw_spec() {
  return {"adamw",
          OptimizerShape::kElementwise,
          effective_reader(read_adamw_options),
          adamw_flops,
          adamw_state_bytes,
          nullptr};
}

}  // namespace detail
}  // namespace canzona::optim
