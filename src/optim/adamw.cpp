#include "canzona/optim/adamw.h"

#include <cmath>

#include "builtin_specs.h"
#include "canzona/common/error.h"

namespace canzona::optim {
namespace {

// Per-step scalars, computed once in double and rounded to float so every slice of a tensor
// uses identical values.
struct AdamWScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float decay;             // 1 - lr wd
  float step_size;         // lr / (1 - beta1^t)
  float sqrt_correction2;  // sqrt(1 - beta2^t)
  float eps;
};

AdamWScalars scalars(const AdamWOptions& o, std::int64_t t) {
  const double td = static_cast<double>(t);
  return AdamWScalars{static_cast<float>(o.beta1),
                      static_cast<float>(1.0 - o.beta1),
                      static_cast<float>(o.beta2),
                      static_cast<float>(1.0 - o.beta2),
                      static_cast<float>(1.0 - o.lr * o.weight_decay),
                      static_cast<float>(o.lr / (1.0 - std::pow(o.beta1, td))),
                      static_cast<float>(std::sqrt(1.0 - std::pow(o.beta2, td))),
                      static_cast<float>(o.eps)};
}

}  // namespace

void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m,
                  std::span<float> v, std::int64_t step, const AdamWOptions& options) {
  CANZONA_REQUIRE(
      grad.size() == param.size() && m.size() == param.size() && v.size() == param.size(),
      "adamw_update: lengths param ", param.size(), ", grad ", grad.size(), ", m ", m.size(),
      ", v ", v.size(), " differ");
  CANZONA_REQUIRE(step >= 1, "adamw_update: step must be >= 1, got ", step);
  const AdamWScalars s = scalars(options, step);
  const std::size_t n = param.size();
  float* w = param.data();
  const float* g = grad.data();
  float* mp = m.data();
  float* vp = v.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = s.beta1 * mp[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * vp[i] + s.one_minus_beta2 * (gi * gi);
    mp[i] = mi;
    vp[i] = vi;
    const float denom = std::sqrt(vi) / s.sqrt_correction2 + s.eps;
    w[i] = w[i] * s.decay - s.step_size * (mi / denom);
  }
}

AdamW::AdamW(ParamInfo param, AdamWOptions options)
    : Optimizer(std::move(param)), options_(options) {
  const std::string who = str("adamw for ", this->param().describe());
  CANZONA_REQUIRE(options_.beta1 >= 0.0 && options_.beta1 < 1.0, who,
                  ": beta1 must be in [0, 1), got ", options_.beta1);
  CANZONA_REQUIRE(options_.beta2 >= 0.0 && options_.beta2 < 1.0, who,
                  ": beta2 must be in [0, 1), got ", options_.beta2);
  CANZONA_REQUIRE(options_.eps >= 0.0, who, ": eps must be >= 0");
  CANZONA_REQUIRE(std::isfinite(options_.lr) && std::isfinite(options_.weight_decay), who,
                  ": lr and weight_decay must be finite");
  m_.assign(static_cast<std::size_t>(this->param().numel()), 0.0f);
  v_.assign(m_.size(), 0.0f);
}

std::vector<NamedState> AdamW::state() {
  const std::int64_t n = static_cast<std::int64_t>(m_.size());
  return {{"exp_avg", 1, n, m_, 0}, {"exp_avg_sq", 1, n, v_, 0}};
}

std::size_t AdamW::state_bytes() const {
  return (m_.size() + v_.size()) * sizeof(float);
}

void AdamW::step_slice(std::span<float> param, std::span<const float> grad, std::int64_t step) {
  CANZONA_REQUIRE(param.size() == m_.size() && grad.size() == m_.size(), "adamw: slice ",
                  this->param().describe(), " holds ", m_.size(), " elements, given param ",
                  param.size(), " and grad ", grad.size());
  const NonFinite bad = find_non_finite(matrix_view(grad.data(), 1, std::ssize(grad)));
  if (bad.found)
    throw Error(str("adamw: non-finite gradient for param ", this->param().describe(), " at step ",
                    step, ": element ", bad.col, " of the slice = ", bad.value,
                    "; param and optimizer state left unchanged"));
  adamw_update(param, grad, m_, v_, step, scaled_lr(options_));
}

void AdamW::update(MatrixView param, ConstMatrixView grad, std::int64_t step) {
  const std::size_t cols = static_cast<std::size_t>(param.cols);
  for (std::int64_t r = 0; r < param.rows; ++r) {
    const std::size_t offset = static_cast<std::size_t>(r) * cols;
    adamw_update(std::span<float>(param.row(r), cols), std::span<const float>(grad.row(r), cols),
                 std::span<float>(m_).subspan(offset, cols),
                 std::span<float>(v_).subspan(offset, cols), step, scaled_lr(options_));
  }
}

std::unique_ptr<Optimizer> make_adamw(const ParamInfo& param, const nlohmann::json& options,
                                      nlohmann::json* effective) {
  return std::make_unique<AdamW>(param, detail::read_adamw_options(options, effective));
}

}  // namespace canzona::optim
