// The distributed-optimizer engine: what a training loop drives, in the shape of Megatron-LM's
// DistributedDataParallel + DistributedOptimizer (docs/design.md sections 1 and 4;
// docs/architecture.md).
//
// Buffers (the rank's pipeline stage, grid.coord().pp, of the plan; the Megatron layout of the
// TP-local shapes, layout.h): one param buffer and one gradient buffer of layout.numel elements,
// in EngineOptions::param_dtype and grad_dtype() (fp32, or bf16; docs/precision.md), with a view
// per param. A
// backward pass writes each param's gradient into grad(p) and calls grad_ready(p); when the last
// param of a bucket is ready the engine scales the bucket by 1/DP (Megatron's
// gradient_scaling_factor: the only place gradients are averaged) and posts its DP collective
// (All-Reduce, or the variable Reduce-Scatter with the plan's cuts), so it overlaps the rest of the
// backward. finish_grad_sync() waits for them all. step() runs the optimizer on what this rank
// computes (plan::decode_rank: element-wise slices with AdamW, whole-matrix tasks, TP tasks through
// the redundant TP gather or the micro-group pipeline) and writes the updated values into the
// param buffer. start_param_sync() sends the updated params to the DP ranks that did not compute
// them (nothing for sc; the layer-wise All-Gather-v, waited at once; or one variable All-Gather per
// bucket, posted in forward order) and the next forward calls wait_param_sync(bucket) right before
// it first uses the bucket.
//
// Inside, the engine is a composition of parts that each own their state (src/engine/: the
// buffers, the DP gradient sync, the optimizer shards, the TP exchange, the param sync); a
// strategy picks one variant of the three that differ (plan::StrategyParts: grad_sync.cpp,
// tp_exchange.cpp, param_sync.cpp).
//
// ZeRO-3 (EngineOptions::zero_stage = ZeroStage::kThree). Both buffers stay at fixed addresses, but
// between uses a rank keeps only its DP shard of the params (the elements [cuts[d], cuts[d+1]) of
// each bucket: whole matrices on Canzona's cuts) and of the reduced gradients; every other page is
// given back to the system (page_buffer.h). The client gathers a bucket before using it
// (prefetch_params posts its All-Gather, wait_param_sync completes it) and release_params gives it
// back after its last use, in the forward and again in the backward. A bucket's gradients are given
// back as soon as its Reduce-Scatter completes. The optimizer step is the stage-1 step: every
// element a rank updates lies in its shard, so it needs no communication beyond stage 1's TP
// exchange, and start_param_sync posts nothing (the next forward gathers). Values are bitwise
// those of stage 1.
//
// Optimizer state. Main params (fp32 copies of each computed task matrix) and optimizer state live
// only on the ranks that compute them. optimizer_state() lists what this rank holds by param name
// and state name; set_optimizer_state() and set_step_count() restore it (checkpoint resume: with
// the param buffer restored too, the next step is bitwise the uninterrupted run's).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/engine/trace.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/rank_plan.h"

