#include "canzona/optim/soap.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/linalg.h"
#include "kronecker.h"
#include "scratch.h"

namespace canzona::optim {

Soap::Soap(ParamInfo param, SoapOptions options) : Optimizer(std::move(param)), options_(options) {
  const ParamInfo& p = this->param();
  const std::string who = str("soap for ", p.describe());
  CANZONA_REQUIRE(detail::is_decay(options_.beta1) && detail::is_decay(options_.beta2) &&
                      detail::is_decay(options_.shampoo_beta),
                  who, ": beta1, beta2 and shampoo_beta must be in [0, 1)");
  CANZONA_REQUIRE(options_.eps >= 0.0, who, ": eps must be >= 0");
  detail::check_frequency_and_lr(who, options_.precondition_frequency, options_.lr,
                                 options_.weight_decay);
  m_.assign(static_cast<std::size_t>(p.rows * p.cols), 0.0f);
  v_.assign(m_.size(), 0.0f);
  left_ = detail::allocate_side(p.rows, options_.max_precond_dim, l_, ql_);
  right_ = detail::allocate_side(p.cols, options_.max_precond_dim, r_, qr_);
}

std::vector<NamedState> Soap::state() {
  const ParamInfo& p = param();
  auto square = [](std::vector<float>& v, std::int64_t side) {
    return v.empty() ? std::int64_t{0} : side;
  };
  // exp_avg is kept in the param's basis; exp_avg_sq in the eigenbasis (rows = eigenvectors of
  // the left side), unless the left side is not preconditioned (identity).
  return {{"exp_avg", p.rows, p.cols, m_, 1},
          {"exp_avg_sq", p.rows, p.cols, v_, left_ ? 0 : 1},
          {"GG_left", square(l_, p.rows), square(l_, p.rows), l_, 7},
          {"GG_right", square(r_, p.cols), square(r_, p.cols), r_, 0},
          {"Q_left", square(ql_, p.rows), square(ql_, p.rows), ql_, 1},
          {"Q_right", square(qr_, p.cols), square(qr_, p.cols), qr_, 0}};
}

std::size_t Soap::state_bytes() const {
  return (m_.size() + v_.size() + l_.size() + r_.size() + ql_.size() + qr_.size()) * sizeof(float);
}

void Soap::accumulate_statistics(ConstMatrixView grad, float decay) {
  const float gain = static_cast<float>(1.0 - options_.shampoo_beta);
  detail::accumulate_statistics(grad, gain, decay, detail::side_view(l_, left_, grad.rows),
                                detail::side_view(r_, right_, grad.cols));
}

void Soap::refresh_basis(MatrixView stat, MatrixView q, bool left) {
  const std::int64_t n = q.rows;
  detail::Scratch scratch;
  MatrixView p = scratch.matrix(n, n);  // L Q
  symm_upper_left(1.0f, stat, q, 0.0f, p);

  // Estimated eigenvalues diag(Q^T L Q), in a fixed order; columns sorted descending.
  std::vector<double> estimate(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < n; ++k)
      estimate[static_cast<std::size_t>(k)] += static_cast<double>(q(i, k)) * p(i, k);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return estimate[static_cast<std::size_t>(a)] > estimate[static_cast<std::size_t>(b)];
  });

  // L (Q permuted) = (L Q) permuted: permute P's columns into Q, then orthonormalise.
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) q(i, j) = p(i, order[static_cast<std::size_t>(j)]);
  orthonormalize_columns(q);

  const ParamInfo& info = param();
  MatrixView v = matrix_view(v_.data(), info.rows, info.cols);
  MatrixView vs = scratch.matrix(info.rows, info.cols);
  copy(v, vs);
  for (std::int64_t i = 0; i < info.rows; ++i)
    for (std::int64_t j = 0; j < info.cols; ++j)
      v(i, j) = left ? vs(order[static_cast<std::size_t>(i)], j)
                     : vs(i, order[static_cast<std::size_t>(j)]);
}

