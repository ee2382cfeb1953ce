#include "canzona/plan/metrics.h"

#include <algorithm>

#include "algorithms/bounds.h"
#include "algorithms/dp.h"
#include "canzona/common/error.h"
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

void add_adam(RankLoad& load, std::int64_t numel, const cost::ElementwiseRates& c) {
  load.flops += c.flops * static_cast<double>(numel);
  load.memory += c.state_bytes * static_cast<double>(numel);
}

// Work every DP rank does alike (sc's redundant updates, kEveryone tasks) is summed once per TP
// rank in `everyone` and added to each DP rank at the end, so the cost is O(slots + tasks +
// dp x tp), not O((slots + tasks) x dp x tp).
// count_split: also count split_tensors (on Megatron's layout: the same for every plan of a stage).
void stage_loads(const model::ModelSpec& model, const Plan& plan, const StagePlan& stage,
                 LoadGrid& loads, Metrics& m, bool count_split) {
  const PlanOptions& o = plan.options;
  const cost::ElementwiseRates c = cost::elementwise_rates(o.cost);
  std::vector<RankLoad> everyone(o.dims.tp);
  m.buffer_elements += stage.layout.numel;
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
    const auto& bucket = stage.layout.buckets[b];
    m.padding_elements += bucket.numel;
    for (const auto& slot : bucket.slots) m.padding_elements -= slot.numel;
    for (const auto& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      if (p.is_matrix()) continue;
      // Who updates which part (rank_plan.h): every rank alike (sc) goes to `everyone`,
      // otherwise only the DP ranks holding part of the slot: O(ranks that hold it) per slot.
      const RankRange ranks = slot_dp_ranks(stage, static_cast<int>(b), slot, o.dims.dp);
      if (stage.owner[slot.param] == kEveryone) {
        for (int t = 0; t < o.dims.tp; ++t) add_adam(everyone[t], slot.numel, c);
        continue;
      }
      for (int d = ranks.begin; d < ranks.end; ++d) {
        const auto [first, last] = slot_part(stage, static_cast<int>(b), slot, d);
        if (first >= last) continue;
        for (int t = 0; t < o.dims.tp; ++t) add_adam(loads.at(d, t), last - first, c);
      }
      if (stage.owner[slot.param] == kDivided) ++m.divided_params;
    }
    if (!stage.cuts.empty()) {
      const auto& cuts = stage.cuts[b];
      std::int64_t largest = 0;
      for (int r = 0; r < o.dims.dp; ++r) largest = std::max(largest, cuts[r + 1] - cuts[r]);
      m.bucket_shard_ratio.push_back(static_cast<double>(largest) * o.dims.dp /
                                     static_cast<double>(bucket.numel));
    }
  }
  // Counted on Megatron's own layout of the stage, whatever layout this plan re-laid.
  layout::LayoutOptions standard = o.layout;
  standard.dp = o.dims.dp;
  standard.tp = o.dims.tp;
  const layout::Layout megatron =
      count_split ? layout::build_layout(model, stage.params, standard) : layout::Layout{};
  for (const auto& bucket : megatron.buckets) {
    const auto equal = equal_chunk_cuts(bucket.numel, o.dims.dp);
    for (const auto& slot : bucket.slots) {
      const auto cut = std::upper_bound(equal.begin(), equal.end(), slot.offset);
      if (cut != equal.end() && *cut < slot.end()) ++m.split_tensors;
    }
  }
  for (const Task& t : stage.tasks) {
    const RankRange dps = task_dp_ranks(t, o.dims.dp);
    const RankRange tps = task_tp_ranks(t, o.dims.tp);
    const bool all = t.dp_owner == kEveryone;
    for (int h = tps.begin; h < tps.end; ++h)
      for (int d = all ? 0 : dps.begin; d < (all ? 1 : dps.end); ++d) {
        RankLoad& load = all ? everyone[h] : loads.at(d, h);
        load.flops += t.flops;
        load.memory += t.state_bytes;
      }
  }
  for (int d = 0; d < o.dims.dp; ++d)
    for (int t = 0; t < o.dims.tp; ++t) {
      loads.at(d, t).flops += everyone[t].flops;
      loads.at(d, t).memory += everyone[t].memory;
    }
}

