#include "canzona/plan/metrics.h"

#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/plan/dp.h"
#include "canzona/plan/rank_plan.h"

namespace canzona::plan {
namespace {

struct MaxMean {
  double max = 0.0, sum = 0.0;
  int count = 0;
  void add(double v) {
    max = std::max(max, v);
    sum += v;
    ++count;
  }
  double mean() const { return count ? sum / count : 0.0; }
  double ratio() const { return sum > 0.0 ? max / mean() : 1.0; }
};

void add_adam(RankLoad& load, std::int64_t numel, const cost::CostOptions& c) {
  load.flops += cost::optimizer_flops(cost::kElementwiseOptimizer, numel, 1, c);
  load.memory += cost::state_bytes(cost::kElementwiseOptimizer, numel, 1, c);
}

// Work every DP rank does alike (sc's redundant updates, kEveryone tasks) is summed once per TP
// rank in `everyone` and added to each DP rank at the end, so the cost is O(slots + tasks +
// dp x tp), not O((slots + tasks) x dp x tp).
void stage_loads(const model::ModelSpec& model, const Plan& plan, const StagePlan& stage,
                 LoadGrid& loads, Metrics& m) {
  const PlanOptions& o = plan.options;
  const cost::CostOptions& c = o.cost;
  std::vector<RankLoad> everyone(o.tp);
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
    const auto& bucket = stage.layout.buckets[b];
    for (const auto& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      if (p.is_matrix()) continue;
      // Who updates which part (rank_plan.h): every rank alike (sc) goes to `everyone`,
      // otherwise only the DP ranks holding part of the slot: O(ranks that hold it) per slot.
      const RankRange ranks = slot_dp_ranks(stage, static_cast<int>(b), slot, o.dp);
      if (stage.owner[slot.param] == kEveryone) {
        for (int t = 0; t < o.tp; ++t) add_adam(everyone[t], slot.numel, c);
        continue;
      }
      for (int d = ranks.begin; d < ranks.end; ++d) {
        const auto [first, last] = slot_part(stage, static_cast<int>(b), slot, d);
        if (first >= last) continue;
        for (int t = 0; t < o.tp; ++t) add_adam(loads.at(d, t), last - first, c);
      }
      if (stage.owner[slot.param] == kDivided) ++m.divided_params;
    }
    const auto equal = equal_chunk_cuts(bucket.numel, o.dp);
    for (const auto& slot : bucket.slots) {
      const auto cut = std::upper_bound(equal.begin(), equal.end(), slot.offset);
      if (cut != equal.end() && *cut < slot.end()) ++m.split_tensors;
    }
    if (!stage.cuts.empty()) {
      const auto& cuts = stage.cuts[b];
      std::int64_t largest = 0;
      for (int r = 0; r < o.dp; ++r) largest = std::max(largest, cuts[r + 1] - cuts[r]);
      m.bucket_shard_ratio.push_back(static_cast<double>(largest) * o.dp /
                                     static_cast<double>(bucket.numel));
    }
  }
  for (const Task& t : stage.tasks) {
    const RankRange dps = task_dp_ranks(t, o.dp);
    const RankRange tps = task_tp_ranks(t, o.tp);
    const bool all = t.dp_owner == kEveryone;
    for (int h = tps.begin; h < tps.end; ++h)
      for (int d = all ? 0 : dps.begin; d < (all ? 1 : dps.end); ++d) {
        RankLoad& load = all ? everyone[h] : loads.at(d, h);
        load.flops += t.flops;
        load.memory += t.state_bytes;
      }
  }
  for (int d = 0; d < o.dp; ++d)
    for (int t = 0; t < o.tp; ++t) {
      loads.at(d, t).flops += everyone[t].flops;
      loads.at(d, t).memory += everyone[t].memory;
    }
}

}  // namespace

