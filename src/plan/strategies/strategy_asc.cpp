// asc: the paper's Canzona without load balancing. Each bucket cut at the params' start indices
// (every rank's shard starts where a param does), the micro groups round-robin with a fixed
// number of tasks per group (--asc-group-tasks, default one per TP rank).
#include "algorithms/dp.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {
namespace {

std::vector<TpGroup> round_robin_former(const StagePlan&, const std::vector<int>&,
                                        const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                        std::vector<double>&) {
  return round_robin_groups(tp_tasks, o.dims.tp,
                            o.asc_group_tasks > 0 ? o.asc_group_tasks : o.dims.tp);
}

}  // namespace

StagePlan plan_asc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  const int R = o.dims.dp;
  LaidCuts c{stage.layout, {}};
  for (const auto& bucket : stage.layout.buckets) {
    std::vector<std::int64_t> starts;
    for (const auto& slot : bucket.slots) starts.push_back(slot.offset);
    const ItemCuts u = start_index_cuts(starts, bucket.numel, R);
    std::vector<std::int64_t> cuts;
    for (int r = 0; r <= R; ++r)
      cuts.push_back(u[r] < static_cast<int>(starts.size()) ? starts[u[r]] : bucket.numel);
    cuts[0] = 0;
    cuts[R] = bucket.numel;
    c.cuts.push_back(std::move(cuts));
  }
  return stage_with_cuts(model, stage, std::move(c), o, round_robin_former);
}

}  // namespace canzona::plan::detail
