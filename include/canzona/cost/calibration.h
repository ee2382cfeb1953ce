// Calibrated cost model: optimizer step time measured by `canzona bench-kernels` and fitted as
// seconds = intercept_s + seconds_per_flop * optimizer_flops(shape). The planner uses it through
// cost::CostKind::kCalibrated.
//
// File format (JSON, written by bench-kernels, read by `canzona plan --calibration FILE`):
//   {"version": 1, "cpu": "...", "blas_core": "...",
//    "optimizers": {"muon": {"intercept_s": 1e-5, "seconds_per_flop": 7e-12,
//                            "samples": [{"rows": 1024, "cols": 3072, "seconds": 0.01}, ...]},
//                   "shampoo": {...}, "soap": {...}, "adamw": {...}}}
#pragma once

#include <array>
#include <string>
#include <vector>

#include "canzona/cost/cost.h"

namespace canzona::cost {

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
  // Least-squares fit of seconds against optimizer_flops(kind, shape, options) over `samples`
  // (intercept clamped at >= 0). Throws UsageError with fewer than 2 samples.
  void fit(OptimizerKind kind, std::vector<CalibrationSample> samples, const CostOptions& options);

  // Predicted seconds; throws UsageError when `kind` was never calibrated.
  double seconds(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options) const;

  const CalibrationFit& fit_of(OptimizerKind kind) const;

  std::string cpu;
  std::string blas_core;

  static Calibration read(const std::string& path);  // UsageError naming file and key
  void write(const std::string& path) const;

 private:
  std::array<CalibrationFit, 4> fits_;
};

}  // namespace canzona::cost
