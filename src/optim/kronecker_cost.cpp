// Cost formulas of two-sided Kronecker factors (kronecker_cost.h).
#include "kronecker_cost.h"

namespace canzona::optim::detail {

double two_sided_state_bytes(std::int64_t rows, std::int64_t cols, std::int64_t max_precond_dim) {
  constexpr double kF32 = sizeof(float);
  const double total = 2.0 * kF32 * static_cast<double>(rows) * static_cast<double>(cols);
  return add_kept_sides(total, rows, cols, max_precond_dim,
                        [](double s, double) { return 2.0 * kF32 * s * s; });
}

}  // namespace canzona::optim::detail
