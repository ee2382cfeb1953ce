// Internal pieces of simulate() (simulate.h), one per phase of a stage's iteration, so each can be
// read and tested apart.
#pragma once

#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/rank_plan.h"
#include "canzona/sim/cluster.h"
#include "canzona/sim/simulate.h"

namespace canzona::sim::detail {

// Forward-backward of one stage: seconds per micro batch and the overlap windows.
struct StageCompute {
  double per_micro_batch_s = 0.0;
  double last_backward_s() const { return per_micro_batch_s * 2.0 / 3.0; }
  double first_forward_s() const { return per_micro_batch_s / 3.0; }
};

// The 1F1B forward-backward of every stage (plan::one_f_one_b), timed operation by operation: a
// stage runs its operations in order; the forward of micro batch m starts once the previous
// stage's forward of m ended and its activation arrived (`p2p_s` later), the backward once the
// next stage's backward of m ended and its gradient arrived. A forward takes a third of the
// stage's per-micro-batch time, a backward two thirds. Sends do not hold their sender (posted,
// completed later, as the trainer's). Above kMaxTimedOps operations the critical path of equal
// steady stages is used for every stage: sum of the stages' times + (m - 1) x the slowest + 2
// (stages - 1) transfers.
inline constexpr std::int64_t kMaxTimedOps = std::int64_t{1} << 22;
struct PipelineTimes {
  std::vector<double> end_s;      // [stage] its last backward's end
  std::vector<double> compute_s;  // [stage] m x its per-micro-batch time
  std::vector<double> bubble_s;   // [stage] end - compute: waits for neighbours and transfers
};
PipelineTimes time_pipeline(const std::vector<StageCompute>& stages, std::int64_t micro_batches,
                            double p2p_s);

struct DpSync {
  double exposed_s = 0.0;         // backward overrun + forward (and ZeRO-3 backward) stalls
  double total_s = 0.0;           // sum of every DP collective
  double gather_total_s = 0.0;    // the param All-Gathers among them
  double gather_exposed_s = 0.0;  // the compute stalls they cause
};

// DP gradient sync and param gathers of one stage (bucket by bucket, Megatron order). ZeRO-1:
// one gather per bucket after the step, overlapped with the first forward. ZeRO-3
// (ZeroStage::kThree): every micro batch gathers each bucket before its forward and again before
// its backward (but the last bucket of the forward, still gathered), one bucket prefetched
// (run_prefetched_pass); the gradient Reduce-Scatters follow the last micro batch's backward on the
// same stream.
DpSync dp_sync(const plan::StagePlan& stage, const plan::StrategyParts& parts, int dp,
               const Link& link, const StageCompute& compute, const Workload& workload,
               ZeroStage zero_stage, std::int64_t micro_batches);

// The optimizer step of one DP rank of one stage (all its TP ranks): `elementwise_s` of AdamW,
// then the matrix tasks the rank computes (dp_owner == dp_rank, or every rank for negative
// owners). Tasks with host kAllTp (tp == 1, sc, layerwise, replicated params) run on every TP
// rank, after a ring All-Gather of the gradient over TP when the param is TP-split (one per task,
// not overlapped). Hosted tasks run in the rank's micro groups (stage.groups[dp_rank]) on
// run_micro_groups, pipelined or not per workload.tp_pipeline. Task.gather_bytes is read as the
// fp32 bytes of the full matrix and scaled to workload.grad_bytes. Under the owner exchange
// (fsdp-a2a) the rank's tasks count in host_task_s only: owner_exchange times them.
struct RankStep {
  double compute_s = 0.0;  // time with free communication
  double total_s = 0.0;    // with TP communication
  double tp_comm_sequential_s = 0.0;
  double tp_comm_pipelined_s = 0.0;
  int micro_groups = 0;
  std::vector<double> host_task_s;  // [tp rank] summed matrix task seconds it computes
};

RankStep optimizer_step(const model::ModelSpec& model, const plan::StagePlan& stage,
                        const plan::PlanOptions& options, int dp_rank, const Cluster& cluster,
                        const Workload& workload, double elementwise_s);

// fsdp-a2a: the owner exchange of one stage (owner_exchange.h of the engine). Every DP rank takes
// part in each batch's All-to-All; per batch the gradient All-to-All over DP (max over ranks of
// the bytes sent or received off-rank, workload.grad_bytes per element), then with TP > 1 the
// owners' ring All-Gathers of their TP-split matrices, the slowest owner's tasks, and the update
// All-to-All back (the same volume), pipelined as the micro groups are (run_micro_groups).
struct OwnerExchangeTime {
  double compute_s = 0.0;       // sum over batches of the slowest owner's task seconds
  double exposed_comm_s = 0.0;  // what the exchange adds to it
};
OwnerExchangeTime owner_exchange(const model::ModelSpec& model, const plan::StagePlan& stage,
                                 const plan::PlanOptions& options, const Cluster& cluster,
                                 const Workload& workload);

// layerwise: All-Gather-v of the updated params each DP rank owns, inside the optimizer step.
double layerwise_param_sync_s(const plan::StagePlan& stage, int dp, const Link& link,
                              const Workload& workload);

// Elements of element-wise (AdamW) params DP rank r updates, [dp rank], TP-local.
std::vector<double> elementwise_numel(const model::ModelSpec& model, const plan::StagePlan& stage,
                                      int dp);

}  // namespace canzona::sim::detail
