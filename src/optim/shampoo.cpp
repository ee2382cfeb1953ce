#include "canzona/optim/shampoo.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/linalg.h"
#include "kronecker.h"
#include "options_reader.h"
#include "scratch.h"

namespace canzona::optim {

Grafting parse_grafting(const std::string& name) {
  if (name == "adam") return Grafting::kAdam;
  if (name == "sgd") return Grafting::kSgd;
  if (name == "none") return Grafting::kNone;
  throw UsageError(str("unknown grafting '", name, "' (known: adam, sgd, none)"));
}

const char* to_string(Grafting grafting) {
  switch (grafting) {
    case Grafting::kAdam:
      return "adam";
    case Grafting::kSgd:
      return "sgd";
    case Grafting::kNone:
      return "none";
  }
  return "?";
}

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

namespace {

constexpr double kEighFlops = 9.0;  // symmetric eigendecomposition ~ 9 n^3
constexpr double kRootFlops = 2.0;  // V diag(l^-1/4) V^T ~ 2 n^3

ShampooOptions read_shampoo_options(const nlohmann::json& options, nlohmann::json* effective) {
  ShampooOptions o;
  detail::OptionsReader reader("shampoo", options, effective != nullptr);
  reader.read_in("lr", o.lr, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("beta1", o.beta1, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("beta2", o.beta2, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("eps", o.eps, detail::kMinEps, 1.0, "kMinEps");
  reader.read_in("precondition_frequency", o.precondition_frequency, 1,
                 detail::kMaxPrecondFrequency, "kMaxPrecondFrequency");
  reader.read_in("max_precond_dim", o.max_precond_dim, 1, detail::kMaxPrecondDim, "kMaxPrecondDim");
  reader.read_in("weight_decay", o.weight_decay, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_enum("grafting", o.grafting, parse_grafting, to_string);
  reader.read_in("graft_beta2", o.graft_beta2, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("graft_eps", o.graft_eps, detail::kMinEps, 1.0, "kMinEps");
  reader.finish();
  if (effective != nullptr) *effective = reader.effective();
  return o;
}

// Per preconditioned side s (other side o): statistics 2 s^2 o, applying the root 2 s^2 o, and
// every f steps eigh + root formation (11 s^3) amortised. Grafting runs Adam.
double shampoo_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  const ShampooOptions o = read_shampoo_options(options, nullptr);
  const double f = o.precondition_frequency;
  const double total = kAdamFlopsPerElement * static_cast<double>(rows) * static_cast<double>(cols);
  return detail::add_kept_sides(total, rows, cols, o.max_precond_dim, [f](double s, double other) {
    return 4.0 * s * s * other + (kEighFlops + kRootFlops) * s * s * s / f;
  });
}

// The eigh share of shampoo_flops: 9 s^3 / f per preconditioned side.
double shampoo_factorization_flops(std::int64_t rows, std::int64_t cols,
                                   const nlohmann::json& options) {
  const ShampooOptions o = read_shampoo_options(options, nullptr);
  const double total =
      detail::add_kept_sides(0.0, rows, cols, o.max_precond_dim,
                             [](double s, double) { return kEighFlops * std::pow(s, 3); });
  return total / std::max(1, o.precondition_frequency);
}

// Momentum (also grafting Adam's m) and Adam's v, plus statistic and root per preconditioned side.
double shampoo_state_bytes(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  return detail::two_sided_state_bytes(rows, cols,
                                       read_shampoo_options(options, nullptr).max_precond_dim);
}
}  // namespace

std::unique_ptr<Optimizer> make_shampoo(const ParamInfo& param, const nlohmann::json& options,
                                        nlohmann::json* effective) {
  return std::make_unique<Shampoo>(param, read_shampoo_options(options, effective));
}

constinit const OptimizerDescriptor kShampooDescriptor{
    .name = "shampoo",
    .shape = OptimizerShape::kMatrix,
    .make = make_shampoo,
    .flops = shampoo_flops,
    .state_bytes = shampoo_state_bytes,
    .factorization_flops = shampoo_factorization_flops};

}  // namespace canzona::optim
