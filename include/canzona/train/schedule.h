// Learning-rate schedules of `canzona train` (Megatron-LM's --lr-decay-style and
// --lr-warmup-iters): a factor in [min_ratio, 1] that multiplies every optimizer's base lr.
//
// Step numbers are 1-based (the step about to run). Warmup: factor = step / warmup for
// step <= warmup (linear from 1/warmup to 1). After warmup, with progress
// q = (step - warmup) / (total - warmup) in [0, 1]:
//   constant: 1
//   linear:   min_ratio + (1 - min_ratio) (1 - q)
//   cosine:   min_ratio + (1 - min_ratio) (1 + cos(pi q)) / 2
#pragma once
#include <cstdint>
#include <string>

namespace canzona::train {

enum class Schedule { kConstant, kLinear, kCosine };

// "constant" | "linear" | "cosine"; throws UsageError naming --schedule otherwise.
Schedule parse_schedule(const std::string& name);
const char* to_string(Schedule schedule);

struct ScheduleOptions {
  Schedule schedule = Schedule::kCosine;
  std::int64_t warmup = 0;  // steps of linear warmup (>= 0)
  std::int64_t total = 1;   // steps of the run (>= 1)
  double min_ratio = 0.1;   // final lr / base lr, in [0, 1]
};

// Throws UsageError naming the flag (--warmup, --steps, --min-lr-ratio) when out of range.
void validate(const ScheduleOptions& options);
// The factor for 1-based `step` (clamped to [1, total]).
double lr_factor(const ScheduleOptions& options, std::int64_t step);

}  // namespace canzona::train