Metrics compute_metrics(const model::ModelSpec& model, const Plan& plan) {
  const PlanOptions& o = plan.options;
  Metrics m;
  double largest_param_flops = 0.0, largest_param_memory = 0.0;
  MaxMean grid_flops_all, grid_memory_all;
  for (const StagePlan& stage : plan.stages) {
    LoadGrid& loads = m.loads.emplace_back(o.dp, o.tp);
    stage_loads(model, plan, stage, loads, m);
    MaxMean dp_flops, dp_memory, grid_flops, grid_memory, tp_flops_all, tp_memory_all;
    for (int t = 0; t < o.tp; ++t) {
      RankLoad sum;
      for (int d = 0; d < o.dp; ++d) {
        sum.flops += loads.at(d, t).flops;
        sum.memory += loads.at(d, t).memory;
      }
      tp_flops_all.add(sum.flops);
      tp_memory_all.add(sum.memory);
    }
    m.tp.flops = std::max(m.tp.flops, tp_flops_all.ratio());
    m.tp.memory = std::max(m.tp.memory, tp_memory_all.ratio());
    for (int d = 0; d < o.dp; ++d) {
      MaxMean tp_flops, tp_memory;
      RankLoad sum;
      for (int t = 0; t < o.tp; ++t) {
        const RankLoad& l = loads.at(d, t);
        tp_flops.add(l.flops);
        tp_memory.add(l.memory);
        grid_flops.add(l.flops);
        grid_memory.add(l.memory);
        grid_flops_all.add(l.flops);
        grid_memory_all.add(l.memory);
        sum.flops += l.flops;
        sum.memory += l.memory;
        if (l.flops == 0.0 && l.memory == 0.0) ++m.idle_ranks;
      }
      dp_flops.add(sum.flops);
      dp_memory.add(sum.memory);
      m.tp_worst_group.flops = std::max(m.tp_worst_group.flops, tp_flops.ratio());
      m.tp_worst_group.memory = std::max(m.tp_worst_group.memory, tp_memory.ratio());
    }
    m.dp.flops = std::max(m.dp.flops, dp_flops.ratio());
    m.dp.memory = std::max(m.dp.memory, dp_memory.ratio());
    m.grid.flops = std::max(m.grid.flops, grid_flops.ratio());
    m.grid.memory = std::max(m.grid.memory, grid_memory.ratio());

    double largest_task_flops = 0.0, largest_task_memory = 0.0;  // this stage's
    std::vector<double> param_flops(model.params.size(), 0.0);
    std::vector<double> param_memory(model.params.size(), 0.0);
    for (const Task& t : stage.tasks) {
      const int copies = task_tp_ranks(t, o.tp).size();
      largest_task_flops = std::max(largest_task_flops, t.flops);
      largest_task_memory = std::max(largest_task_memory, t.state_bytes);
      param_flops[t.param] += t.flops * copies;
      param_memory[t.param] += t.state_bytes * copies;
    }
    for (std::size_t p = 0; p < param_flops.size(); ++p) {
      if (dp_flops.mean() > 0.0)
        largest_param_flops = std::max(largest_param_flops, param_flops[p] / dp_flops.mean());
      if (dp_memory.mean() > 0.0)
        largest_param_memory = std::max(largest_param_memory, param_memory[p] / dp_memory.mean());
    }
    if (grid_flops.mean() > 0.0)
      m.lower_bound_grid.flops =
          std::max(m.lower_bound_grid.flops, largest_task_flops / grid_flops.mean());
    if (grid_memory.mean() > 0.0)
      m.lower_bound_grid.memory =
          std::max(m.lower_bound_grid.memory, largest_task_memory / grid_memory.mean());
    for (const auto& groups : stage.groups) {
      double sum = 0.0;
      for (const auto& g : groups) sum += g.makespan;
      m.tp_groups += static_cast<int>(groups.size());
      m.group_makespan_sum = std::max(m.group_makespan_sum, sum);
    }
  }
  m.lower_bound_dp.flops = std::max(1.0, largest_param_flops);
  m.lower_bound_dp.memory = std::max(1.0, largest_param_memory);
  m.lower_bound_grid.flops = std::max(1.0, m.lower_bound_grid.flops);
  m.lower_bound_grid.memory = std::max(1.0, m.lower_bound_grid.memory);
  m.max_rank = {grid_flops_all.max, grid_memory_all.max};
  m.mean_rank = {grid_flops_all.mean(), grid_memory_all.mean()};
  for (double r : m.bucket_shard_ratio)
    m.bucket_comm_imbalance = std::max(m.bucket_comm_imbalance, r);
  return m;
}

}  // namespace canzona::plan
