// lb-asc as the paper describes it (--planner paper): Algorithm 1's alpha-balanced DP cuts on
// W(p) of each param's TP-local shape, params atomic; micro groups by the paper's rollback rule
// under C_max.
#include "algorithms/dp.h"
#include "canzona/cost/cost.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {
namespace {

std::vector<LaidCuts> paper_dp_cuts(const model::ModelSpec& model, const layout::Layout& layout,
                                    const std::vector<Task>&, const PlanOptions& o) {
  std::vector<std::vector<double>> costs;
  for (const auto& bucket : layout.buckets) {
    costs.emplace_back();
    for (const auto& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      const auto local = p.local_shape(o.dims.tp);
      const std::int64_t local_rows = local[0];
      const std::int64_t local_cols = local.size() > 1 ? local[1] : 1;
      costs.back().push_back(
          p.is_matrix() ? cost::task_cost(o.cost.matrix_optimizer, local_rows, local_cols, o.cost)
                        : adam_cost(slot.numel, o));
    }
  }
  const auto item_cuts = alpha_balanced_cuts(costs, o.dims.dp, o.alpha);
  LaidCuts c{layout, {}};
  for (std::size_t b = 0; b < layout.buckets.size(); ++b)
    c.cuts.push_back(item_to_element_cuts(layout.buckets[b], item_cuts[b], o.dims.dp));
  return {std::move(c)};
}

std::vector<TpGroup> paper_tp_groups(const StagePlan&, const std::vector<int>&,
                                     const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                     std::vector<double>&) {
  return rollback_groups(tp_tasks, o.dims.tp, capacity_bytes(o));
}

}  // namespace

const VariantPlanner kPaperVariant{paper_dp_cuts, paper_tp_groups};

}  // namespace canzona::plan::detail
