// Shampoo's spec (optimizer_spec.h): its option names and defaults, the names of its enums, its
// cost formulas.
#include <algorithm>
#include <cmath>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "kronecker_cost.h"
#include "options_reader.h"

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

namespace detail {

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

namespace {

constexpr double kEighFlops = 9.0;  // symmetric eigendecomposition ~ 9 n^3
constexpr double kRootFlops = 2.0;  // V diag(l^-1/4) V^T ~ 2 n^3

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

OptimizerSpec shampoo_spec() {
  return {"shampoo",     OptimizerShape::kMatrix, effective_reader(read_shampoo_options),
          shampoo_flops, shampoo_state_bytes,     shampoo_factorization_flops};
}

}  // namespace detail
}  // namespace canzona::optim
