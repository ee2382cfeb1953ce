// The optimizer step of one DP rank (stage_model.h).
//
// A task's seconds on its host: task_seconds() (simulate.h). TP micro group k moves, per rank,
// max(bytes received, bytes sent) off-rank: a host receives (tp-1)/tp of each of its tasks' full
// gradients and sends 1/tp of every other host's task; the update scatter moves the same volumes
// back.
#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"
#include "canzona/sim/collectives.h"
#include "stage_model.h"
#include "timeline.h"

namespace canzona::sim::detail {

namespace {

GroupCost group_cost(const plan::StagePlan& stage, const plan::MicroGroup& group, int tp,
                     const Link& link, const cost::CostOptions& cost, const Device& device,
                     const Workload& workload, std::vector<double>& host_task_s) {
  GroupCost g;
  g.compute_s.assign(tp, 0.0);
  std::vector<double> recv(tp, 0.0), send(tp, 0.0);
  for (int index : group.tasks) {
    CANZONA_CHECK(index >= 0 && static_cast<std::size_t>(index) < stage.tasks.size(), "task ",
                  index);
    const plan::Task& t = stage.tasks[index];
    CANZONA_CHECK(t.host >= 0 && t.host < tp, "task ", index, " host ", t.host, " tp ", tp);
    double seconds = task_seconds(t, cost, device);
    g.compute_s[t.host] += seconds;
    host_task_s[t.host] += seconds;
    double bytes = static_cast<double>(t.gather_bytes) * workload.grad_bytes / 4.0;
    recv[t.host] += bytes * (tp - 1) / tp;
    for (int h = 0; h < tp; ++h) {
      if (h != t.host) send[h] += bytes / tp;
    }
  }
  double max_bytes = 0.0;
  for (int h = 0; h < tp; ++h) max_bytes = std::max({max_bytes, recv[h], send[h]});
  g.gather_s = all_to_all_s(link, tp, max_bytes);
  g.scatter_s = g.gather_s;
  return g;
}

}  // namespace

RankStep optimizer_step(const model::ModelSpec& model, const plan::StagePlan& stage,
                        const plan::PlanOptions& options, int dp_rank, const Cluster& cluster,
                        const Workload& workload, double elementwise_s) {
  const int tp = options.tp;
  const Link link = tp_link(cluster, tp);

  RankStep out;
  out.host_task_s.assign(tp, 0.0);
  std::size_t hosted = 0;
  double all_tp_s = 0.0;       // tasks every TP rank computes
  double all_tp_comm_s = 0.0;  // their gradient All-Gathers
  for (const auto& t : stage.tasks) {
    if (!plan::task_dp_ranks(t, options.dp).contains(dp_rank)) continue;
    if (t.host != plan::kAllTp) {
      ++hosted;
      continue;
    }
    all_tp_s += task_seconds(t, options.cost, cluster.device);
    CANZONA_CHECK(t.param >= 0 && static_cast<std::size_t>(t.param) < model.params.size(),
                  "task param ", t.param);
    if (tp > 1 && model.params[t.param].tp_split_dim >= 0) {
      double bytes = static_cast<double>(t.gather_bytes) * workload.grad_bytes / 4.0;
      all_tp_comm_s += ring_all_gather_s(link, tp, bytes);
    }
  }
  for (double& h : out.host_task_s) h = all_tp_s;

  std::vector<GroupCost> groups;
  std::size_t grouped = 0;
  if (static_cast<std::size_t>(dp_rank) < stage.groups.size()) {
    for (const auto& group : stage.groups[dp_rank]) {
      groups.push_back(group_cost(stage, group, tp, link, options.cost, cluster.device, workload,
                                  out.host_task_s));
      grouped += group.tasks.size();
    }
  }
  CANZONA_CHECK(grouped == hosted, "DP rank ", dp_rank, " hosts ", hosted, " tasks but its micro ",
                "groups hold ", grouped);
  TpTimeline sequential = run_micro_groups(groups, false);
  TpTimeline pipelined = run_micro_groups(groups, true);
  const TpTimeline& used = workload.tp_pipeline ? pipelined : sequential;
  out.micro_groups = static_cast<int>(groups.size());
  out.tp_comm_sequential_s = all_tp_comm_s + sequential.exposed_comm_s();
  out.tp_comm_pipelined_s = all_tp_comm_s + pipelined.exposed_comm_s();
  out.compute_s = elementwise_s + all_tp_s + used.compute_s;
  out.total_s = out.compute_s + all_tp_comm_s + used.exposed_comm_s();
  return out;
}

}  // namespace canzona::sim::detail
