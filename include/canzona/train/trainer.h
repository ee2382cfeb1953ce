// `canzona train`: the Qwen3 model (model.h) trained on real text (data.h) with the
// distributed-optimizer engine (engine/engine.h) under DP x TP, one strategy after another from
// the same init on the same batches (docs/training.md).
//
// A step (Megatron-LM's train_step with the distributed optimizer): lr factor of the schedule;
// zero the gradient buffer; for each of grad_accum micro-batches a forward (which waits for each
// bucket's param All-Gather right before it first reads a param of it) and a backward that
// accumulates into the engine's gradient buffer, where autograd's accumulation hooks call
// grad_ready during the last micro-batch's backward so bucket collectives overlap it; finish the
// gradient sync; the loss (mean over DP ranks and micro-batches) is summed over DP; a non-finite
// loss stops every rank before the optimizer runs; optimizer step; post the param sync.
//
// Exactness. With ReduceMode::kDeterministic and one thread per rank, every strategy gives
// bitwise the same losses and final params (the engine's contract); on TP = 1 grids the run is
// bitwise the single-process reference (run_reference) that processes the DP ranks' micro-batches
// in rank order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/common/error.h"
#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/train/data.h"
#include "canzona/train/parallel_checkpoint.h"
#include "canzona/train/schedule.h"

