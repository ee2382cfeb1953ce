// Replays one training iteration of a Plan on a simulated cluster (docs/simulator.md lists every
// modelling assumption; this header states the contract).
//
// Terms. An iteration is forward-backward over `micro_batches` micro batches per DP replica
// (1F1B pipeline over PP stages), the DP gradient sync (overlapped with the last micro batch's
// backward), the optimizer step (matrix tasks, element-wise AdamW, TP micro groups), and the
// param sync (ZeRO-1 All-Gather overlapped with the next forward; layerwise's All-Gather-v inside
// the step). Under ZeRO-3 (the plan's layout.zero_stage is ZeroStage::kThree) there is no param
// sync after the step: every micro batch gathers each bucket before its forward and again before
// its backward, one bucket prefetched, and those gathers' stalls count in dp_comm_exposed_s.
// fsdp-a2a's owner exchange (the gradients to the owners and the updates back) runs in the step.
// Pipeline stages (PP > 1) run 1F1B (plan::one_f_one_b), timed operation by operation with each
// activation and gradient sent between neighbouring stages (pp_link; activation_bytes per hidden
// element of a micro batch); each stage steps as soon as its own last backward and gradient sync
// are done, and the stage that finishes last is the critical one (Breakdown::stages has each).
// The trainer's finiteness agreement over every rank before the step is not modelled.
//
//   iteration_s = fwd_bwd_s + ep_comm_s + dp_comm_exposed_s + optimizer_s + tp_comm_s
//                 + dp_exchange_s + param_sync_s
//
// A MoE plan (plan.expert) has two buffers, as Megatron keeps them: the dense one over DP x TP
// and the expert one over expert DP x ETP. Each has its own DP sync (their exposed times add),
// owner exchange and param sync; every rank steps its dense tasks, then its expert tasks
// (Megatron's chained optimizer), and the slowest rank of the stage decides. The EP token
// exchange (ep_token_exchange_s in simulate.cpp) is counted whole, not overlapped.
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/sim/cluster.h"
#include "canzona/sim/collectives.h"

namespace canzona::sim {

// Limits of a Workload (check_workload). Real global batches are 0.5M-64M tokens of 2K-1M-token
// sequences; the limits leave orders of magnitude of room and keep every product of them (tokens
// per DP step, FLOPs of an iteration) finite and exact enough.
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;      // tokens per iteration
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;      // tokens per sequence
inline constexpr std::int64_t kMaxMicroBatch = std::int64_t{1} << 20;  // sequences per micro batch
inline constexpr double kMaxBytesPerElement = 1024.0;  // grad, param and AdamW bytes per element

// The training job around the optimizer. Defaults: a 512K-token global batch of 4096-token
// sequences, one sequence per micro batch, fp32 gradient buffer (Megatron main grads), bf16 model
// params gathered after the step, TP micro groups pipelined.
struct Workload {
  std::int64_t tokens = 524288;  // global batch, tokens per iteration
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch = 1;   // sequences per micro batch
  double grad_bytes = 4.0;        // bytes per gradient element in the DP sync and TP gathers
  double param_bytes = 2.0;       // bytes per model-param element in the param All-Gather
  double activation_bytes = 2.0;  // bytes per hidden element sent between pipeline stages and in
                                  // a MoE's EP token All-to-Alls
  double adamw_bytes_per_element = 30.0;  // HBM traffic of one AdamW element update: read and
                                          // write fp32 param, m, v, read fp32 grad, write bf16
  bool attention_flops = true;  // add causal attention FLOPs (6 * seq * heads * head_dim per
                                // token per layer, fwd+bwd) to 6 * matmul params per token
  bool tp_pipeline = true;      // overlap gather k+1 with compute k (docs/design.md section 4)
  VarCollective var_collective = VarCollective::kGrouped;  // uneven Reduce-Scatter / All-Gather
};

// One pipeline stage's iteration (seconds).
struct StageTimes {
  double fwd_bwd_s = 0.0;          // its micro batches' forward and backward compute
  double bubble_s = 0.0;           // 1F1B waits for the neighbouring stages and their sends
  double dp_comm_exposed_s = 0.0;  // its gradient sync past its last backward (and gather stalls)
  double optimizer_step_s = 0.0;   // its slowest rank's optimizer step (what train's optimizer is)
  double end_s = 0.0;              // fwd_bwd + bubble + dp_comm_exposed + optimizer_step
};

// Per-strategy result. Times in seconds for the critical (slowest) pipeline stage.
struct Breakdown {
  plan::Strategy strategy = plan::Strategy::kLbAsc;
  double iteration_s = 0.0;
  double fwd_bwd_s = 0.0;          // compute only, pipeline bubble included
  double dp_comm_exposed_s = 0.0;  // gradient sync past backward + param gather stalling forward
  double optimizer_s = 0.0;        // optimizer compute makespan (matrix tasks + AdamW)
  double tp_comm_s = 0.0;          // TP gathers/scatters not hidden behind optimizer compute
  double param_sync_s = 0.0;       // layerwise: All-Gather-v of updated params in the step
  double dp_exchange_s = 0.0;      // fsdp-a2a: owner All-to-Alls not hidden behind the step
  double ep_comm_s = 0.0;          // MoE: the EP token All-to-Alls (dispatch, combine), exposed

