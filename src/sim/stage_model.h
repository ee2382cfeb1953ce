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

struct DpSync {
  double exposed_s = 0.0;  // backward overrun + forward stall
  double total_s = 0.0;    // sum of every DP collective
};

// DP gradient sync and ZeRO-1 param gather of one stage (bucket by bucket, Megatron order).
DpSync dp_sync(const plan::StagePlan& stage, const plan::StrategyParts& parts, int dp,
               const Link& link, const StageCompute& compute, const Workload& workload);

// The optimizer step of one DP rank of one stage (all its TP ranks): `elementwise_s` of AdamW,
// then the matrix tasks the rank computes (dp_owner == dp_rank, or every rank for negative
// owners). Tasks with host kAllTp (tp == 1, sc, layerwise, replicated params) run on every TP
// rank, after a ring All-Gather of the gradient over TP when the param is TP-split (one per task,
// not overlapped). Hosted tasks run in the rank's micro groups (stage.groups[dp_rank]) on
// run_micro_groups, pipelined or not per workload.tp_pipeline. Task.gather_bytes is read as the
// fp32 bytes of the full matrix and scaled to workload.grad_bytes.
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

// layerwise: All-Gather-v of the updated params each DP rank owns, inside the optimizer step.
double layerwise_param_sync_s(const plan::StagePlan& stage, int dp, const Link& link,
                              const Workload& workload);

// Elements of element-wise (AdamW) params DP rank r updates, [dp rank], TP-local.
std::vector<double> elementwise_numel(const model::ModelSpec& model, const plan::StagePlan& stage,
                                      int dp);

}  // namespace canzona::sim::detail
