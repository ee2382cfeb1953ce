#include "canzona/cost/cost.h"

#include <algorithm>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/cost/calibration.h"

namespace canzona::cost {
namespace {

constexpr double kAdamFlopsPerElement = 12.0;  // m, v lerps, bias correction, sqrt, divide, wd
constexpr double kEighFlops = 9.0;             // symmetric eigendecomposition ~ 9 n^3
constexpr double kRootFlops = 2.0;             // V diag(l^-1/4) V^T ~ 2 n^3
constexpr double kQrFlops = 4.0 / 3.0;         // Householder QR of n x n ~ 4/3 n^3

bool preconditioned(std::int64_t side, const CostOptions& options) {
  return side <= options.max_precond_dim;
}

}  // namespace

void check_options(const CostOptions& options) {
  require_in_range(options.ns_steps, 1, kMaxNsSteps, "--ns-steps", "kMaxNsSteps");
  require_in_range(options.precondition_frequency, 1, kMaxPreconditionFrequency,
                   "--precondition-frequency", "kMaxPreconditionFrequency");
  require_in_range(options.max_precond_dim, 0, kMaxPrecondDim, "--max-precond-dim",
                   "kMaxPrecondDim");
}

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "muon") return OptimizerKind::kMuon;
  if (name == "shampoo") return OptimizerKind::kShampoo;
  if (name == "soap") return OptimizerKind::kSoap;
  if (name == "adamw") return OptimizerKind::kAdamW;
  throw UsageError(str("unknown optimizer '", name, "' (expected muon, shampoo, soap or adamw)"));
}

const char* to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kMuon:
      return "muon";
    case OptimizerKind::kShampoo:
      return "shampoo";
    case OptimizerKind::kSoap:
      return "soap";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

CostKind parse_cost_kind(const std::string& name) {
  if (name == "numel") return CostKind::kNumel;
  if (name == "flops") return CostKind::kFlops;
  if (name == "memory") return CostKind::kMemory;
  if (name == "calibrated") return CostKind::kCalibrated;
  throw UsageError(
      str("unknown cost model '", name, "' (expected numel, flops, memory or calibrated)"));
}

const char* to_string(CostKind kind) {
  switch (kind) {
    case CostKind::kNumel:
      return "numel";
    case CostKind::kFlops:
      return "flops";
    case CostKind::kMemory:
      return "memory";
    case CostKind::kCalibrated:
      return "calibrated";
  }
  return "?";
}

double optimizer_flops(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                       const CostOptions& options) {
  check_options(options);
  const double m = static_cast<double>(rows);
  const double n = static_cast<double>(cols);
  const double f = options.precondition_frequency;
  const double adam = kAdamFlopsPerElement * m * n;
  switch (kind) {
    case OptimizerKind::kMuon: {
      const double hi = std::max(m, n);
      const double lo = std::min(m, n);
      // Per step: A = X X^T (2 lo^2 hi), A A (2 lo^3), B X (2 lo^2 hi).
      return options.ns_steps * (4.0 * hi * lo * lo + 2.0 * lo * lo * lo);
    }
    case OptimizerKind::kShampoo: {
      // Per preconditioned side s (other side o): statistics 2 s^2 o, applying the root 2 s^2 o,
      // and every f steps eigh + root formation (11 s^3) amortised. Grafting runs Adam.
      double total = adam;
      for (auto [s, o] : {std::pair{m, n}, std::pair{n, m}}) {
        if (!preconditioned(static_cast<std::int64_t>(s), options)) continue;
        total += 4.0 * s * s * o + (kEighFlops + kRootFlops) * s * s * s / f;
      }
      return total;
    }
    case OptimizerKind::kSoap: {
      // Per side: statistics 2 s^2 o, rotating gradient, momentum and update back (6 s^2 o), and
      // every f steps one power iteration (2 s^3) + QR amortised. Adam runs in the rotated space.
      double total = adam;
      for (auto [s, o] : {std::pair{m, n}, std::pair{n, m}}) {
        if (!preconditioned(static_cast<std::int64_t>(s), options)) continue;
        total += 8.0 * s * s * o + (2.0 + kQrFlops) * s * s * s / f;
      }
      return total;
    }
    case OptimizerKind::kAdamW:
      return adam;
  }
  return 0.0;
}

double state_bytes(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                   const CostOptions& options) {
  check_options(options);
  const double m = static_cast<double>(rows);
  const double n = static_cast<double>(cols);
  constexpr double kF32 = 4.0;
  switch (kind) {
    case OptimizerKind::kMuon:
      return kF32 * m * n;
    case OptimizerKind::kShampoo: {
      double total = 2.0 * kF32 * m * n;  // momentum (also grafting Adam's m) and Adam's v
      for (double s : {m, n})
        if (preconditioned(static_cast<std::int64_t>(s), options)) total += 2.0 * kF32 * s * s;
      return total;
    }
    case OptimizerKind::kSoap: {
      double total = 2.0 * kF32 * m * n;  // Adam m and v
      for (double s : {m, n})
        if (preconditioned(static_cast<std::int64_t>(s), options)) total += 2.0 * kF32 * s * s;
      return total;
    }
    case OptimizerKind::kAdamW:
      return 2.0 * kF32 * m * n;
  }
  return 0.0;
}

double task_cost(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options) {
  check_options(options);
  switch (options.kind) {
    case CostKind::kNumel:
      return static_cast<double>(rows) * static_cast<double>(cols);
    case CostKind::kFlops:
      return optimizer_flops(kind, rows, cols, options);
    case CostKind::kMemory:
      return state_bytes(kind, rows, cols, options);
    case CostKind::kCalibrated:
      CANZONA_REQUIRE(options.calibration != nullptr,
                      "cost model 'calibrated' needs a calibration file (--calibration FILE)");
      return options.calibration->seconds(kind, rows, cols, options);
  }
  return 0.0;
}

}  // namespace canzona::cost
