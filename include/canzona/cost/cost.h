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
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "canzona/common/dtype.h"
#include "canzona/common/parallel_dims.h"

namespace canzona::cost {

enum class CostKind { kNumel, kFlops, kMemory, kCalibrated };

// "numel" | "flops" | "memory" | "calibrated"; throws UsageError otherwise.
CostKind parse_cost_kind(const std::string& name);
const char* to_string(CostKind kind);

class Calibration;

// The optimizer of element-wise params (embeddings, norms, routers): always this registry entry,
// at its default options.
inline constexpr const char* kElementwiseOptimizer = "adamw";

// Optimizers are named by their registry name (optim/registry.h); their FLOP, state and
// factorization formulas come from their registry descriptor, so a new optimizer needs no change
// here.
struct CostOptions {
  CostKind kind = CostKind::kNumel;
  std::string matrix_optimizer = "muon";  // registry name of the optimizer for matrix tasks
  // Its options, the registry's JSON keys (e.g. {"ns_steps": 8}); missing keys take the
  // optimizer's documented defaults.
  nlohmann::json optimizer_options = nlohmann::json::object();
  const Calibration* calibration = nullptr;  // required for kCalibrated, borrowed
  // The memory model (state_bytes), per element of a task, at the run's precision (the param
  // dtype, and the gradient dtype: the param's unless grad_reduce_in_fp32; docs/precision.md):
  //   ZeRO-1: the optimizer state (every rank holds every param and gradient alike), and under
  //     bf16 an element-wise task's fp32 main copy (4 bytes; an fp32 param is its own main copy,
  //     and a matrix task's main copy, there in both precisions, is left out of both, so fp32
  //     costs are what they were).
  //   ZeRO-3: adds what it shards with the state: the param and gradient in their dtypes (fp32:
  //     8 bytes, bf16: 4, bf16 with fp32 gradients: 6) and the fp32 main copy (4) of a matrix
  //     task, and under bf16 of an element-wise task too.
  ZeroStage zero_stage = ZeroStage::kOne;
  DType precision = DType::kF32;
  bool grad_reduce_in_fp32 = false;
};

// Throws UsageError unless matrix_optimizer names a registered matrix optimizer ("... must be a
// matrix optimizer (muon, shampoo, soap, ...)") and optimizer_options are valid for it (unknown
// key, wrong type, out of range: the optimizer's own message). Every cost function below checks
// the options it prices the same way, so every path that costs a task (plan, simulate,
// calibration fits) rejects such options.
void check_options(const CostOptions& options);

// The registered matrix optimizers as "muon, shampoo, soap[, ...]", for messages.
std::string matrix_optimizer_list();

// The options `optimizer` is priced with: options.optimizer_options for the matrix optimizer,
// the defaults ({}) for any other (the element-wise optimizer).
const nlohmann::json& options_for(const std::string& optimizer, const CostOptions& options);

// Optimizer FLOPs per step for a rows x cols matrix (or, element-wise, rows*cols elements), from
// the optimizer's registry descriptor (each optimizer's header documents its formula).
double optimizer_flops(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                       const CostOptions& options);

// Optimizer-state bytes, from the registry descriptor; under ZeroStage::kThree plus the param,
// gradient and (matrix optimizers) main-param bytes of rows x cols elements.
double state_bytes(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                   const CostOptions& options);

// FLOPs and state bytes per element of the element-wise optimizer (kElementwiseOptimizer). Its cost
// formulas are linear in the element count (optim/registry.h), so n elements cost exactly n times
// these: metrics price every slice of every plan candidate with them instead of re-reading the
// optimizer's options each time.
struct ElementwiseRates {
  double flops = 0.0;
  double state_bytes = 0.0;
};
ElementwiseRates elementwise_rates(const CostOptions& options);

// The part of optimizer_flops spent in factorizations (eigh, QR), which run far below the GEMM
// rate; 0 for an optimizer without any (Muon, AdamW).
double factorization_flops(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                           const CostOptions& options);

// The planner's cost of a task under options.kind. Throws UsageError for kCalibrated without a
// calibration, for an unknown optimizer and for invalid options.
double task_cost(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                 const CostOptions& options);

// The cost-model flags of `canzona plan` and `canzona simulate`. Each given flag sets the option
// key of the same name (--ns-steps -> "ns_steps") when the matrix optimizer has that key and is
// ignored otherwise (as --ns-steps is for shampoo); an unset flag leaves the optimizer's default.
// Limits of the flags (Muon runs 5 Newton-Schulz steps in practice, Shampoo and SOAP refresh every
// 1-1000 steps); the optimizer then applies its own, tighter ones.
inline constexpr int kMaxNsSteps = 1000;
inline constexpr int kMaxPreconditionFrequency = 1000000;
inline constexpr std::int64_t kMaxPrecondDim = std::int64_t{1} << 31;

struct OptimizerFlags {
  std::optional<int> ns_steps;  // --ns-steps, [1, kMaxNsSteps]
  // --precondition-frequency, [1, kMaxPreconditionFrequency]
  std::optional<int> precondition_frequency;
  std::optional<std::int64_t> max_precond_dim;  // --max-precond-dim, [0, kMaxPrecondDim]
};

// Sets options.matrix_optimizer = name and options.optimizer_options from `flags` as described
// above, keeping the keys options.optimizer_options already holds when options.matrix_optimizer
// is `name` (the planning flags' --ns-dtype and --ns-algorithm). Throws UsageError "--ns-steps = 0
// must lie in [1, 1000] (kMaxNsSteps)" (and likewise per flag) for a given flag outside its limit,
// "unknown optimizer ..." for an unregistered name, and as check_options.
void set_matrix_optimizer(CostOptions& options, const std::string& name,
                          const OptimizerFlags& flags);

// The default of option `key` of optimizer `name` as text, for CLI help ("5"); "" when the
// optimizer has no such key.
std::string default_option(const std::string& name, const std::string& key);

}  // namespace canzona::cost
