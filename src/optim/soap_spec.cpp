// SOAP's spec (optimizer_spec.h): its option names and defaults, its cost formulas.
#include <algorithm>
#include <cmath>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "kronecker_cost.h"
#include "options_reader.h"

namespace canzona::optim {

namespace detail {

SoapOptions read_soap_options(const nlohmann::json& options, nlohmann::json* effective) {
  SoapOptions o;
  detail::OptionsReader reader("soap", options, effective != nullptr);
  reader.read_in("lr", o.lr, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("beta1", o.beta1, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("beta2", o.beta2, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("shampoo_beta", o.shampoo_beta, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read_in("eps", o.eps, detail::kMinEps, 1.0, "kMinEps");
  reader.read_in("weight_decay", o.weight_decay, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("precondition_frequency", o.precondition_frequency, 1,
                 detail::kMaxPrecondFrequency, "kMaxPrecondFrequency");
  reader.read_in("max_precond_dim", o.max_precond_dim, 1, detail::kMaxPrecondDim, "kMaxPrecondDim");
  reader.read("correct_bias", o.correct_bias);
  reader.finish();
  if (effective != nullptr) *effective = reader.effective();
  return o;
}

namespace {

constexpr double kQrFlops = 4.0 / 3.0;  // Householder QR of n x n ~ 4/3 n^3

// Per preconditioned side s (other side o): statistics 2 s^2 o, rotating gradient, momentum and
// update back (6 s^2 o), and every f steps one power iteration (2 s^3) + QR amortised. Adam runs
// in the rotated space.
double soap_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  const SoapOptions o = read_soap_options(options, nullptr);
  const double f = o.precondition_frequency;
  const double total = kAdamFlopsPerElement * static_cast<double>(rows) * static_cast<double>(cols);
  return detail::add_kept_sides(total, rows, cols, o.max_precond_dim, [f](double s, double other) {
    return 8.0 * s * s * other + (2.0 + kQrFlops) * s * s * s / f;
  });
}

// The QR share of soap_flops: 4/3 s^3 / f per preconditioned side.
double soap_factorization_flops(std::int64_t rows, std::int64_t cols,
                                const nlohmann::json& options) {
  const SoapOptions o = read_soap_options(options, nullptr);
  const double total =
      detail::add_kept_sides(0.0, rows, cols, o.max_precond_dim,
                             [](double s, double) { return kQrFlops * std::pow(s, 3); });
  return total / std::max(1, o.precondition_frequency);
}

// Adam m and v, plus statistic and eigenbasis per preconditioned side.
double soap_state_bytes(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  return detail::two_sided_state_bytes(rows, cols,
                                       read_soap_options(options, nullptr).max_precond_dim);
}

}  // namespace

OptimizerSpec soap_spec() {
  return {"soap",     OptimizerShape::kMatrix, effective_reader(read_soap_options),
          soap_flops, soap_state_bytes,        soap_factorization_flops};
}

}  // namespace detail
}  // namespace canzona::optim
