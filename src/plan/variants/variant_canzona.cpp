// lb-asc as this project plans it (--planner canzona, the default): DP candidates from our
// balanced cuts, the peers' placements and, with free bucket order, re-laid buckets; the
// never-behind selection (never_behind.h) keeps one. Micro groups by our balanced former under
// C_max, their hosts relabelled so the TP axis is balanced too.
#include <algorithm>

#include "algorithms/dp.h"
#include "algorithms/stage_groups.h"
#include "canzona/common/error.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {
namespace {

// Different placements often cut alike; each distinct plan is judged once.
bool same_candidate(const LaidCuts& a, const LaidCuts& b) {
  if (a.cuts != b.cuts) return false;
  for (std::size_t k = 0; k < a.layout.buckets.size(); ++k) {
    const auto& x = a.layout.buckets[k].slots;
    const auto& y = b.layout.buckets[k].slots;
    if (x.size() != y.size()) return false;  // candidates may bucket differently
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].param != y[i].param || x[i].offset != y[i].offset) return false;
  }
  return true;
}

// Megatron-LM's layer-wise buckets and owners as it ships: its Muon buckets laid out by owner
// without the shard padding, its distributed-optimizer buckets with their equal element shards
// (our water-fill of them can hold more state on one rank); our TP planner then runs on it.
LaidCuts upstream_layerwise_candidate(const model::ModelSpec& model, const layout::Layout& layout,
                                      const std::vector<Task>& tasks, const PlanOptions& o) {
  const int R = o.dims.dp;
  std::vector<int> params;
  for (const layout::Bucket& bucket : layout.buckets)
    for (const layout::Slot& slot : bucket.slots) params.push_back(slot.param);
  std::sort(params.begin(), params.end());
  const layout::Layout upstream = upstream_layerwise_layout(model, params, o);
  std::vector<std::vector<int>> owner;
  std::vector<char> managed;
  for (const layout::Bucket& bucket : upstream.buckets) {
    const std::int64_t shard = bucket.numel / R;
    owner.emplace_back();
    managed.push_back(model.params[bucket.slots.at(0).param].is_matrix());
    for (const layout::Slot& slot : bucket.slots)
      owner.back().push_back(managed.back() ? static_cast<int>(slot.offset / shard) : -1);
  }
  const StageItems u = canzona_items(model, upstream, tasks, o);
  LaidCuts c = laid_cuts(upstream, u, free_order_for_owners(u.items, R, owner), o);
  for (std::size_t b = 0; b < managed.size(); ++b)
    if (!managed[b]) c.cuts[b] = equal_chunk_cuts(c.layout.buckets[b].numel, R);
  return c;
}

std::vector<LaidCuts> canzona_dp_cuts(const model::ModelSpec& model, const layout::Layout& layout,
                                      const std::vector<Task>& tasks, const PlanOptions& o) {
  const int R = o.dims.dp;
  const StageItems s = canzona_items(model, layout, tasks, o);
  std::vector<LaidCuts> candidates;
  for (auto& candidate : balanced_cut_candidates(s.items, s.starts, s.numel, R, o.dims.tp)) {
    LaidCuts c{layout, {}};
    for (auto& bucket : candidate) c.cuts.push_back(std::move(bucket.element_cuts));
    candidates.push_back(std::move(c));
  }
  // The peers' DP placements are candidates of ours too, so ours never loses to them for want of
  // trying one: the authors' cuts in Megatron's order and, in free order, Megatron's layer-wise
  // owners laid out by owner (variable shards, nothing padded).
  for (LaidCuts& c : kMegatronCanzonaVariant.dp_cut_candidates(model, layout, tasks, o))
    candidates.push_back(std::move(c));
  if (o.reorder_buckets) {
    for (const FreeOrder& f : free_order_candidates(s.items, R, o.dims.tp))
      candidates.push_back(laid_cuts(layout, s, f, o));
    const FreeOrder lw = free_order_for_owners(s.items, R, layerwise_ranks(model, layout, o));
    candidates.push_back(laid_cuts(layout, s, lw, o));
    // A layout that does not fit int64 has no candidate.
    try {
      candidates.push_back(upstream_layerwise_candidate(model, layout, tasks, o));
    } catch (const SizeOverflow&) {
    }
  }
  std::vector<LaidCuts> distinct;
  for (LaidCuts& c : candidates)
    if (std::none_of(distinct.begin(), distinct.end(),
                     [&](const LaidCuts& d) { return same_candidate(d, c); }))
      distinct.push_back(std::move(c));
  return distinct;
}

std::vector<TpGroup> canzona_tp_groups(const StagePlan&, const std::vector<int>&,
                                       const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                       std::vector<double>& tp_load) {
  std::vector<TpGroup> groups = balanced_groups(tp_tasks, o.dims.tp, capacity_bytes(o));
  const std::vector<double> load = relabel_hosts(groups, tp_tasks, tp_load);
  for (int h = 0; h < o.dims.tp; ++h) tp_load[h] += load[h];
  return groups;
}

}  // namespace

const VariantPlanner kCanzonaVariant{canzona_dp_cuts, canzona_tp_groups};

}  // namespace canzona::plan::detail
