// The TP half of minimum-movement re-planning (replan.h, "TP"): per DP rank, kept hosts within
// the tolerance, LPT for the rest, micro groups packed first-fit by C_max as balanced_groups does.
#include "replan/replan_tp.h"

#include <algorithm>
#include <numeric>

#include "algorithms/stage_groups.h"
#include "algorithms/tp.h"
#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"

namespace canzona::plan {
namespace {

constexpr double kSlack = 1e-9;  // relative slack of cap comparisons (rounding)
constexpr double kMiB = 1024.0 * 1024.0;

bool tp_hosted(const model::ParamSpec& p, const PlanOptions& o) {
  return o.dims.tp > 1 && p.tp_split_dim >= 0 &&
         (o.strategy == Strategy::kAsc || o.strategy == Strategy::kLbAsc);
}

// LPT order: cost descending, index ascending.
std::vector<int> lpt_order(const std::vector<TpTask>& tasks) {
  std::vector<int> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return tasks[a].cost > tasks[b].cost; });
  return order;
}

// Micro groups for fixed hosts, as balanced_groups packs them: tasks in LPT order, each to the
// first group where its host's bytes stay within capacity or its host has nothing yet.
std::vector<TpGroup> pack_groups(const std::vector<TpTask>& tasks, const std::vector<int>& hosts,
                                 int tp, std::int64_t capacity) {
  std::vector<TpGroup> groups;
  std::vector<std::vector<std::int64_t>> used;  // [group][host]
  for (int t : lpt_order(tasks)) {
    const int h = hosts[t];
    std::size_t g = 0;
    for (; g < groups.size(); ++g)
      if (used[g][h] == 0 || tasks[t].bytes <= capacity - used[g][h]) break;
    if (g == groups.size()) {
      groups.emplace_back();
      used.emplace_back(tp, 0);
    }
    groups[g].tasks.push_back(t);
    groups[g].hosts.push_back(h);
    used[g][h] += tasks[t].bytes;
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> load(tp, 0.0);
    for (std::size_t k = 0; k < groups[g].tasks.size(); ++k)
      load[groups[g].hosts[k]] += tasks[groups[g].tasks[k]].cost;
    groups[g].makespan = *std::max_element(load.begin(), load.end());
    groups[g].max_host_bytes = *std::max_element(used[g].begin(), used[g].end());
  }
  return groups;
}

std::vector<double> host_loads(const std::vector<TpTask>& tasks, const std::vector<int>& hosts,
                               int tp) {
  std::vector<double> load(tp, 0.0);
  for (std::size_t k = 0; k < tasks.size(); ++k) load[hosts[k]] += tasks[k].cost;
  return load;
}

// Hosts of one DP rank's tasks keeping the candidates' old hosts (replan.h, TP), or empty when
// no kept host fits within the cap. Pins are taken largest state first while their host stays
// within the cap, then halved until the rest fits: each remaining task, in LPT order, goes to the
// host that stays within the cap with the least work over the stage so far (`tp_total` plus this
// rank's), else to the least-loaded host.
std::vector<int> kept_hosts(const std::vector<TpTask>& tasks, const StagePlan& stage,
                            const std::vector<int>& ids,
                            std::vector<std::pair<int, int>> candidates,
                            const std::vector<double>& tp_total, double tolerance) {
  const int tp = static_cast<int>(tp_total.size());
  std::vector<int> all(tasks.size());
  std::iota(all.begin(), all.end(), 0);
  const std::vector<double> fresh =
      host_loads(tasks, lpt_hosts(tasks, all, std::vector<double>(tp, 0.0)), tp);
  const double cap = *std::max_element(fresh.begin(), fresh.end()) * (1 + tolerance) * (1 + kSlack);
  std::stable_sort(candidates.begin(), candidates.end(), [&](const auto& a, const auto& b) {
    return stage.tasks[ids[a.first]].state_bytes > stage.tasks[ids[b.first]].state_bytes;
  });
  std::vector<std::pair<int, int>> accepted;
  std::vector<double> load(tp, 0.0);
  for (const auto& [i, h] : candidates)
    if (load[h] + tasks[i].cost <= cap) {
      load[h] += tasks[i].cost;
      accepted.push_back({i, h});
    }
  const std::vector<int> order = lpt_order(tasks);
  for (std::size_t keep_count = accepted.size(); keep_count > 0; keep_count /= 2) {
    std::vector<int> hosts(tasks.size(), -1);
    std::fill(load.begin(), load.end(), 0.0);
    for (std::size_t k = 0; k < keep_count; ++k) {
      hosts[accepted[k].first] = accepted[k].second;
      load[accepted[k].second] += tasks[accepted[k].first].cost;
    }
    for (int t : order) {
      if (hosts[t] >= 0) continue;
      int best = -1;
      for (int h = 0; h < tp; ++h) {
        if (load[h] + tasks[t].cost > cap) continue;
        if (best < 0 || tp_total[h] + load[h] < tp_total[best] + load[best]) best = h;
      }
      if (best < 0)
        best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      hosts[t] = best;
      load[best] += tasks[t].cost;
    }
    if (*std::max_element(load.begin(), load.end()) <= cap) return hosts;
  }
  return {};
}

}  // namespace

