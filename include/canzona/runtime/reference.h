// The single-process reference every strategy is checked against (docs/design.md section 5).
//
// It holds every param at its global shape, starts from the synthetic init, and per step forms
// the reduced gradient sum_d (u_d * float(1/DP)) in rank order d = 0..DP-1 in fp32
// (src/runtime/synthetic.h), scaling each local gradient itself (not through the runtime's code),
// then calls the same optimizer the distributed runtime calls on the same full matrices: one matrix
// optimizer instance per task (the whole param, or each piece with ParamInfo::full_rows/full_cols
// of the whole param), AdamW on each element-wise param. Task names and shapes come from
// task_info() so both sides build identical ParamInfo values.
//
// Under --precision bf16 it models a bf16 model written out here, not through the engine's code:
// the params hold the init rounded to bf16 and fp32 main params start from them; each local
// gradient is rounded to bf16, scaled in bf16 (the product rounded) and summed in fp32 in rank
// order, the sum rounded once to bf16 (with --grad-reduce-in-fp32: scaled and summed in fp32);
// the optimizer steps the fp32 main params on the widened gradient and the params are the main
// params rounded to bf16.
#pragma once

#include <memory>
#include <vector>

#include "canzona/engine/reference_optimizer.h"
#include "canzona/model/spec.h"
#include "canzona/optim/optimizer.h"
#include "canzona/runtime/options.h"

namespace canzona::runtime {

class Reference {
 public:
  // Initialises every param; options.dims.dp is the number of gradient contributions per step (for
  // a MoE model's experts, the expert DP dp x tp / (ep x etp); pass model::executed_model so their
  // expert-TP splits and pieces are the run's).
  Reference(const model::ModelSpec& model, const RunOptions& options);
  ~Reference();
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  // Runs optimizer steps until `step` (1-based) have been taken.
  void run_until(int step);

  int steps_taken() const { return steps_taken_; }
  // [param] global row-major tensor.
  const std::vector<std::vector<float>>& params() const { return params_; }
  // [param] global row-major reduced gradient of the last step taken (empty before the first).
  const std::vector<std::vector<float>>& grads() const { return grads_; }
  // [param] sum over DP ranks of |scaled local gradient| of the last step: the scale of the
  // rounding error any summation order can make (see src/runtime/verify.h).
  const std::vector<std::vector<float>>& grad_abs_sums() const { return abs_sums_; }

 private:
  void step(int step);

  const model::ModelSpec& model_;
  RunOptions options_;
  std::vector<std::vector<float>> params_;    // bf16 values under --precision bf16
  std::vector<std::vector<float>> main_;      // [param] fp32 main params; empty under fp32
  std::vector<std::vector<float>> grads_;     // [param] last step's reduced gradient
  std::vector<std::vector<float>> abs_sums_;  // [param] last step's sum of |contributions|
  std::unique_ptr<engine::ReferenceOptimizer> optimizer_;
  int steps_taken_ = 0;
};

}  // namespace canzona::runtime
