// Cost formulas of two-sided Kronecker factors, shared by Shampoo's and SOAP's specs (internal;
// kronecker.h says what a kept side is). No kernels: canzona_optim_spec.
#pragma once

#include <cstdint>
#include <utility>

namespace canzona::optim::detail {

// Cost formulas. Adds per_side(s, other) to `total` for each kept side of a rows x cols matrix,
// left (s = rows) then right (s = cols), in that order, so every formula rounds the same way
// wherever it is evaluated.
template <typename PerSide>
double add_kept_sides(double total, std::int64_t rows, std::int64_t cols,
                      std::int64_t max_precond_dim, PerSide per_side) {
  const double m = static_cast<double>(rows);
  const double n = static_cast<double>(cols);
  for (auto [s, other] : {std::pair{m, n}, std::pair{n, m}}) {
    if (static_cast<std::int64_t>(s) > max_precond_dim) continue;
    total += per_side(s, other);
  }
  return total;
}

// State bytes of Shampoo and SOAP alike: two fp32 rows x cols buffers (momentum and a second
// moment) plus a statistic and its companion (s x s fp32 each) per kept side.
double two_sided_state_bytes(std::int64_t rows, std::int64_t cols, std::int64_t max_precond_dim);

}  // namespace canzona::optim::detail