namespace detail {

double tp_axis_ratio(const model::ModelSpec& model, const PlanOptions& o, const StagePlan& stage) {
  std::vector<double> hosted(o.dims.tp, 0.0);
  double even = 0.0;
  for (const Task& t : stage.tasks) {
    if (t.host >= 0)
      hosted[t.host] += t.cost;
    else
      even += t.cost * task_dp_ranks(t, o.dims.dp).size();
  }
  for (const auto& bucket : stage.layout.buckets)
    for (const auto& slot : bucket.slots)
      if (!model.params[slot.param].is_matrix())
        even += cost::task_cost(cost::kElementwiseOptimizer, slot.numel, 1, o.cost);
  const double top = *std::max_element(hosted.begin(), hosted.end()) + even;
  const double mean = std::accumulate(hosted.begin(), hosted.end(), 0.0) / o.dims.tp + even;
  return mean > 0 ? top / mean : 1.0;
}

void host_stage(const model::ModelSpec& model, const PlanOptions& o, const Holdings& old,
                int stage_index, double tolerance, int keep_ranks, StagePlan& stage) {
  const std::int64_t capacity = static_cast<std::int64_t>(o.cmax_mb * kMiB);
  stage.groups.assign(o.dims.dp, {});
  std::vector<std::vector<int>> hosted_by_dp(o.dims.dp);
  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    Task& t = stage.tasks[k];
    t.host = kAllTp;
    t.group = -1;
    if (t.dp_owner >= 0 && tp_hosted(model.params[t.param], o))
      hosted_by_dp[t.dp_owner].push_back(static_cast<int>(k));
  }
  std::vector<double> tp_total(o.dims.tp, 0.0);
  for (int d = 0; d < o.dims.dp; ++d) {
    const std::vector<int>& ids = hosted_by_dp[d];
    if (ids.empty()) continue;
    std::vector<TpTask> tasks;
    for (int k : ids) tasks.push_back({stage.tasks[k].cost, stage.tasks[k].gather_bytes});
    // Kept-host candidates, largest state first.
    std::vector<std::pair<int, int>> candidates;  // (position in ids, old host)
    const bool keep = d < keep_ranks && o.strategy == Strategy::kLbAsc;
    for (std::size_t i = 0; i < ids.size() && keep; ++i) {
      const Task& t = stage.tasks[ids[i]];
      const Task* was = old.task(t.param, t.piece);
      if (was != nullptr && old.stage_of(t.param) == stage_index && was->dp_owner == d &&
          was->host >= 0 && was->host < o.dims.tp)
        candidates.emplace_back(static_cast<int>(i), was->host);
    }
    std::vector<TpGroup> groups;
    if (o.strategy == Strategy::kAsc) {
      groups = round_robin_groups(tasks, o.dims.tp,
                                  o.asc_group_tasks > 0 ? o.asc_group_tasks : o.dims.tp);
    } else {
      const std::vector<int> hosts = kept_hosts(tasks, stage, ids, candidates, tp_total, tolerance);
      if (!hosts.empty()) {
        groups = pack_groups(tasks, hosts, o.dims.tp, capacity);
      } else {
        // As make_plan: the planner's groups, relabelled towards the TP axis's balance (ours).
        groups = o.variant == PlannerVariant::kPaper ? rollback_groups(tasks, o.dims.tp, capacity)
                                                     : balanced_groups(tasks, o.dims.tp, capacity);
        if (o.variant == PlannerVariant::kCanzona) relabel_hosts(groups, tasks, tp_total);
      }
    }
    assign_groups(stage, d, ids, groups);
    for (const TpGroup& g : groups)
      for (int k : g.tasks) tp_total[stage.tasks[ids[k]].host] += stage.tasks[ids[k]].cost;
  }
}

}  // namespace detail
}  // namespace canzona::plan
