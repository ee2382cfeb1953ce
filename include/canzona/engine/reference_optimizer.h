// The optimizer half of a single-process reference: every matrix task and element-wise param of a
// model at global shape, updated from whole reduced gradients by the same optimizer instances the
// engine creates (optimizer_factory.h), one per task (the whole param, or each piece with
// ParamInfo::full_rows/full_cols of the whole param) and AdamW per element-wise param. Task names
// and shapes come from the same shard maps as the engine's, so both build identical ParamInfo
// values. It does no arithmetic of its own: only copies between a param and its task matrix.
#pragma once

#include <memory>
#include <vector>

#include "canzona/engine/engine.h"
#include "canzona/model/spec.h"
#include "canzona/optim/optimizer.h"

namespace canzona::engine {

// Shared by the harness's Reference (runtime/reference.h) and the training reference
// (train/trainer.h: run_reference); the engine itself never uses it.
class ReferenceOptimizer {
 public:
  // Main params start from `params` ([param] global row-major, numel each).
  ReferenceOptimizer(const model::ModelSpec& model, const EngineOptions& options,
                     const std::vector<std::vector<float>>& params);
  ~ReferenceOptimizer();
  ReferenceOptimizer(const ReferenceOptimizer&) = delete;
  ReferenceOptimizer& operator=(const ReferenceOptimizer&) = delete;
  // One step of every task and element-wise param: writes the updated values into `params`.
  void step(std::vector<std::vector<float>>& params, const std::vector<std::vector<float>>& grads);
  // optim::Optimizer::set_lr_scale on every instance.
  void set_lr_scale(double scale);

 private:
  struct TaskState;
  std::vector<std::unique_ptr<TaskState>> tasks_;
  std::vector<std::unique_ptr<optim::Optimizer>> elementwise_;  // [param] or null
};

}  // namespace canzona::engine
