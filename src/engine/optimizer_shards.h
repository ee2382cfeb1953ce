// What this rank's optimizer updates, the engine's DistributedOptimizer part: the matrix tasks it
// computes (plan::RankPlan::tasks: a fp32 main param and an optimizer instance each) and the
// element-wise slices it owns (AdamW on a contiguous range of a param). It steps the local tasks
// and slices itself; the TP-split tasks are stepped by the TP exchange (tp_exchange.h) once their
// full gradients arrive, through step_task(). It holds the optimizer state a checkpoint saves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffers.h"
#include "canzona/engine/shard.h"
#include "canzona/optim/optimizer.h"
#include "context.h"
#include "grad_sync.h"

namespace canzona::engine {

// A matrix task this rank computes.
struct ComputedTask {
  int task = 0;  // index into StagePlan::tasks
  int param = 0;
  int piece = -1;
  plan::TaskRole role = plan::TaskRole::kLocal;
  std::vector<ShardMap> maps;  // [tp rank]; kLocal, and kOwnerGathered unless TP-split under
                               // TP > 1: one map, this rank's
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> main;  // (rows, cols) fp32 main param of the task matrix
};

// AdamW on a contiguous slice of an element-wise param.
struct ElementwiseSlice {
  int param = 0;
  std::int64_t begin = 0;  // local elements [begin, begin + numel) of the param
  TypedPtr values;         // in the param buffer
  ConstTypedPtr grad;      // reduced gradient (GradSync::reduced_grad)
  std::int64_t numel = 0;
  std::unique_ptr<optim::Optimizer> optimizer;
  // The fp32 main copy the optimizer updates when the param buffer is not fp32 (empty when it
  // is: an fp32 param is its own main copy, as in Megatron).
  std::vector<float> main;
  float* main_values() { return main.empty() ? values.as<float>() : main.data(); }
};

class OptimizerShards {
 public:
  // Creates the optimizer instances of what this rank computes (optimizer_factory.h).
  OptimizerShards(const RankContext& context, ParamBuffers& buffers, const GradSync& grads);

  std::vector<ComputedTask>& tasks() { return tasks_; }
  const std::vector<ComputedTask>& tasks() const { return tasks_; }
  // The computed task of stage task `task`; throws Error when this rank does not compute it.
  ComputedTask& task(int stage_task);
  // A buffer the size of the largest task matrix (and, for gradients that are not fp32, of the
  // largest element-wise slice), for one full fp32 gradient at a time.
  float* scratch() { return scratch_.data(); }

  // The main params of the local tasks and of the element-wise slices from the param buffer
  // (setup; TP-split tasks get theirs from the TP exchange).
  void init_local_main();
  // One optimizer step of every element-wise slice and every local task.
  void step_local(Trace& trace);
  // One optimizer step of t given its full gradient (rows x cols, contiguous); writes this rank's
  // rows of the updated main param into the param buffer unless the task is hosted or
  // owner-gathered (their exchanges send the rows where they belong).
  void step_task(ComputedTask& t, const float* full_grad);

  // Engine's optimizer-state access (engine.h).
  std::int64_t state_bytes() const;
  std::vector<StateTensor> state();
  std::int64_t step_count() const;
  void set_step_count(std::int64_t steps);
  // The matrix optimizer's tasks and AdamW's element-wise slices.
  void set_lr_scales(double matrix, double elementwise);

 private:
  const RankContext& context_;
  ParamBuffers& buffers_;
  const GradSync& grads_;
  std::vector<ComputedTask> tasks_;
  std::vector<int> computed_of_task_;  // [stage task] index into tasks_, -1 when not computed
  std::vector<ElementwiseSlice> elementwise_;
  std::vector<float> scratch_;  // largest task matrix or up-cast slice gradient
};

}  // namespace canzona::engine
