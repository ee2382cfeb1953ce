// The synthetic training workload of `canzona run` / `compare`: one client of the Engine
// (engine.h) driving one strategy on one rank (docs/design.md sections 1 and 4).
//
// One step, in order: forward (per bucket in forward order: Engine::wait_param_sync, then
// simulated compute), backward (per bucket in buffer order: synthetic gradients written into the
// engine's gradient views, simulated compute while the engine's collectives in flight progress,
// then Engine::grad_ready for each param of the bucket, which posts the bucket's collective),
// Engine::finish_grad_sync, Engine::step (the optimizer), Engine::start_param_sync. Strategies
// (docs/design.md section 1 table) differ only in the engine's parts (plan::strategy_parts):
//   sc          All-Reduce; every rank computes every task; TP-split tasks: one fused TP
//               All-Gather of the gradient shards, every TP rank computes the full update.
//   layerwise   Megatron-LM's layer-wise optimizer: Reduce-Scatter of shard-aligned buckets; each
//               param's owner computes it (TP `duplicated` as sc, `layer-sharded` through the
//               micro groups); then one All-Gather per bucket, as asc.
//   layerwise-paper
//               All-Reduce; the owning DP rank computes (TP as sc); then one All-Gather-v over DP
//               of each rank's owned params' local shards, inside the step.
//   asc/lb-asc  variable Reduce-Scatter with the plan's cuts; each rank updates what its shard
//               holds (whole matrix params; element-wise params slice by slice); TP-split tasks go
//               through the micro-group pipeline; then one variable All-Gather per bucket, waited
//               in the next forward before the bucket is used.
// Phase times (StepTimes) are wall-clock spent inside this step's window; waits are *exposed*
// time (what overlap did not hide).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/engine/engine.h"
#include "canzona/engine/engine_set.h"
#include "canzona/engine/trace.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"

namespace canzona::runtime {

// Bytes one rank posted on one communicator during one step, by the phase that posted them
// (counters as comm::Communicator defines them: what this rank handed MPI for other ranks).
// grad_sync: the backward window and the gradient-sync wait (Reduce-Scatter / All-Reduce, both
// phases of the deterministic All-Reduce); optimizer: the optimizer step (TP All-Gather of
// gradient shards, micro-group All-to-Alls); param_sync: the parameter sync (asc/lb-asc bucket
// All-Gathers, layerwise-paper All-Gather-v).
struct PhaseBytes {
  std::int64_t grad_sync = 0;
  std::int64_t optimizer = 0;
  std::int64_t param_sync = 0;

  std::int64_t total() const { return grad_sync + optimizer + param_sync; }
  PhaseBytes& operator+=(const PhaseBytes& other);
};

struct StepBytes {
  PhaseBytes dp;  // on grid.dp()
  PhaseBytes tp;  // on grid.tp()
};

class StrategyRunner {
 public:
  // Collective over grid.dp() and grid.tp(). Needs a plan made for this model with the grid's
  // dp, tp and pp (validate_plan); runs stage grid.coord().pp of it. Builds the Engine, fills its
  // params with the synthetic init and loads the main params of the tasks this rank computes. Trace
  // is borrowed.
  //
  // A MoE plan (plan.expert) needs `experts`, this rank's expert groups (comm/grid.h): the
  // engine set (engine/engine_set.h) then runs its EP rank's expert buffer on the expert grid
  // beside the dense one, and every step drives both (dense buckets first).
  StrategyRunner(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
                 const RunOptions& options, engine::Trace& trace,
                 comm::ExpertGroups* experts = nullptr);
  ~StrategyRunner();
  StrategyRunner(const StrategyRunner&) = delete;
  StrategyRunner& operator=(const StrategyRunner&) = delete;

  // Runs training step `step` (1-based; called with 1, 2, 3, ...).
  engine::StepTimes step(int step);
  // Bytes the last step() posted, by phase.
  const StepBytes& last_step_bytes() const;
  // Waits for parameter syncs still in flight; afterwards params() is final.
  void finish();

  // This rank's model params in layout order (TP-local shapes).
  ConstTypedSpan params() const;
  std::uint64_t params_fnv() const;  // EngineSet::params_fnv
  // The reduced gradient of the last step where this rank holds it (Engine::reduced_grads).
  using GradRange = engine::GradRange;
  std::vector<engine::GradRange> reduced_grads() const;
  // True when reduced_grads() holds this rank's DP shards (Reduce-Scatter strategies), false when
  // it holds the whole reduced gradient (All-Reduce strategies).
  bool grads_sharded() const;
  const plan::StagePlan& stage() const;
  // Bytes of optimizer state and main params this rank holds.
  std::int64_t state_bytes() const;
  // Matrix tasks this rank computes per step.
  int computed_tasks() const;

  // The dense engine, and the set of it and a MoE plan's expert engine.
  engine::Engine& engine() { return engines_->dense(); }
  const engine::EngineSet& engines() const { return *engines_; }

 private:
  comm::Grid& grid_;
  const model::ModelSpec& model_;
  plan::Strategy strategy_;
  RunOptions options_;
  engine::Trace& trace_;
  std::unique_ptr<engine::EngineSet> engines_;
  struct Compute;  // simulated forward / backward compute (workload.h)
  std::unique_ptr<Compute> compute_;
  StepBytes step_bytes_;  // of the last step
};

}  // namespace canzona::runtime
