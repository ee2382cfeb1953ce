// Calibrated cost model: optimizer step time measured by `canzona bench-kernels` and fitted as
// seconds = intercept_s + seconds_per_flop * optimizer_flops(shape). The planner uses it through
// cost::CostKind::kCalibrated.
//
// File format (JSON, written by bench-kernels, read by `canzona plan --calibration FILE`):
//   {"version": 1, "cpu": "...", "blas_core": "...",
//    "optimizers": {"muon": {"intercept_s": 1e-5, "seconds_per_flop": 7e-12,
//                            "samples": [{"rows": 1024, "cols": 3072, "seconds": 0.01}, ...]},
//                   "shampoo": {...}, "soap": {...}, "adamw": {...}}}
//
// Limits (read() and fit() reject values outside them with a UsageError naming the file, the key
// and the limit). Measured CPU kernels run at 1e-12..1e-9 seconds per FLOP and an accelerator at
// 1e-15; the bounds keep every prediction finite for any shape we accept (sides <= 2^24):
//   seconds_per_flop in [kMinSecondsPerFlop, kMaxSecondsPerFlop] = [1e-18, 1e-3]
//   intercept_s      in [0, kMaxInterceptSeconds] = [0, 3600]
//   samples          at most kMaxCalibrationSamples = 65536 per optimizer
//   sample rows/cols in [1, kMaxCalibrationSide] = [1, 2^24]
//   sample seconds   in (0, kMaxSampleSeconds] = (0, 1e6]
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "canzona/cost/cost.h"

namespace canzona::cost {

inline constexpr double kMinSecondsPerFlop = 1e-18;
inline constexpr double kMaxSecondsPerFlop = 1e-3;
inline constexpr double kMaxInterceptSeconds = 3600.0;
inline constexpr std::size_t kMaxCalibrationSamples = 65536;
inline constexpr std::int64_t kMaxCalibrationSide = std::int64_t{1} << 24;
inline constexpr double kMaxSampleSeconds = 1e6;

struct CalibrationSample {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  double seconds = 0.0;
};

struct CalibrationFit {
  bool present = false;
  double intercept_s = 0.0;
  double seconds_per_flop = 0.0;
  std::vector<CalibrationSample> samples;
};

class Calibration {
 public:
  // Least-squares fit of seconds against optimizer_flops(optimizer, shape, options) over
  // `samples` (intercept clamped at >= 0). Throws UsageError with fewer than 2 or more than
  // kMaxCalibrationSamples samples, a sample outside the limits above, an unknown optimizer or
  // invalid options (as optimizer_flops) or a fit whose slope or intercept falls outside the
  // limits above.
  void fit(const std::string& optimizer, std::vector<CalibrationSample> samples,
           const CostOptions& options);

  // Predicted seconds (finite for sides <= 2^24); throws UsageError when `optimizer` was never
  // calibrated, and as optimizer_flops.
  double seconds(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options) const;

  // The fit of a registry name; one with present == false when there is none.
  const CalibrationFit& fit_of(const std::string& optimizer) const;

  std::string cpu;
  std::string blas_core;

  static Calibration read(const std::string& path);  // UsageError naming file and key
  void write(const std::string& path) const;

 private:
  std::map<std::string, CalibrationFit> fits_;  // by registry name
};

}  // namespace canzona::cost