namespace canzona::engine {

// What the engine itself needs to know; the rest of a launch's options (steps, data, the
// synthetic workload) belong to its client.
struct EngineOptions {
  std::string optimizer = "muon";  // matrix optimizer: a registered optim::OptimizerShape::kMatrix
  nlohmann::json optimizer_options = nlohmann::json::object();  // its options (registry keys)
  nlohmann::json adamw_options = nlohmann::json::object();      // element-wise params
  bool pipeline = true;  // TP micro groups: post group k+1's gather before computing group k
  // kOne: every rank keeps the whole param and gradient buffers (ZeRO-1: only optimizer state is
  // sharded). kThree: each rank keeps only its DP shard of both between uses (ZeRO-3, below);
  // needs a strategy that shards params (plan::StrategyInfo::shards_params: asc, lb-asc,
  // fsdp-a2a).
  ZeroStage zero_stage = ZeroStage::kOne;
  // The DP degree whose 1/DP scales each bucket before its collective; 0: the grid's. A MoE
  // model's expert buffer, synced over expert DP, is scaled by the dense DP as Megatron's
  // expert_gradient_scaling_factor is.
  int grad_scaling_dp = 0;
  // The dtype of the param buffer (Megatron's params_dtype; docs/precision.md). Main params and
  // optimizer state are fp32 either way; under bf16 every element a rank updates has an fp32
  // main copy and the param is re-cast from it after each step.
  DType param_dtype = DType::kF32;
  // The gradient buffer, its scaling and its DP reduction in fp32 even when params are bf16
  // (Megatron's grad_reduce_in_fp32); otherwise gradients have the param dtype.
  bool grad_reduce_in_fp32 = false;
};

// The gradient buffer's dtype under `options`.
DType grad_dtype(const EngineOptions& options);

// The factor every local gradient is multiplied by before its DP collective: float(1 / dp)
// (Megatron's gradient_scaling_factor; the only place gradients are averaged).
float grad_scale(int dp);
// Multiplies every gradient by `scale` in its dtype: fp32 in place; bf16 through fp32, the
// product rounded to nearest even (what torch's bf16 multiply gives).
void scale_grads(TypedSpan grads, float scale);

// Milliseconds on one rank for one step. The engine fills the optimizer fields (step()), the
// exposed waits it does (finish_grad_sync, start/wait_param_sync return them); the training loop
// fills the rest.
struct StepTimes {
  double step = 0.0;         // whole step
  double forward = 0.0;      // forward compute (waits excluded)
  double backward = 0.0;     // backward compute + posting
  double grad_sync = 0.0;    // exposed wait for the DP gradient collectives
  double opt = 0.0;          // optimizer phase: opt_compute + opt_comm
  double opt_compute = 0.0;  // optimizer kernels, packing and copies
  double opt_comm = 0.0;     // exposed waits inside the optimizer (TP All-Gather / All-to-All)
  double param_sync = 0.0;   // exposed waits for updated params (layerwise All-Gather-v, asc
                             // bucket All-Gathers waited in the next forward)
  double opt_cpu = 0.0;      // thread CPU time of the optimizer's compute
  double busy_cpu = 0.0;     // thread CPU time of all compute (waits excluded)
};

// Local elements [begin, end) of a param.
struct ElementRange {
  std::int64_t begin = 0, end = 0;
};

// Bytes this rank keeps between steps (max over nothing: this rank's own).
struct MemoryHeld {
  std::int64_t params_bytes = 0;           // the param buffer, or its shards under ZeRO-3
  std::int64_t grads_bytes = 0;            // the gradient buffer and the reduced shards
  std::int64_t optimizer_state_bytes = 0;  // state_bytes(): main params and optimizer state
  // Measured now: the param and gradient buffers' pages resident in memory (mincore), the
  // reduced-shard buffer and the state (always resident once written).
  std::int64_t resident_bytes = 0;
};

// A range of reduced gradient this rank holds: {layout offset, values in the grad dtype}.
struct GradRange {
  std::int64_t offset = 0;
  ConstTypedSpan values;
};

// One optimizer-state tensor (or a main param) this rank holds. For a matrix task: the whole
// task matrix (piece >= 0 for a piece of the param, -1 for the whole param), rows x cols of the
// un-TP-split shape. For an element-wise param: local elements [begin, end) of this TP rank's
// shard (rows = 1, cols = end - begin).
struct StateTensor {
  std::string param;  // model param name
  std::string state;  // "main" (fp32 main param), or the optimizer's state name (e.g. "momentum")
  int piece = -1;
  std::int64_t begin = 0, end = 0;  // element-wise slices only
  std::int64_t rows = 0, cols = 0;
  std::span<float> values;  // the live state; writes change it
  int row_axes = 0;         // optim::NamedState::row_axes (main: 1)
};

class Engine {
 public:
  // Collective over grid.tp() only in init_main_params(). Needs a plan made for this
  // model with the grid's dp, tp and pp (validate_plan); runs stage grid.coord().pp of it.
  // Allocates the buffers and the optimizer instances of what this rank computes. Trace is
  // borrowed.
  Engine(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
         const EngineOptions& options, Trace& trace);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const plan::RankPlan& rank_plan() const;
  const plan::StagePlan& stage() const;

  // The param buffer (layout order) and one param's view in it; the gradient view a backward
  // writes into. Params not in the stage have empty views. Their dtypes are param_dtype() and
  // grad_dtype() (EngineOptions).
  ConstTypedSpan params() const;
  DType param_dtype() const;
  DType grad_dtype() const;
  // FNV-1a of this rank's params in model param order, padding excluded: equal for equal values
  // under any layout (the order inside a bucket is free, docs/design.md section 3).
  // Under ZeRO-3 collective over DP: it gathers one bucket at a time and releases it.
  std::uint64_t params_fnv();
  TypedSpan param(int p);
  TypedSpan grad(int p);
  int bucket_of(int p) const;
  ZeroStage zero_stage() const;
  // The local elements of p inside this rank's DP shard (the whole param for strategies without
  // cuts; empty when the shard holds none of it): what ZeRO-3 keeps of p between uses.
  ElementRange held_elements(int p) const;
  // The reduced gradient of p's held elements after finish_grad_sync (sharded strategies), or of
  // all of p (All-Reduce ones), in the grad dtype.
  ConstTypedSpan reduced_grad(int p) const;
  // Zeroes the gradient buffer for the next step's accumulation (ZeRO-3: by giving its pages
  // back, so it stays unresident until backward writes it).
  void zero_grads();
  // ZeRO-3 (no-ops under stage 1): posts bucket b's param All-Gather unless it is gathered or in
  // flight, and gives back b's params outside this rank's shard. Collective over DP: every DP rank
  // gathers the same buckets in the same order.
  void prefetch_params(int bucket);
  void release_params(int bucket);
  MemoryHeld memory_held() const;

