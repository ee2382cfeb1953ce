#include "canzona/runtime/options.h"

#include <cmath>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"

namespace canzona::runtime {
namespace {

// Throws UsageError "<what> = value must be a finite number in [lo, hi] (<why>)" otherwise.
void require_real(double value, double lo, double hi, const char* what, const char* why) {
  if (!(std::isfinite(value) && value >= lo && value <= hi))
    throw UsageError(
        str(what, " = ", value, " must be a finite number in [", lo, ", ", hi, "] (", why, ")"));
}

}  // namespace

void validate(const RunOptions& o) {
  launch::validate(o);
  require_in_range(o.steps, 1, kMaxSteps, "--steps", "kMaxSteps");
  require_in_range(o.warmup, 0, kMaxSteps, "--warmup", "kMaxSteps");
  require_real(o.compute_scale, 0.0, kMaxComputeScale, "--compute-scale", "kMaxComputeScale");
  require_in_range(o.tokens, 1, kMaxTokens, "--tokens", "kMaxTokens");
}

}  // namespace canzona::runtime