  // Details.
  double optimizer_step_s = 0.0;        // optimizer_s + tp_comm_s + dp_exchange_s + param_sync_s
                                        // (paper's "optimizer step")
  double expert_step_s = 0.0;           // MoE: the expert buffer's share of optimizer_step_s
  double param_gather_total_s = 0.0;    // every param All-Gather of the iteration (ZeRO-1: after
                                        // the step; ZeRO-3: in every forward and backward)
  double param_gather_exposed_s = 0.0;  // the compute stalls they cause (in dp_comm_exposed_s)
  double tp_comm_sequential_s = 0.0;    // tp_comm_s when micro groups run one after another
  double tp_comm_pipelined_s = 0.0;     // tp_comm_s when gather k+1 overlaps compute k
  double dp_comm_total_s = 0.0;         // all DP collectives of the stage, hidden or not
  double optimizer_rank_max_s = 0.0;    // max over grid ranks of the rank's matrix task seconds
  double optimizer_rank_mean_s = 0.0;   // mean of the same over grid ranks
  double fwd_bwd_flops = 0.0;           // model FLOPs of the iteration, whole cluster
  std::int64_t micro_batches = 0;       // per DP replica
  int critical_stage = 0;
  int micro_groups = 0;  // TP micro groups of the critical stage's slowest DP rank
  // PP > 1: one activation's (or its gradient's) transfer between neighbouring stages, and every
  // stage's times; at PP 1 `stages` has the one stage (no bubble).
  double pipeline_p2p_s = 0.0;
  std::vector<StageTimes> stages;
};

// Seconds of one optimizer task on its host: the factorization share (cost::factorization_flops,
// the optimizer's registry formula: Shampoo's eigh 9 s^3 / f, SOAP's QR 4/3 s^3 / f per
// preconditioned side, none for Muon) at Device::factorization_tflops,
// the rest of task.flops at Device::optimizer_flops_per_s(), plus the per-task overhead.
double task_seconds(const plan::Task& task, const cost::CostOptions& options, const Device& device);

// Throws UsageError naming the flag and the limit unless tokens lies in [1, kMaxTokens], seq_len
// in [1, kMaxSeqLen], micro_batch in [1, kMaxMicroBatch] and every byte size per element is
// finite and in (0, kMaxBytesPerElement].
void check_workload(const Workload& workload);

// Simulates one iteration of `plan` (made from `model` by plan::make_plan) on `cluster`.
// Throws UsageError as check_workload, for tp larger than a node, or when the tokens of one DP
// step (seq_len x micro_batch x dp) overflow; CANZONA_CHECK failures for a plan inconsistent with
// the model. Every time, FLOP count and ratio of the result is finite and >= 0; a value that is
// not is an Error (not a UsageError) naming the field. optimizer_rank_mean_s equals
// optimizer_rank_max_s exactly when every grid rank carries the same load.
Breakdown simulate(const model::ModelSpec& model, const plan::Plan& plan, const Cluster& cluster,
                   const Workload& workload);

// Forward-backward model FLOPs per token of each pipeline stage (index-aligned with
// plan.stages): 6 * (matmul params of the stage) + attention. Matmul params are the 2-D params,
// without the word embedding (a lookup) but with the output projection (the tied embedding's
// logits count on the last stage); an expert's params (model::is_expert_param, or the expert
// buffer's params of a MoE plan, times ep) count experts_per_token / num_experts of their size,
// the share of tokens each expert receives.
std::vector<double> stage_flops_per_token(const model::ModelSpec& model, const plan::Plan& plan,
                                          const Workload& workload);

}  // namespace canzona::sim
