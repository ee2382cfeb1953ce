// Sign-SGD: W <- W - lr sign(G), element by element, with sign(0) = 0; no state.
//
// Everything the rest of Canzona needs is here: the class, the factory with its option keys and
// defaults ({"lr": 0.01}, lr in (0, 1]), the cost formulas (one sign-and-subtract per element,
// so rows cols FLOPs per step; 0 state bytes; no factorizations) and the registry descriptor.
#include "toy_sign_sgd.h"

#include <cmath>
#include <mutex>

#include "canzona/common/error.h"
#include "canzona/optim/registry.h"

namespace canzona::optim::toy {
namespace {

class SignSgd final : public Optimizer {
 public:
  SignSgd(ParamInfo param, double lr) : Optimizer(std::move(param)), lr_(static_cast<float>(lr)) {}

  const char* name() const override { return kSignSgd; }
  std::size_t state_bytes() const override { return 0; }

 protected:
  void update(MatrixView param, ConstMatrixView grad, std::int64_t /*step*/) override {
    for (std::int64_t r = 0; r < param.rows; ++r) {
      float* w = param.row(r);
      const float* g = grad.row(r);
      for (std::int64_t c = 0; c < param.cols; ++c) {
        const float sign = g[c] > 0.0f ? 1.0f : (g[c] < 0.0f ? -1.0f : 0.0f);
        w[c] = w[c] - lr_ * sign;
      }
    }
  }

 private:
  float lr_;
};

// The one option, strictly: {} or null keep lr = 0.01; any other key is a UsageError.
double read_lr(const nlohmann::json& options, nlohmann::json* effective) {
  double lr = 0.01;
  if (!options.is_null()) {
    CANZONA_REQUIRE(options.is_object(), "sign_sgd options must be a JSON object");
    for (const auto& [key, value] : options.items()) {
      CANZONA_REQUIRE(key == "lr", "sign_sgd: unknown option '", key, "' (known: lr)");
      CANZONA_REQUIRE(value.is_number(), "sign_sgd option 'lr' must be a number");
      lr = value.get<double>();
    }
  }
  CANZONA_REQUIRE(std::isfinite(lr) && lr > 0.0 && lr <= 1.0, "sign_sgd option 'lr' = ", lr,
                  " must lie in (0, 1]");
  if (effective != nullptr) *effective = {{"lr", lr}};
  return lr;
}

std::unique_ptr<Optimizer> make_sign_sgd(const ParamInfo& param, const nlohmann::json& options,
                                         nlohmann::json* effective) {
  return std::make_unique<SignSgd>(param, read_lr(options, effective));
}

double sign_sgd_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  read_lr(options, nullptr);
  return static_cast<double>(rows) * static_cast<double>(cols);
}

double sign_sgd_state_bytes(std::int64_t, std::int64_t, const nlohmann::json& options) {
  read_lr(options, nullptr);
  return 0.0;
}

const OptimizerDescriptor kSignSgdDescriptor{.name = kSignSgd,
                                             .shape = OptimizerShape::kMatrix,
                                             .make = make_sign_sgd,
                                             .flops = sign_sgd_flops,
                                             .state_bytes = sign_sgd_state_bytes};

}  // namespace

void register_sign_sgd() {
  static std::once_flag once;
  std::call_once(once, [] { register_optimizer(kSignSgdDescriptor); });
}

}  // namespace canzona::optim::toy
