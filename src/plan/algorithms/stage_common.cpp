// What the strategies' stage planners share (stage_common.h).
#include "algorithms/stage_common.h"

#include <algorithm>
#include <cmath>

#include "algorithms/stage_groups.h"
#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/plan/rank_plan.h"

namespace canzona::plan::detail {

// cmax_mb is validated finite and in [2^-20, kMaxCmaxMb], so the product is at most 2^50 and the
// conversion exact enough and in range.
std::int64_t capacity_bytes(const PlanOptions& o) {
  const double bytes = o.cmax_mb * kMiB;
  CANZONA_CHECK(std::isfinite(bytes) && bytes >= 1.0 && bytes <= 0x1p62);
  return static_cast<std::int64_t>(bytes);
}

bool tp_hosted(const model::ParamSpec& p, const PlanOptions& o) {
  return o.dims.tp > 1 && p.tp_split_dim >= 0 &&
         strategy_parts(o.strategy, o.layerwise_tp).tp_exchange == TpExchange::kMicroGroups;
}

layout::LayoutOptions stage_layout_options(const PlanOptions& o) {
  layout::LayoutOptions options = o.layout;
  options.dp = o.dims.dp;
  options.tp = o.dims.tp;
  return options;
}

double adam_cost(std::int64_t numel, const PlanOptions& o) {
  return cost::task_cost(cost::kElementwiseOptimizer, numel, 1, o.cost);
}

void owners_from_cuts(const layout::Layout& layout,
                      const std::vector<std::vector<std::int64_t>>& cuts,
                      const model::ModelSpec& model, std::vector<int>& owner) {
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const auto& c = cuts[b];
    for (const layout::Slot& slot : layout.buckets[b].slots) {
      const int r =
          static_cast<int>(std::upper_bound(c.begin(), c.end(), slot.offset) - c.begin()) - 1;
      const bool straddles = slot.end() > c[r + 1];
      CANZONA_CHECK(!straddles || !model.params[slot.param].is_matrix(), "matrix param '",
                    model.params[slot.param].name, "' split by a DP cut");
      owner[slot.param] = straddles ? kDivided : r;
    }
  }
}

std::vector<std::int64_t> item_to_element_cuts(const layout::Bucket& bucket, const ItemCuts& u,
                                               int ranks) {
  std::vector<std::int64_t> c;
  for (int r = 0; r <= ranks; ++r)
    c.push_back(u[r] < static_cast<int>(bucket.slots.size()) ? bucket.slots[u[r]].offset
                                                             : bucket.numel);
  c[0] = 0;
  return c;
}

StageItems canzona_items(const model::ModelSpec& model, const layout::Layout& layout,
                         const std::vector<Task>& tasks, const PlanOptions& o) {
  std::vector<double> matrix_cost(model.params.size(), 0.0);
  std::vector<double> matrix_memory(model.params.size(), 0.0);
  std::vector<std::vector<double>> task_costs(model.params.size());
  for (const Task& t : tasks) {
    matrix_cost[t.param] += t.cost;
    matrix_memory[t.param] += t.state_bytes;
    task_costs[t.param].push_back(t.cost);
  }
  StageItems s;
  for (const auto& bucket : layout.buckets) {
    s.items.emplace_back();
    s.starts.emplace_back();
    s.numel.push_back(bucket.numel);
    for (const auto& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      DpItem item;
      item.numel = slot.numel;
      const int copies = p.tp_split_dim >= 0 ? 1 : o.dims.tp;  // replicated: every TP rank computes
      if (p.is_matrix()) {
        item.time = matrix_cost[slot.param] * copies;
        item.memory = matrix_memory[slot.param] * copies;
        if (tp_hosted(p, o)) item.tasks = task_costs[slot.param];
      } else {
        item.divisible = true;
        item.time = adam_cost(slot.numel, o) * o.dims.tp;
        item.memory =
            cost::state_bytes(cost::kElementwiseOptimizer, slot.numel, 1, o.cost) * o.dims.tp;
      }
      s.items.back().push_back(item);
      s.starts.back().push_back(slot.offset);
    }
  }
  return s;
}

LaidCuts laid_cuts(const layout::Layout& layout, const StageItems& s, const FreeOrder& f,
                   const PlanOptions& o) {
  LaidCuts c;
  c.layout = layout::reorder_buckets(layout, f.order, stage_layout_options(o));
  StageItems laid;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = c.layout.buckets[b];
    laid.items.emplace_back();
    laid.starts.emplace_back();
    laid.numel.push_back(bucket.numel);
    for (std::size_t k = 0; k < bucket.slots.size(); ++k) {
      laid.items.back().push_back(s.items[b][f.order[b][k]]);
      laid.starts.back().push_back(bucket.slots[k].offset);
    }
  }
  for (auto& bucket : cuts_for_owners(laid.items, f.owner, laid.starts, laid.numel, o.dims.dp))
    c.cuts.push_back(std::move(bucket.element_cuts));
  return c;
}

std::vector<TpGroup> no_tp_groups(const StagePlan&, const std::vector<int>&,
                                  const std::vector<TpTask>&, const PlanOptions& o,
                                  std::vector<double>&) {
  CANZONA_CHECK(false, to_string(o.strategy), " hosts no task on one TP rank");
  return {};
}

void plan_tp(const PlanOptions& o, StagePlan& stage, const model::ModelSpec& model,
             GroupFormer form) {
  for (Task& t : stage.tasks) t.dp_owner = stage.owner[t.param];
  stage.groups.assign(o.dims.dp, {});
  std::vector<double> tp_load(o.dims.tp, 0.0);
  std::vector<std::vector<int>> hosted_by_dp(o.dims.dp);  // TP-hosted task indices per DP owner
  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    const Task& t = stage.tasks[k];
    if (t.dp_owner >= 0 && tp_hosted(model.params[t.param], o))
      hosted_by_dp[t.dp_owner].push_back(static_cast<int>(k));
  }
  for (int d = 0; d < o.dims.dp; ++d) {
    const std::vector<int>& ids = hosted_by_dp[d];
    if (ids.empty()) continue;
    std::vector<TpTask> tp_tasks;
    for (int k : ids) tp_tasks.push_back({stage.tasks[k].cost, stage.tasks[k].gather_bytes});
    const std::vector<TpGroup> groups = form(stage, ids, tp_tasks, o, tp_load);
    assign_groups(stage, d, ids, groups);
  }
}

StagePlan stage_with_cuts(const model::ModelSpec& model, const StagePlan& stage, LaidCuts c,
                          const PlanOptions& o, GroupFormer form) {
  StagePlan trial = stage;
  trial.layout = std::move(c.layout);
  trial.cuts = std::move(c.cuts);
  owners_from_cuts(trial.layout, trial.cuts, model, trial.owner);
  plan_tp(o, trial, model, form);
  return trial;
}

}  // namespace canzona::plan::detail
