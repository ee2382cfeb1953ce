#include "canzona/optim/shampoo.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/linalg.h"
#include "kronecker.h"
#include "scratch.h"

namespace canzona::optim {

Shampoo::Shampoo(ParamInfo param, ShampooOptions options)
    : Optimizer(std::move(param)), options_(options) {
  const ParamInfo& p = this->param();
  const std::string who = str("shampoo for ", p.describe());
  CANZONA_REQUIRE(detail::is_decay(options_.beta1) && detail::is_decay(options_.beta2) &&
                      detail::is_decay(options_.graft_beta2),
                  who, ": beta1, beta2 and graft_beta2 must be in [0, 1)");
  CANZONA_REQUIRE(options_.eps > 0.0, who, ": eps must be > 0, got ", options_.eps);
  CANZONA_REQUIRE(options_.graft_eps >= 0.0, who, ": graft_eps must be >= 0");
  detail::check_frequency_and_lr(who, options_.precondition_frequency, options_.lr,
                                 options_.weight_decay);
  m_.assign(static_cast<std::size_t>(p.rows * p.cols), 0.0f);
  if (options_.grafting == Grafting::kAdam) v_.assign(m_.size(), 0.0f);
  left_ = detail::allocate_side(p.rows, options_.max_precond_dim, l_, l4_);
  right_ = detail::allocate_side(p.cols, options_.max_precond_dim, r_, r4_);
}

std::vector<NamedState> Shampoo::state() {
  const ParamInfo& p = param();
  auto square = [](std::vector<float>& v, std::int64_t side) {
    return v.empty() ? std::int64_t{0} : side;
  };
  return {{"exp_avg", p.rows, p.cols, m_, 1},
          {"graft_exp_avg_sq", v_.empty() ? 0 : p.rows, v_.empty() ? 0 : p.cols, v_, 1},
          {"factor_left", square(l_, p.rows), square(l_, p.rows), l_, 7},
          {"factor_right", square(r_, p.cols), square(r_, p.cols), r_, 0},
          {"inv_root_left", square(l4_, p.rows), square(l4_, p.rows), l4_, 3},
          {"inv_root_right", square(r4_, p.cols), square(r4_, p.cols), r4_, 0}};
}

std::size_t Shampoo::state_bytes() const {
  return (m_.size() + v_.size() + l_.size() + r_.size() + l4_.size() + r4_.size()) * sizeof(float);
}

void Shampoo::update(MatrixView param, ConstMatrixView grad, std::int64_t step) {
  const std::int64_t rows = param.rows, cols = param.cols;
  if (rows * cols == 0) return;
  const ShampooOptions o = scaled_lr(options_);
  MatrixView m = matrix_view(m_.data(), rows, cols);
  MatrixView l = detail::side_view(l_, left_, rows);
  MatrixView r = detail::side_view(r_, right_, cols);
  MatrixView l4 = detail::side_view(l4_, left_, rows);
  MatrixView r4 = detail::side_view(r4_, right_, cols);

  const float decay2 = static_cast<float>(o.beta2), gain2 = static_cast<float>(1.0 - o.beta2);
  detail::accumulate_statistics(grad, gain2, decay2, l, r);

  const float beta1 = static_cast<float>(o.beta1), gain1 = static_cast<float>(1.0 - o.beta1);
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* g = grad.row(i);
    float* mi = m.row(i);
    for (std::int64_t j = 0; j < cols; ++j) mi[j] = beta1 * mi[j] + gain1 * g[j];
  }

  if ((step - 1) % o.precondition_frequency == 0) {
    if (left_) symmetric_power(l, -0.25, o.eps, l4);
    if (right_) symmetric_power(r, -0.25, o.eps, r4);
  }

  detail::Scratch scratch;
  MatrixView p = scratch.matrix(rows, cols);  // L4 M R4
  if (left_ && right_) {
    MatrixView t = scratch.matrix(rows, cols);
    gemm(Trans::kNo, Trans::kNo, 1.0f, l4, m, 0.0f, t);
    gemm(Trans::kNo, Trans::kNo, 1.0f, t, r4, 0.0f, p);
  } else if (left_) {
    gemm(Trans::kNo, Trans::kNo, 1.0f, l4, m, 0.0f, p);
  } else if (right_) {
    gemm(Trans::kNo, Trans::kNo, 1.0f, m, r4, 0.0f, p);
  } else {
    copy(m, p);
  }

  double direction_scale = 1.0;  // D = direction_scale * P
  if (o.grafting != Grafting::kNone) {
    double graft_norm = 0.0;
    if (o.grafting == Grafting::kAdam) {
      MatrixView a = scratch.matrix(rows, cols);
      MatrixView v = matrix_view(v_.data(), rows, cols);
      const double t = static_cast<double>(step);
      const float bg = static_cast<float>(o.graft_beta2);
      const float gg = static_cast<float>(1.0 - o.graft_beta2);
      const float inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(o.beta1, t)));
      const float inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(o.graft_beta2, t)));
      const float geps = static_cast<float>(o.graft_eps);
      for (std::int64_t i = 0; i < rows; ++i) {
        const float* g = grad.row(i);
        const float* mi = m.row(i);
        float* vi = v.row(i);
        float* ai = a.row(i);
        for (std::int64_t j = 0; j < cols; ++j) {
          vi[j] = bg * vi[j] + gg * (g[j] * g[j]);
          ai[j] = (mi[j] * inv_c1) / (std::sqrt(vi[j] * inv_c2) + geps);
        }
      }
      graft_norm = frobenius_norm(a);
    } else {
      graft_norm = frobenius_norm(m);
    }
    const double p_norm = frobenius_norm(p);
    direction_scale = p_norm > 0.0 ? graft_norm / p_norm : 0.0;
  }

  const float decay = static_cast<float>(1.0 - o.lr * o.weight_decay);
  const float step_size = static_cast<float>(o.lr * direction_scale);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* w = param.row(i);
    const float* pi = p.row(i);
    for (std::int64_t j = 0; j < cols; ++j) w[j] = w[j] * decay - step_size * pi[j];
  }
}

std::unique_ptr<Optimizer> make_shampoo(const ParamInfo& param, const nlohmann::json& options,
                                        nlohmann::json* effective) {
  return std::make_unique<Shampoo>(param, detail::read_shampoo_options(options, effective));
}

}  // namespace canzona::optim
