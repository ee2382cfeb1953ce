#include "kronecker.h"

#include <cmath>

#include "canzona/common/error.h"
#include "canzona/optim/linalg.h"

namespace canzona::optim::detail {

bool is_decay(double b) {
  return b >= 0.0 && b < 1.0;
}

void check_frequency_and_lr(const std::string& who, int precondition_frequency, double lr,
                            double weight_decay) {
  CANZONA_REQUIRE(precondition_frequency >= 1, who, ": precondition_frequency must be >= 1, got ",
                  precondition_frequency);
  CANZONA_REQUIRE(std::isfinite(lr) && std::isfinite(weight_decay), who,
                  ": lr and weight_decay must be finite");
}

bool allocate_side(std::int64_t n, std::int64_t max_precond_dim, std::vector<float>& statistic,
                   std::vector<float>& companion) {
  if (n > max_precond_dim) return false;
  statistic.assign(static_cast<std::size_t>(n * n), 0.0f);
  companion.assign(statistic.size(), 0.0f);
  return true;
}

MatrixView side_view(std::vector<float>& buffer, bool kept, std::int64_t n) {
  return matrix_view(buffer.data(), kept ? n : 0, kept ? n : 0);
}

void accumulate_statistics(ConstMatrixView grad, float gain, float decay, MatrixView l,
                           MatrixView r) {
  if (l.rows > 0) syrk_upper(Trans::kNo, gain, grad, decay, l);
  if (r.rows > 0) syrk_upper(Trans::kYes, gain, grad, decay, r);
}

}  // namespace canzona::optim::detail
