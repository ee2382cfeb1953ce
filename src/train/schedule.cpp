// Learning-rate schedules (schedule.h).
#include "canzona/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "canzona/common/error.h"

namespace canzona::train {

Schedule parse_schedule(const std::string& name) {
  if (name == "constant") return Schedule::kConstant;
  if (name == "linear") return Schedule::kLinear;
  if (name == "cosine") return Schedule::kCosine;
  throw UsageError(str("--schedule must be constant, linear or cosine (got '", name, "')"));
}

const char* to_string(Schedule schedule) {
  switch (schedule) {
    case Schedule::kConstant:
      return "constant";
    case Schedule::kLinear:
      return "linear";
    case Schedule::kCosine:
      return "cosine";
  }
  return "?";
}

void validate(const ScheduleOptions& o) {
  CANZONA_REQUIRE(o.total >= 1, "--steps must be >= 1 (got ", o.total, ")");
  CANZONA_REQUIRE(o.warmup >= 0 && o.warmup <= o.total, "--warmup must be in [0, --steps=", o.total,
                  "] (got ", o.warmup, ")");
  CANZONA_REQUIRE(std::isfinite(o.min_ratio) && o.min_ratio >= 0.0 && o.min_ratio <= 1.0,
                  "--min-lr-ratio must be in [0, 1] (got ", o.min_ratio, ")");
}

double lr_factor(const ScheduleOptions& o, std::int64_t step) {
  step = std::clamp<std::int64_t>(step, 1, o.total);
  if (step <= o.warmup) return static_cast<double>(step) / static_cast<double>(o.warmup);
  if (o.schedule == Schedule::kConstant || o.total == o.warmup) return 1.0;
  const double q = static_cast<double>(step - o.warmup) / static_cast<double>(o.total - o.warmup);
  const double shape =
      o.schedule == Schedule::kLinear ? 1.0 - q : 0.5 * (1.0 + std::cos(std::numbers::pi * q));
  return o.min_ratio + (1.0 - o.min_ratio) * shape;
}

}  // namespace canzona::train
