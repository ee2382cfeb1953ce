// StrategyRunner setup: buffers, the work lists of this rank (which tasks and slices it updates)
// from the plan, synthetic init and the main params of computed tasks.
#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/runtime/reference.h"
#include "canzona/runtime/synthetic.h"
#include "runner_impl.h"

namespace canzona::runtime {

using plan::kAllTp;
using plan::kEveryone;

void StrategyRunner::Impl::build_places() {
  place.assign(model.params.size(), ParamPlace{});
  const layout::Layout& layout = stage.layout;
  forward_flops.assign(layout.buckets.size(), 0.0);
  backward_flops.assign(layout.buckets.size(), 0.0);
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = layout.buckets[b];
    std::int64_t numel = 0;
    for (const layout::Slot& slot : bucket.slots) {
      place[slot.param] = {static_cast<int>(b), bucket.offset + slot.offset, slot.offset,
                           slot.numel};
      numel += slot.numel;
    }
    // 6 N T split 2 : 4 between forward and backward, N = this rank's params of the bucket.
    const double flops =
        options.compute_scale * static_cast<double>(options.tokens) * static_cast<double>(numel);
    forward_flops[b] = 2.0 * flops;
    backward_flops[b] = 4.0 * flops;
  }
  params.assign(static_cast<std::size_t>(layout.numel), 0.0f);
  grads.assign(static_cast<std::size_t>(layout.numel), 0.0f);
  grad_sync.resize(layout.buckets.size());
  param_sync.resize(layout.buckets.size());
}

void StrategyRunner::Impl::build_dp_collectives() {
  if (!reduce_scatter) return;
  const auto& buckets = stage.layout.buckets;
  counts.assign(buckets.size(), {});
  displs.assign(buckets.size(), {});
  shard_offset.assign(buckets.size(), 0);
  std::int64_t total = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const std::vector<std::int64_t>& cuts = stage.cuts[b];
    for (int r = 0; r < dp; ++r) {
      counts[b].push_back(cuts[r + 1] - cuts[r]);
      displs[b].push_back(cuts[r]);
    }
    shard_offset[b] = total;
    total += counts[b][dp_rank];
  }
  shard.assign(static_cast<std::size_t>(total), 0.0f);
}

const float* StrategyRunner::Impl::reduced_grad(int param, std::int64_t slot_element) const {
  const ParamPlace& at = place[param];
  if (!reduce_scatter) return grads.data() + at.offset + slot_element;
  const std::vector<std::int64_t>& cuts = stage.cuts[at.bucket];
  const std::int64_t element = at.slot_offset + slot_element;
  CANZONA_CHECK(element >= cuts[dp_rank] && element < cuts[dp_rank + 1], "param ",
                model.params[param].name, " element ", slot_element, " outside DP shard ", dp_rank);
  return shard.data() + shard_offset[at.bucket] + (element - cuts[dp_rank]);
}

void StrategyRunner::Impl::build_tasks() {
  computed_of_task.assign(stage.tasks.size(), -1);
  std::size_t largest = 0;
  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    const plan::Task& task = stage.tasks[k];
    const bool my_dp = task.dp_owner == kEveryone || task.dp_owner == dp_rank;
    const bool my_tp = task.host == kAllTp || task.host == tp_rank;
    if (!my_dp || !my_tp) continue;
    const model::ParamSpec& spec = model.params[task.param];
    ComputedTask t;
    t.task = static_cast<int>(k);
    t.param = task.param;
    if (task.host >= 0)
      t.source = TaskSource::kHosted;
    else if (tp == 1 || spec.tp_split_dim < 0)
      t.source = TaskSource::kLocal;
    else
      t.source = TaskSource::kTpGather;
    if (t.source == TaskSource::kLocal) {
      t.maps.push_back(shard_map(spec, task.piece, tp, tp_rank));
    } else {
      for (int q = 0; q < tp; ++q) t.maps.push_back(shard_map(spec, task.piece, tp, q));
    }
    t.optimizer = make_matrix_optimizer(options, spec, task.piece);
    const optim::ParamInfo& info = t.optimizer->param();
    t.main.assign(static_cast<std::size_t>(info.numel()), 0.0f);
    largest = std::max(largest, t.main.size());
    computed_of_task[k] = static_cast<int>(computed.size());
    computed.push_back(std::move(t));
  }
  scratch.assign(largest, 0.0f);
}

void StrategyRunner::Impl::build_elementwise() {
  for (int p : stage.params) {
    const model::ParamSpec& spec = model.params[p];
    if (spec.is_matrix()) continue;
    const ParamPlace& at = place[p];
    std::int64_t begin = 0;  // local elements of the param this rank updates: [begin, end)
    std::int64_t end = 0;
    if (reduce_scatter) {
      const std::vector<std::int64_t>& cuts = stage.cuts[at.bucket];
      begin = std::max(at.slot_offset, cuts[dp_rank]) - at.slot_offset;
      end = std::min(at.slot_offset + at.numel, cuts[dp_rank + 1]) - at.slot_offset;
    } else if (stage.owner[p] == kEveryone || stage.owner[p] == dp_rank) {
      end = at.numel;
    }
    if (begin >= end) continue;
    ElementwiseSlice slice;
    slice.param = local_param(p) + begin;
    slice.grad = reduced_grad(p, begin);
    slice.numel = end - begin;
    slice.optimizer = make_elementwise_optimizer(options, spec, begin, slice.numel);
    elementwise.push_back(std::move(slice));
  }
}

void StrategyRunner::Impl::build_layerwise_sync() {
  if (strategy != plan::Strategy::kLayerwise) return;
  ParamAllGather& s = layerwise_sync;
  s.params.assign(dp, {});
  s.counts.assign(dp, 0);
  s.displs.assign(dp, 0);
  for (int p : stage.params) {
    const int owner = stage.owner[p];
    CANZONA_CHECK(owner >= 0 && owner < dp, "layerwise owner ", owner, " of ",
                  model.params[p].name);
    s.params[owner].push_back(p);
    s.counts[owner] += place[p].numel;
  }
  std::int64_t total = 0;
  for (int r = 0; r < dp; ++r) {
    s.displs[r] = total;
    total += s.counts[r];
  }
  s.buffer.assign(static_cast<std::size_t>(total), 0.0f);
}

void StrategyRunner::Impl::init_params() {
  for (int p : stage.params)
    fill_init(model.params[p], p, tp, tp_rank, options.seed,
              std::span<float>(local_param(p), static_cast<std::size_t>(place[p].numel)));
}

void StrategyRunner::Impl::init_main_params() {
  Pending gathered;
  if (tp_gather.block > 0) gathered = post_tp_gather(/*use_params=*/true);
  for (GroupExchange& g : groups) {
    pack_group(g, /*use_params=*/true);
    post_gather(g);
    g.gather.name = str("group ", g.index, " gather (params, setup)");
  }
  double ignored = 0.0;
  wait(gathered, ignored);
  for (ComputedTask& t : computed) {
    if (t.source == TaskSource::kLocal)
      local_to_task(t.maps[0], local_param(t.param), t.main.data());
    if (t.source == TaskSource::kTpGather) gathered_to_task(t, t.main.data());
  }
  for (GroupExchange& g : groups) {
    wait(g.gather, ignored);
    for (const GroupHosted& h : g.hosted) hosted_to_task(g, h, computed[h.computed].main.data());
  }
}

}  // namespace canzona::runtime
