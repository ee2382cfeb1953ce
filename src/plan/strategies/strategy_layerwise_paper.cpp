// layerwise-paper: the paper's description of a layer-wise optimizer. All-Reduce, every param
// whole on one DP owner by LPT on its optimizer cost, the redundant TP gather, and the owners'
// updates All-Gathered (v) over DP.
#include "algorithms/dp.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {

StagePlan plan_layerwise_paper(const model::ModelSpec& model, StagePlan stage,
                               const PlanOptions& o) {
  std::vector<double> task_cost(model.params.size(), 0.0);
  for (const Task& t : stage.tasks) task_cost[t.param] += t.cost;
  std::vector<double> costs(stage.params.size(), 0.0);
  for (std::size_t k = 0; k < stage.params.size(); ++k) {
    const model::ParamSpec& p = model.params[stage.params[k]];
    costs[k] = p.is_matrix() ? task_cost[stage.params[k]] : adam_cost(p.local_numel(o.dims.tp), o);
  }
  const std::vector<int> owners = layerwise_owners(costs, o.dims.dp);
  for (std::size_t k = 0; k < stage.params.size(); ++k) stage.owner[stage.params[k]] = owners[k];
  plan_tp(o, stage, model, no_tp_groups);
  return stage;
}

}  // namespace canzona::plan::detail
