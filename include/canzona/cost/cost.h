// Cost models W(p): what one optimizer task costs, in the unit the planner balances.
//
// Terms. A *task* is one matrix the matrix optimizer updates (a whole 2-D param or one piece of
// it), or one element-wise slice updated by AdamW. Costs come in three views: `numel` (elements,
// the paper's default), `flops` (optimizer floating-point work per step, amortised) and `memory`
// (optimizer-state bytes). `calibrated` predicts seconds from kernel measurements
// (calibration.h). Capacity (bytes moved per rank per micro group) is a separate quantity and is
// never compared with cost.
#pragma once

#include <cstdint>
#include <string>

namespace canzona::cost {

enum class OptimizerKind { kMuon, kShampoo, kSoap, kAdamW };
enum class CostKind { kNumel, kFlops, kMemory, kCalibrated };

// "muon" | "shampoo" | "soap" | "adamw"; throws UsageError otherwise.
OptimizerKind parse_optimizer(const std::string& name);
const char* to_string(OptimizerKind kind);
// "numel" | "flops" | "memory" | "calibrated"; throws UsageError otherwise.
CostKind parse_cost_kind(const std::string& name);
const char* to_string(CostKind kind);

class Calibration;

// Limits of CostOptions (check_options). Muon runs 5 Newton-Schulz steps in practice, Shampoo
// and SOAP refresh every 1-1000 steps, and no matrix side exceeds 2^24 (the largest vocabulary we
// accept); the limits leave orders of magnitude of room while keeping every cost finite.
inline constexpr int kMaxNsSteps = 1000;
inline constexpr int kMaxPreconditionFrequency = 1000000;
inline constexpr std::int64_t kMaxPrecondDim = std::int64_t{1} << 31;

struct CostOptions {
  CostKind kind = CostKind::kNumel;
  OptimizerKind matrix_optimizer = OptimizerKind::kMuon;  // optimizer for matrix tasks
  int ns_steps = 5;                          // Muon Newton-Schulz iterations, [1, kMaxNsSteps]
  int precondition_frequency = 10;           // Shampoo / SOAP: eigh (or QR refresh) every f steps,
                                             // [1, kMaxPreconditionFrequency]
  std::int64_t max_precond_dim = 10000;      // sides above this use identity (no statistics),
                                             // [0, kMaxPrecondDim]; 0 = precondition no side
  const Calibration* calibration = nullptr;  // required for kCalibrated, borrowed
};

// Throws UsageError naming the option (as its CLI flag) and the limit unless ns_steps lies in
// [1, kMaxNsSteps], precondition_frequency in [1, kMaxPreconditionFrequency] and max_precond_dim
// in [0, kMaxPrecondDim]. task_cost, optimizer_flops and state_bytes call it, so every path that
// costs a task (plan, simulate, calibration fits) rejects such options.
void check_options(const CostOptions& options);

// Optimizer FLOPs per step for a rows x cols matrix (or, for AdamW, rows*cols elements).
//   Muon:    ns_steps * (4 max min^2 + 2 min^3): the three GEMMs of each Newton-Schulz step
//            (the paper's model drops the 2 min^3 of A·A, which makes square matrices look
//            1.5x cheaper than they run)
//   Shampoo: per side n <= max_precond_dim: 2 GEMMs of the statistics (2 n^2 m each) and, every
//            f steps, eigh (~9 n^3) and forming the root (2 n^3), amortised by f; plus 2 GEMMs
//            applying the preconditioners
//   SOAP:    per side: statistics (2 n^2 m), two rotations (4 n^2 m), every f steps power
//            iteration + QR (2 n^3 + 4/3 n^3) amortised by f, plus Adam in the rotated space
//   AdamW:   12 flops per element
double optimizer_flops(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                       const CostOptions& options);

// Optimizer-state bytes (fp32): Muon momentum 4 mn; Shampoo momentum + grafting Adam v (8 mn) +
// statistics and roots (8 n^2 per preconditioned side); SOAP m, v (8 mn) + statistics and
// eigenbases (8 n^2 per side); AdamW m, v (8 per element).
double state_bytes(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                   const CostOptions& options);

// The planner's cost of a task under options.kind. Throws UsageError for kCalibrated without a
// calibration, and as check_options.
double task_cost(OptimizerKind kind, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options);

}  // namespace canzona::cost
