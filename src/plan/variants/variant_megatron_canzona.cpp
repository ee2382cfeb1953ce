// lb-asc as the authors' Megatron-Canzona code plans it (--planner megatron-canzona;
// megatron_canzona.h): numel-balanced greedy DP cuts per buffer, the start-index cuts kept unless
// strictly worse; TP groups by LPT under 400 Mi TP-shard elements per host ("global" mode).
#include "strategies/strategies.h"
#include "variants/megatron_canzona.h"

namespace canzona::plan::detail {
namespace {

std::vector<LaidCuts> authors_dp_cuts(const model::ModelSpec&, const layout::Layout& layout,
                                      const std::vector<Task>&, const PlanOptions& o) {
  std::vector<std::vector<std::int64_t>> numel, starts;
  std::vector<std::int64_t> bucket_numel;
  for (const auto& bucket : layout.buckets) {
    numel.emplace_back();
    starts.emplace_back();
    bucket_numel.push_back(bucket.numel);
    for (const auto& slot : bucket.slots) {
      numel.back().push_back(slot.numel);
      starts.back().push_back(slot.offset);
    }
  }
  const auto result =
      megatron_canzona::dp_item_cuts(numel, starts, bucket_numel, o.dims.dp, o.alpha);
  LaidCuts c{layout, {}};
  for (std::size_t b = 0; b < layout.buckets.size(); ++b)
    c.cuts.push_back(item_to_element_cuts(layout.buckets[b], result.cuts[b], o.dims.dp));
  return {std::move(c)};
}

std::vector<TpGroup> authors_tp_groups(const StagePlan& stage, const std::vector<int>& ids,
                                       const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                       std::vector<double>&) {
  std::vector<std::int64_t> shard_elements;
  for (int k : ids) shard_elements.push_back(stage.tasks[k].rows * stage.tasks[k].cols / o.dims.tp);
  return megatron_canzona::tp_groups(tp_tasks, shard_elements, o.dims.tp);
}

}  // namespace

const VariantPlanner kMegatronCanzonaVariant{authors_dp_cuts, authors_tp_groups};

}  // namespace canzona::plan::detail