void Soap::update(MatrixView param, ConstMatrixView grad, std::int64_t step) {
  const std::int64_t rows = param.rows, cols = param.cols;
  if (rows * cols == 0) return;
  const SoapOptions o = scaled_lr(options_);
  MatrixView l = detail::side_view(l_, left_, rows);
  MatrixView r = detail::side_view(r_, right_, cols);
  MatrixView ql = detail::side_view(ql_, left_, rows);
  MatrixView qr = detail::side_view(qr_, right_, cols);

  if (step == 1) {
    accumulate_statistics(grad, 0.0f);
    if (left_) symmetric_eigenvectors_descending(l, ql);
    if (right_) symmetric_eigenvectors_descending(r, qr);
    return;
  }
  const std::int64_t s = step - 1;  // Adam step

  detail::Scratch scratch;
  MatrixView t = scratch.matrix(rows, cols);
  MatrixView rotated = scratch.matrix(rows, cols);
  // rotated = Q_L^T x Q_R (identity sides skipped).
  auto rotate = [&](ConstMatrixView x) {
    if (left_ && right_) {
      gemm(Trans::kYes, Trans::kNo, 1.0f, ql, x, 0.0f, t);
      gemm(Trans::kNo, Trans::kNo, 1.0f, t, qr, 0.0f, rotated);
    } else if (left_) {
      gemm(Trans::kYes, Trans::kNo, 1.0f, ql, x, 0.0f, rotated);
    } else if (right_) {
      gemm(Trans::kNo, Trans::kNo, 1.0f, x, qr, 0.0f, rotated);
    } else {
      copy(x, rotated);
    }
  };

  MatrixView m = matrix_view(m_.data(), rows, cols);
  MatrixView v = matrix_view(v_.data(), rows, cols);
  rotate(grad);
  const float b1 = static_cast<float>(o.beta1), g1 = static_cast<float>(1.0 - o.beta1);
  const float b2 = static_cast<float>(o.beta2), g2 = static_cast<float>(1.0 - o.beta2);
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* g = grad.row(i);
    const float* gr = rotated.row(i);
    float* mi = m.row(i);
    float* vi = v.row(i);
    for (std::int64_t j = 0; j < cols; ++j) {
      mi[j] = b1 * mi[j] + g1 * g[j];
      vi[j] = b2 * vi[j] + g2 * (gr[j] * gr[j]);
    }
  }

  rotate(m);
  const float eps = static_cast<float>(o.eps);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* ri = rotated.row(i);
    const float* vi = v.row(i);
    for (std::int64_t j = 0; j < cols; ++j) ri[j] = ri[j] / (std::sqrt(vi[j]) + eps);
  }
  // n = Q_L rotated Q_R^T, written into t (or rotated when no side is preconditioned).
  MatrixView n = t;
  if (left_ && right_) {
    gemm(Trans::kNo, Trans::kNo, 1.0f, ql, rotated, 0.0f, t);
    gemm(Trans::kNo, Trans::kYes, 1.0f, t, qr, 0.0f, rotated);
    n = rotated;
  } else if (left_) {
    gemm(Trans::kNo, Trans::kNo, 1.0f, ql, rotated, 0.0f, t);
  } else if (right_) {
    gemm(Trans::kNo, Trans::kYes, 1.0f, rotated, qr, 0.0f, t);
  } else {
    n = rotated;
  }

  const double sd = static_cast<double>(s);
  const double alpha =
      o.correct_bias ? o.lr * std::sqrt(1.0 - std::pow(o.beta2, sd)) / (1.0 - std::pow(o.beta1, sd))
                     : o.lr;
  const float decay = static_cast<float>(1.0 - o.lr * o.weight_decay);
  const float step_size = static_cast<float>(alpha);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* w = param.row(i);
    const float* ni = n.row(i);
    for (std::int64_t j = 0; j < cols; ++j) w[j] = w[j] * decay - step_size * ni[j];
  }

  accumulate_statistics(grad, static_cast<float>(o.shampoo_beta));
  if (s % o.precondition_frequency == 0) {
    if (left_) refresh_basis(l, ql, true);
    if (right_) refresh_basis(r, qr, false);
  }
}

std::unique_ptr<Optimizer> make_soap(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective) {
  return std::make_unique<Soap>(param, detail::read_soap_options(options, effective));
}

}  // namespace canzona::optim
