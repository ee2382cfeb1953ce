// What one `canzona run` / `canzona compare` launch executes: the model, the grid, the optimizer,
// the planner knobs and the synthetic training loop (docs/design.md sections 1 and 4).
//
// Terms. A *step* is one training iteration: a simulated forward and backward pass over the
// buckets (real compute, sized below), the DP gradient sync, the optimizer step and the parameter
// sync. *Warmup* steps run first and are excluded from the timing medians; the final parameters
// (and --verify) include them. The simulated pass costs compute_scale x 6 x (TP-local params) x
// tokens FLOPs per step and rank (2/6 forward, 4/6 backward), spent as 128 x 128 x 128 sgemms.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "canzona/launch/job.h"

namespace canzona::runtime {

// The job (launch/job.h: model, grid, optimizers, planner knobs, seed, reduction) and the
// synthetic training loop run on it.
struct RunOptions : launch::JobOptions {
  int steps = 5;                // timed steps (>= 1)
  int warmup = 1;               // untimed steps before them (>= 0)
  double compute_scale = 0.01;  // fraction of the 6 N T FLOPs of a `tokens` batch to simulate
  std::int64_t tokens = 4096;   // tokens per simulated batch

  int total_steps() const { return warmup + steps; }
};

// Limits of validate(), each named in its error message: a million steps, 2^40 tokens per batch
// (Llama-3-405B trained on 16M-token batches), a 100x full forward/backward per step.
inline constexpr std::int64_t kMaxSteps = 1'000'000;
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;
inline constexpr double kMaxComputeScale = 100.0;

// Throws UsageError naming the flag (and the limit above) for the job (launch::validate), then
// steps outside [1, kMaxSteps]; warmup outside [0, kMaxSteps]; compute_scale not finite or
// outside [0, kMaxComputeScale]; tokens outside [1, kMaxTokens].
void validate(const RunOptions& options);

}  // namespace canzona::runtime