// Atomic units of one axis with copies (bounds.h BoundItem), FLOPs and memory side by side.
struct Units {
  std::vector<BoundItem> flops, memory;
  double flops_sum = 0.0, memory_sum = 0.0;
  void add(double f, double mem, std::int64_t count) {
    flops.push_back({f, count});
    memory.push_back({mem, count});
    flops_sum += f * static_cast<double>(count);
    memory_sum += mem * static_cast<double>(count);
  }
};

// max/mean lower bound of `units` plus the divisible rest of the axis's work on `bins` bins whose
// mean load is `mean` (the mean the ratios use); 1 where the axis has no work.
Ratio axis_bound(Units units, RankLoad mean, std::int64_t bins) {
  auto bound = [&](std::vector<BoundItem> items, double units_sum, double axis_mean) {
    if (!(axis_mean > 0.0)) return 1.0;
    const double divisible = std::max(0.0, axis_mean * static_cast<double>(bins) - units_sum);
    return makespan_lower_bound(std::move(items), divisible, bins).value() / axis_mean;
  };
  return {bound(std::move(units.memory), units.memory_sum, mean.memory),
          bound(std::move(units.flops), units.flops_sum, mean.flops)};
}

void raise(Ratio& into, const Ratio& by, double scale = 1.0) {
  into.flops = std::max(into.flops, by.flops * scale);
  into.memory = std::max(into.memory, by.memory * scale);
}

// One stage's lower bounds (metrics.h), folded into m's worst-stage bounds.
// dp_mean, tp_mean, grid_mean: the stage's mean DP-rank, TP-rank and grid-rank loads.
void stage_bounds(const model::ModelSpec& model, const PlanOptions& o, const StagePlan& stage,
                  RankLoad dp_mean, RankLoad tp_mean, RankLoad grid_mean, Metrics& m) {
  Units dp_units, tp_units, grid_units;
  std::vector<RankLoad> param_load(model.params.size());
  std::vector<std::int64_t> param_copies(model.params.size(), 0);
  for (const Task& t : stage.tasks) {
    const std::int64_t dps = task_dp_ranks(t, o.dims.dp).size();
    const std::int64_t tps = task_tp_ranks(t, o.dims.tp).size();
    param_load[t.param].flops += t.flops * static_cast<double>(tps);
    param_load[t.param].memory += t.state_bytes * static_cast<double>(tps);
    param_copies[t.param] = dps;  // every task of a param has the param's DP owner
    tp_units.add(t.flops * static_cast<double>(dps), t.state_bytes * static_cast<double>(dps), tps);
    grid_units.add(t.flops, t.state_bytes, dps * tps);
  }
  for (std::size_t p = 0; p < param_load.size(); ++p)
    if (param_copies[p] > 0)
      dp_units.add(param_load[p].flops, param_load[p].memory, param_copies[p]);
  const Ratio dp = axis_bound(std::move(dp_units), dp_mean, o.dims.dp);
  const Ratio tp = axis_bound(std::move(tp_units), tp_mean, o.dims.tp);
  Ratio grid = axis_bound(std::move(grid_units), grid_mean,
                          static_cast<std::int64_t>(o.dims.dp) * o.dims.tp);
  // grid >= DP and TP max/mean (metrics.h); rounded down like bounds.h's sums, as the grid
  // ratio is summed in another order than the DP and TP ratios.
  constexpr double kCrossSlack = 1.0 - 1e-12;
  raise(grid, dp, kCrossSlack);
  raise(grid, tp, kCrossSlack);
  raise(m.lower_bound_dp, dp);
  raise(m.lower_bound_tp, tp);
  raise(m.lower_bound_grid, grid);
}

}  // namespace

