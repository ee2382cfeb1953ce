// One strategy executing real training steps on one rank (design.md sections 1 and 4).
//
// Buffers (pipeline stage 0 only; Megatron layout of the TP-local shapes, layout.h):
//   params  (layout.numel)  model params, fp32, every rank
//   grads   (layout.numel)  this rank's gradients; All-Reduce strategies reduce them in place
//   shard   (sum over buckets of this rank's count)  reduced gradient shard (Reduce-Scatter
//           strategies only), bucket b's part at shard_offset[b]
//   main params and optimizer state: only for the tasks this rank computes: one contiguous fp32
//   copy of the whole task matrix (rows x cols) per task; element-wise params are updated in
//   place in `params` (they are fp32 already) with AdamW state for the slice this rank updates.
//
// One step, in order: forward (per bucket in forward order: wait for the bucket's parameter
// All-Gather if one is in flight, then simulated compute), backward (per bucket in buffer order:
// synthetic gradients, simulated compute, then scale the bucket by 1/DP (Megatron's
// gradient_scaling_factor; the only place gradients are averaged) and post its Reduce-Scatter or
// All-Reduce, so the collective overlaps the next bucket's compute; between the compute's sgemms
// every strategy drives its collectives in flight with Request::test() alike), gradient sync
// (wait for all of them), optimizer, parameter sync. Strategies (design.md section 1 table):
//   sc          All-Reduce; every rank computes every task; TP-split tasks: one fused TP
//               All-Gather of the gradient shards, every TP rank computes the full update.
//   layerwise   All-Reduce; the owning DP rank computes (TP as sc); then one All-Gather-v over DP
//               of each rank's owned params' local shards, inside the step.
//   asc/lb-asc  variable Reduce-Scatter with the plan's cuts; each rank updates what its shard
//               holds (whole matrix params; element-wise params slice by slice); TP-split tasks go
//               through the micro-group pipeline (tp_exchange.cpp); then one variable All-Gather
//               per bucket, waited in the next forward before the bucket is used.
// Phase times (StepTimes) are wall-clock spent inside this step's window; waits are *exposed*
// time (what overlap did not hide).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/trace.h"

namespace canzona::runtime {

// Milliseconds on one rank for one step.
struct StepTimes {
  double step = 0.0;         // whole step
  double forward = 0.0;      // simulated forward compute (waits excluded)
  double backward = 0.0;     // synthetic gradients + simulated backward compute + posting
  double grad_sync = 0.0;    // exposed wait for the DP gradient collectives
  double opt = 0.0;          // optimizer phase: opt_compute + opt_comm
  double opt_compute = 0.0;  // optimizer kernels, packing and copies
  double opt_comm = 0.0;     // exposed waits inside the optimizer (TP All-Gather / All-to-All)
  double param_sync = 0.0;   // exposed waits for updated params (layerwise All-Gather-v, asc
                             // bucket All-Gathers waited in this step's forward)
  double opt_cpu = 0.0;      // thread CPU time of the optimizer's compute
  double busy_cpu = 0.0;     // thread CPU time of all compute (waits excluded)
};

// Bytes one rank posted on one communicator during one step, by the phase that posted them
// (counters as comm::Communicator defines them: what this rank handed MPI for other ranks).
// grad_sync: the backward window and the gradient-sync wait (Reduce-Scatter / All-Reduce, both
// phases of the deterministic All-Reduce); optimizer: the optimizer step (TP All-Gather of
// gradient shards, micro-group All-to-Alls); param_sync: the parameter sync (asc/lb-asc bucket
// All-Gathers, layerwise All-Gather-v).
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
  // Collective over grid.dp() and grid.tp(). Needs a plan made for this model with pp == 1 and
  // the grid's dp and tp (validate_plan). Allocates the buffers above, creates the optimizer
  // instances of what this rank computes, fills params with the synthetic init and gathers the
  // shards of the tasks this rank computes into their main params. Trace is borrowed.
  StrategyRunner(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
                 const RunOptions& options, Trace& trace);
  ~StrategyRunner();
  StrategyRunner(const StrategyRunner&) = delete;
  StrategyRunner& operator=(const StrategyRunner&) = delete;

  // Runs training step `step` (1-based; called with 1, 2, 3, ...).
  StepTimes step(int step);
  // Bytes the last step() posted, by phase.
  const StepBytes& last_step_bytes() const;
  // Waits for parameter syncs still in flight; afterwards params() is final.
  void finish();

  // This rank's model params in layout order (TP-local shapes).
  std::span<const float> params() const;
  // The reduced gradient of the last step where this rank holds it, in layout order (TP-local
  // shapes): All-Reduce strategies hold every element of the layout (one range); Reduce-Scatter
  // strategies hold their shard of each bucket. Each range is {layout offset, values}.
  struct GradRange {
    std::int64_t offset = 0;
    std::span<const float> values;
  };
  std::vector<GradRange> reduced_grads() const;
  // True when reduced_grads() holds this rank's DP shards (Reduce-Scatter strategies), false when
  // it holds the whole reduced gradient (All-Reduce strategies).
  bool grads_sharded() const;
  const plan::StagePlan& stage() const;
  // Bytes of optimizer state and main params this rank holds.
  std::int64_t state_bytes() const;
  // Matrix tasks this rank computes per step.
  int computed_tasks() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace canzona::runtime