namespace canzona::train {

struct TrainOptions {
  // Model, grid, matrix optimizer and its options, AdamW options, planner knobs, seed (init and
  // data sampler), reduce mode, ZeRO stage (ZeroStage::kThree: each rank keeps its DP shard of
  // params and gradients, buckets gathered around their use forward and backward; asc and lb-asc
  // only; bitwise the same results as stage 1).
  launch::JobOptions job;
  // "adamw": every param element-wise (the model spec is re-classed before planning).
  bool all_adamw = false;
  std::int64_t steps = 100;        // optimizer steps
  std::int64_t seq_len = 128;      // tokens per window
  std::int64_t micro_batch = 4;    // windows per micro-batch
  std::int64_t grad_accum = 1;     // micro-batches per DP rank and step
  ScheduleOptions schedule;        // total = steps
  std::int64_t eval_every = 25;    // validation loss every N steps (and after the last); 0 = off
  std::int64_t eval_windows = 64;  // held-out windows per validation
  std::vector<plan::Strategy> strategies = {plan::Strategy::kLbAsc};
  // Copy the final params into StrategyRun::final_params (world rank 0, TP = 1) for --verify: one
  // more fp32 copy of the model, so off unless asked for.
  bool keep_final_params = false;
  std::string trace_path;  // Chrome trace of the first strategy; empty = none
  // Checkpoints (train/parallel_checkpoint.h): save, resume, start from HF weights. Saving or
  // resuming needs a single strategy.
  CheckpointOptions checkpoint;
  // Test hooks are faults (common/faults.h: kPoisonLoss, kKillAfterStep, kKillInSave), not
  // options.
  std::int64_t tokens_per_step() const;  // dp x grad_accum x micro_batch x seq_len
};

// Throws UsageError naming the flag: sizes not positive or above their limits, eval settings
// negative, schedule out of range (schedule.h), --save-every / --keep negative, checkpoint flags
// with more than one strategy, --resume with --init-from, and launch::validate(job).
void validate(const TrainOptions& options);

// Milliseconds of one step on one rank (world rank 0's in progress lines; the JSON has the max
// over ranks per step).
struct StepRecord {
  std::int64_t step = 0;
  double loss = 0.0;  // mean train loss of the step over DP ranks and micro-batches
  // MoE: the load-balancing loss (before router_aux_loss_coef), averaged as loss; 0 for dense.
  double aux_loss = 0.0;
  double lr_scale = 0.0;  // schedule factor
  double step_ms = 0.0;
  double fwd_bwd_ms = 0.0;  // forward + backward compute (waits excluded)
  double grad_sync_ms = 0.0;
  double opt_ms = 0.0;
  double param_sync_ms = 0.0;  // exposed waits for updated params
  // PP > 1: time this rank waited for a neighbour stage's activations or gradients (and, on the
  // last stage, for the tied embedding's summed gradient) during the forwards and backwards: the
  // pipeline bubble as its stage sees it. 0 at PP 1.
  double pipeline_wait_ms = 0.0;
  double tokens_per_s = 0.0;  // tokens_per_step / step time
  // This rank's grad_ready calls made from autograd's accumulation hooks while backward ran
  // (every param of the stage, when gradients are handed over during backward, but the last
  // stage's tied-embedding copy, whose gradient arrives from the first stage afterwards).
  int grad_ready_in_backward = 0;
  // Peak resident size of this process so far in this run (VmHWM, memory.h; -1 unknown); in the
  // JSON the max over ranks.
  std::int64_t peak_rss_bytes = -1;
  // Bytes this rank handed its DP and TP communicators inside the optimizer step
  // (comm::CommBytes, measured; in the JSON the max over ranks): 0 over DP for every strategy but
  // fsdp-a2a, whose owner All-to-Alls move each matrix's gradient and update.
  std::int64_t opt_dp_bytes = 0;
  std::int64_t opt_tp_bytes = 0;
};

// Memory of one run per rank, max over ranks (world rank 0). params, grads and optimizer state
// are what the engine keeps between steps (engine::MemoryHeld: the shards under ZeRO-3);
// activations the largest growth of the heap over one forward (what autograd keeps for the
// backward, measured); peak_rss the process's peak resident size during the run, base_rss its
// resident size when the run started (libtorch, MPI, the corpus, a previous run's heap). So
// peak_rss - base_rss - activations is what the run's buffers, state and transient gathers took.
// kept is the largest sum params + grads + optimizer state of one rank, resident_kept the same
// measured after the last step (engine::MemoryHeld::resident_bytes: the buffers' resident
// pages, mincore, with the state); model_total the bytes of
// one copy of every param and gradient (fp32, TP-local elements summed over the TP ranks) plus
// the optimizer state of every rank: what a perfect ZeRO-3 would split evenly over the grid.
struct RunMemory {
  std::int64_t params_bytes = 0;
  std::int64_t grads_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  std::int64_t activations_bytes = 0;
  std::int64_t peak_rss_bytes = -1;
  std::int64_t base_rss_bytes = -1;
  std::int64_t kept_bytes = 0;
  std::int64_t resident_kept_bytes = 0;
  std::int64_t model_total_bytes = 0;
};

// One step of one pipeline stage: each time the max over the stage's ranks.
struct StageStep {
  double step_ms = 0.0;
  double fwd_bwd_ms = 0.0;
  double opt_ms = 0.0;
  double pipeline_wait_ms = 0.0;
};

struct ValRecord {
  std::int64_t step = 0;
  double loss = 0.0;
};

struct StrategyRun {
  plan::Strategy strategy = plan::Strategy::kLbAsc;
  std::int64_t first_step = 1;    // 1, or the resumed checkpoint's step + 1
  std::vector<StepRecord> steps;  // world rank 0: per step, times = max over ranks
  // PP > 1, world rank 0: [stage][step index] the stage's times (the simulator's per-stage
  // prediction is checked against these); empty at PP 1.
  std::vector<std::vector<StageStep>> stage_steps;
  std::vector<ValRecord> val;
  std::uint64_t params_hash = 0;  // FNV-1a of every rank's final params in world-rank order
  // FNV-1a of every rank's final optimizer state (Engine::optimizer_state: main params and the
  // optimizer's state, in the engine's order) in world-rank order: equal for equal state on
  // equal plans (ZeRO-1 against ZeRO-3), not across strategies, which spread it differently.
  std::uint64_t state_hash = 0;
  std::uint64_t plan_hash = 0;
  RunMemory memory;
  // World rank 0 of a TP = 1 grid with keep_final_params: [spec param] final values (compared
  // with run_reference); empty otherwise.
  std::vector<std::vector<float>> final_params;
};

// Called on world rank 0 after each step and validation (progress lines).
// Whether training validates after `step`: every eval_every steps and after the last (none when
// eval_every is 0). Progress::val follows Progress::step for such a step.
bool validates_after(const TrainOptions& options, std::int64_t step);

struct Progress {
  std::function<void(const StrategyRun&, const StepRecord&)> step;
  std::function<void(const StrategyRun&, const ValRecord&)> val;
  std::function<void(plan::Strategy)> start;
  std::function<void(const std::string& dir, double ms)> saved;   // after each checkpoint save
  std::function<void(const std::string& dir, double ms)> loaded;  // after --resume / --init-from
};

// SIGTERM or SIGINT reached a rank during training: every rank stops after the step it is in
// (a save in progress completes first), saves a checkpoint there when --save-dir is set, and
// throws this identically. exit_code() is 128 + the signal's number (143, 130), as a shell
// reports a process ended by that signal. A second signal ends the process at once (the default
// action); no checkpoint is ever published half-written either way (saves publish by rename).
class Interrupted : public Error {
 public:
  Interrupted(const std::string& what, int signal) : Error(what), signal_(signal) {}
  int exit_code() const { return 128 + signal_; }