  // Collective over grid.tp(): copies the params the client wrote into the main params of the
  // tasks this rank computes (TP-split ones gathered through the strategy's TP exchange). Call
  // once after the params are initialised (or loaded), before the first step(). Under ZeRO-3 the
  // client need write only its held elements; every bucket is released afterwards.
  void init_main_params();

  // Marks p's gradient as written for this step. When every param of its bucket is ready, scales
  // the bucket by 1/DP and posts its collective. Throws Error when p is marked twice in a step.
  void grad_ready(int p);
  // Lets collectives in flight progress (call between pieces of backward compute, and under
  // ZeRO-3 of forward compute: the param gathers).
  void progress();
  // Waits for every gradient collective of the step; returns the exposed wait in ms. Throws
  // Error unless every bucket was posted.
  double finish_grad_sync();

  // The optimizer step: fills the opt* fields of the result. Throws Error unless
  // init_main_params() ran and finish_grad_sync() ran since the last step().
  StepTimes step();

  // Sends the updated params to the ranks that need them; returns the exposed wait in ms (the
  // layer-wise All-Gather-v is waited here; bucket All-Gathers are only posted).
  double start_param_sync();
  // Waits for bucket b's param sync (no-op when none is in flight); returns the exposed ms.
  // ZeRO-3: gathers bucket b (prefetch_params) and waits for it.
  double wait_param_sync(int bucket);
  // Waits for every param sync still in flight; afterwards params() is final (stage 1). ZeRO-3:
  // releases every bucket; params() then holds only this rank's shards.
  void finish();

  // The reduced gradient of the last step where this rank holds it: All-Reduce strategies hold
  // the whole layout (one range), Reduce-Scatter ones their shard of each bucket.
  std::vector<GradRange> reduced_grads() const;
  bool grads_sharded() const;

  // Thread CPU milliseconds spent inside the engine's waits so far (a client's busy time
  // excludes them).
  double wait_cpu_ms() const;

  // Bytes of optimizer state and main params this rank holds; matrix tasks it computes.
  std::int64_t state_bytes() const;
  int computed_tasks() const;

  // Every state tensor this rank holds, in task then slice order: for each matrix task its main
  // param ("main") and its optimizer's state (optim::Optimizer::state(), e.g. "momentum_buffer"),
  // then for each element-wise slice its fp32 main copy ("main", bf16 params only) and its AdamW
  // state ("exp_avg", "exp_avg_sq").
  std::vector<StateTensor> optimizer_state();
  // The tensors of one param and state name this rank holds (empty when it holds none).
  std::vector<StateTensor> optimizer_state(const std::string& param, const std::string& state);
  // Optimizer steps taken (the same for every instance on the rank; 0 when it holds none), and
  // its restore for a resumed run: the next step() is step steps + 1.
  std::int64_t step_count() const;
  void set_step_count(std::int64_t steps);
  // The learning-rate schedule's factor for the next step() (optim::Optimizer::set_lr_scale) on
  // every optimizer instance of this rank. Throws UsageError unless finite and >= 0.
  void set_lr_scale(double scale);
  // The same with one factor for the matrix optimizer's tasks and one for AdamW's element-wise
  // params (a client whose two param groups carry their own learning rates, as
  // canzona.torch.DistributedOptimizer's do: options with lr 1, the groups' lr as the scales).
  void set_lr_scales(double matrix, double elementwise);
  // Overwrites the tensor (param, state, piece or element range as in `values` of a tensor
  // listed by optimizer_state) with `values`. Throws UsageError when this rank holds no such
  // tensor or the size differs.
  void set_optimizer_state(const std::string& param, const std::string& state, int piece,
                           std::int64_t begin, std::span<const float> values);

  struct Parts;

 private:
  std::unique_ptr<Parts> parts_;
};

}  // namespace canzona::engine