namespace {

enum class BoundsFrom { kCompute, kCopy, kNone };

Metrics metrics_of(const model::ModelSpec& model, const Plan& plan, BoundsFrom from,
                   const Metrics* bounds);

// The expert buffer's metrics and the whole grid's ratio (metrics.h).
void add_expert(const Plan& plan, BoundsFrom from, Metrics& m) {
  const ExpertPlan& e = *plan.expert;
  auto expert = std::make_shared<Metrics>(metrics_of(e.model, e.plan, from, nullptr));
  const PlanOptions& o = plan.options;
  for (std::size_t s = 0; s < m.loads.size(); ++s) {
    MaxMean flops, memory;
    for (int d = 0; d < o.dims.dp; ++d)
      for (int t = 0; t < o.dims.tp; ++t) {
        const ExpertCoord c = o.dims.expert_coord(d, t);
        const RankLoad& dense = m.loads[s].at(d, t);
        const RankLoad& local = expert->loads[s].at(c.edp, c.etp);
        flops.add(dense.flops + local.flops);
        memory.add(dense.memory + local.memory);
      }
    m.whole_grid.flops = std::max(m.whole_grid.flops, flops.ratio());
    m.whole_grid.memory = std::max(m.whole_grid.memory, memory.ratio());
  }
  m.expert = std::move(expert);
}

Metrics metrics_of(const model::ModelSpec& model, const Plan& plan, BoundsFrom from,
                   const Metrics* bounds) {
  const PlanOptions& o = plan.options;
  Metrics m;
  MaxMean grid_flops_all, grid_memory_all;
  for (const StagePlan& stage : plan.stages) {
    LoadGrid& loads = m.loads.emplace_back(o.dims.dp, o.dims.tp);
    stage_loads(model, plan, stage, loads, m, from == BoundsFrom::kCompute);
    MaxMean dp_flops, dp_memory, grid_flops, grid_memory, tp_flops_all, tp_memory_all;
    for (int t = 0; t < o.dims.tp; ++t) {
      RankLoad sum;
      for (int d = 0; d < o.dims.dp; ++d) {
        sum.flops += loads.at(d, t).flops;
        sum.memory += loads.at(d, t).memory;
      }
      tp_flops_all.add(sum.flops);
      tp_memory_all.add(sum.memory);
    }
    m.tp.flops = std::max(m.tp.flops, tp_flops_all.ratio());
    m.tp.memory = std::max(m.tp.memory, tp_memory_all.ratio());
    for (int d = 0; d < o.dims.dp; ++d) {
      MaxMean tp_flops, tp_memory;
      RankLoad sum;
      for (int t = 0; t < o.dims.tp; ++t) {
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

    if (from == BoundsFrom::kCompute)
      stage_bounds(model, o, stage, {dp_flops.mean(), dp_memory.mean()},
                   {tp_flops_all.mean(), tp_memory_all.mean()},
                   {grid_flops.mean(), grid_memory.mean()}, m);
    for (const auto& groups : stage.groups) {
      double sum = 0.0;
      for (const auto& g : groups) sum += g.makespan;
      m.tp_groups += static_cast<int>(groups.size());
      m.group_makespan_sum = std::max(m.group_makespan_sum, sum);
    }
  }
  m.max_rank = {grid_flops_all.max, grid_memory_all.max};
  m.mean_rank = {grid_flops_all.mean(), grid_memory_all.mean()};
  for (double r : m.bucket_shard_ratio)
    m.bucket_comm_imbalance = std::max(m.bucket_comm_imbalance, r);
  if (from == BoundsFrom::kCopy) {
    m.split_tensors = bounds->split_tensors;
    m.lower_bound_dp = bounds->lower_bound_dp;
    m.lower_bound_tp = bounds->lower_bound_tp;
    m.lower_bound_grid = bounds->lower_bound_grid;
  }
  if (plan.expert)
    add_expert(plan, from == BoundsFrom::kNone ? BoundsFrom::kNone : BoundsFrom::kCompute, m);
  return m;
}

}  // namespace

Metrics compute_metrics(const model::ModelSpec& model, const Plan& plan) {
  return metrics_of(model, plan, BoundsFrom::kCompute, nullptr);
}

Metrics compute_metrics(const model::ModelSpec& model, const Plan& plan, const Metrics& bounds) {
  return metrics_of(model, plan, BoundsFrom::kCopy, &bounds);
}

Metrics compute_balance(const model::ModelSpec& model, const Plan& plan) {
  return metrics_of(model, plan, BoundsFrom::kNone, nullptr);
}

}  // namespace canzona::plan