 private:
  int signal_;
};

// A non-finite loss: every rank throws it identically (message names the step and world rank
// 0's first non-finite tensor).
class NonFiniteLoss : public Error {
 public:
  using Error::Error;
};

// Trains each strategy of options.strategies in turn. Collective over the grid; `corpus` must be
// identical on every rank. With options.checkpoint.resume the run continues from the checkpoint's
// step (its params, optimizer state and step count; the data sampler and lr schedule are functions
// of the step, so nothing else is needed), bitwise as the uninterrupted run would have. Throws
// launch::PlanAgreementError (plan mismatch), NonFiniteLoss, UsageError (a checkpoint that is
// corrupt or does not fit), or Error.
// Sets glibc malloc, process-wide and once, to keep freed memory for reuse (no mmap per large
// block, no heap trimming): a training step then reuses the previous step's pages instead of
// faulting in and zeroing its activations again. train() calls it first; the peak resident
// size stays the peak of one step.
void keep_freed_memory();

// A mixture-of-experts model also needs this rank's expert groups (comm::make_mpi_expert_groups or
// make_thread_expert_groups for job.dims): its experts train in a second engine over the
// expert grid, their gradients scaled by 1/DP and reduced over expert DP (Megatron's
// expert_gradient_scaling_factor), the dense step first, then the expert step; the loss adds
// router_aux_loss_coef x the load-balancing loss (Qwen3Model::load_balancing_loss; under PP each
// stage adds its share, load_balancing_share, with every stage's expert choices).
std::vector<StrategyRun> train(comm::Grid& grid, const model::TransformerConfig& config,
                               const model::ModelSpec& spec, const TrainOptions& options,
                               const Corpus& corpus, const Progress& progress,
                               comm::ExpertGroups* experts = nullptr);

// The single-process reference: one process, one model at TP = 1 (the spec rebuilt for tp = 1,
// whose padded vocabulary must equal spec's), the DP ranks' micro-batches processed in rank order,
// each rank's gradient scaled by 1/DP and summed in rank order, the reference optimizer
// (engine::ReferenceOptimizer). For a TP = 1 grid under kDeterministic its losses and final
// params are bitwise those of train(); for TP > 1 the losses agree to rounding. A MoE model runs
// every expert in the one process (EP 1): bitwise train() at EP 1; at EP > 1 to rounding, because
// there an expert's weight gradient is one GEMM over the tokens its EP group sent it, where the
// reference sums one GEMM per DP rank.
struct ReferenceRun {
  std::vector<double> losses;              // per step, as StepRecord::loss
  std::vector<std::vector<float>> params;  // [param of the tp = 1 spec] final values
};
ReferenceRun run_reference(const model::TransformerConfig& config, const model::ModelSpec& spec,
                           const TrainOptions& options, const Corpus& corpus);

// The model spec `options` trains: the loaded model, re-classed to element-wise for all_adamw.
// A MoE model (or --ep / --etp above 1) also passes the expert grid's checks (model::expert_part,
// ParallelDims::check); train keeps expert TP 1: --etp above 1 is a UsageError naming it.
model::ModelSpec training_spec(const model::TransformerConfig& config, const TrainOptions& options);

}  // namespace canzona::train
