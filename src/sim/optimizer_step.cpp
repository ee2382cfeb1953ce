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
  const int tp = options.dims.tp;
  const Link link = tp_link(cluster, tp);

  RankStep out;
  out.host_task_s.assign(tp, 0.0);
  std::size_t hosted = 0;
  double all_tp_s = 0.0;       // tasks every TP rank computes
  double all_tp_comm_s = 0.0;  // their gradient All-Gathers
  const bool exchanged = plan::strategy_parts(options.strategy, options.layerwise_tp).dp_exchange ==
                         plan::DpExchange::kOwnerAllToAll;
  for (const auto& t : stage.tasks) {
    if (!plan::task_dp_ranks(t, options.dims.dp).contains(dp_rank)) continue;
    if (exchanged) {
      for (double& h : out.host_task_s) h += task_seconds(t, options.cost, cluster.device);
      continue;
    }
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
  for (double& h : out.host_task_s) h += all_tp_s;

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

OwnerExchangeTime owner_exchange(const model::ModelSpec& model, const plan::StagePlan& stage,
                                 const plan::PlanOptions& options, const Cluster& cluster,
                                 const Workload& workload) {
  const int dp = options.dims.dp, tp = options.dims.tp;
  const Link dp_net = dp_link(cluster, dp, tp);
  const Link tp_net = tp_link(cluster, tp);
  // Where each param lies: (bucket, slot).
  std::vector<std::pair<int, int>> where(model.params.size(), {-1, -1});
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b)
    for (std::size_t k = 0; k < stage.layout.buckets[b].slots.size(); ++k)
      where[stage.layout.buckets[b].slots[k].param] = {static_cast<int>(b), static_cast<int>(k)};
  std::vector<double> task_s(model.params.size(), 0.0);
  for (const plan::Task& t : stage.tasks)
    task_s[t.param] += task_seconds(t, options.cost, cluster.device);
  std::vector<GroupCost> batches;
  for (const std::vector<int>& batch : stage.owner_batches) {
    std::vector<double> sent(dp, 0.0), received(dp, 0.0), compute(dp, 0.0), tp_gather(dp, 0.0);
    for (int p : batch) {
      const int owner = stage.owner[p];
      CANZONA_CHECK(owner >= 0 && owner < dp && where[p].first >= 0, "owner-exchange param ", p);
      const layout::Slot& slot = stage.layout.buckets[where[p].first].slots[where[p].second];
      for (int q = 0; q < dp; ++q) {
        if (q == owner) continue;
        const auto [first, last] = plan::slot_part(stage, where[p].first, slot, q);
        const double bytes = static_cast<double>(last - first) * workload.grad_bytes;
        sent[q] += bytes;
        received[owner] += bytes;
      }
      compute[owner] += task_s[p];
      if (tp > 1 && model.params[p].tp_split_dim >= 0)
        tp_gather[owner] += ring_all_gather_s(
            tp_net, tp, static_cast<double>(model.params[p].numel()) * workload.grad_bytes);
    }
    double most = 0.0;
    for (int d = 0; d < dp; ++d) most = std::max({most, sent[d], received[d]});
    GroupCost g;
    g.compute_s = {*std::max_element(compute.begin(), compute.end())};
    g.scatter_s = all_to_all_s(dp_net, dp, most);
    g.gather_s = g.scatter_s + *std::max_element(tp_gather.begin(), tp_gather.end());
    batches.push_back(std::move(g));
  }
  const TpTimeline timeline = run_micro_groups(batches, true);
  return {timeline.compute_s, timeline.exposed_comm_s()};
}

}  // namespace canzona::sim::detail
