// layerwise: Megatron-LM's layer-wise distributed optimizer. Reduce-Scatter of equal shards,
// every param whole on one DP rank, the shards All-Gathered per bucket. Its buckets are either
// the soft-minimum two-buffer layout it ships (--layerwise-buckets soft-min) or the earlier fixed
// buckets with padded equal shards (fixed). TP-split matrices are duplicated on every TP rank
// (its default) or hosted on one TP rank per weight, one fused group per DP rank (layer-sharded).
#include <algorithm>
#include <numeric>

#include "algorithms/dp.h"
#include "algorithms/tp_summary.h"
#include "canzona/common/checked.h"
#include "strategies/megatron_layerwise.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {
namespace {

// Megatron-LM's layer-wise optimizer: a rank's elements in a bucket stay within 1.3x the mean.
constexpr double kLayerwiseNumelCap = 1.3;

}  // namespace

// layer_wise_optimizer.py: by LPT on max·min² of each param's TP-shard shape under the 1.3x
// numel cap.
std::vector<std::vector<int>> layerwise_ranks(const model::ModelSpec& model,
                                              const layout::Layout& layout, const PlanOptions& o) {
  std::vector<std::vector<double>> costs;
  std::vector<std::vector<std::int64_t>> numel;
  for (const layout::Bucket& bucket : layout.buckets) {
    costs.emplace_back();
    numel.emplace_back();
    for (const layout::Slot& slot : bucket.slots) {
      const auto shape = model.params[slot.param].local_shape(o.dims.tp);
      const double a = static_cast<double>(shape[0]);
      const double b = shape.size() > 1 ? static_cast<double>(shape[1]) : 1.0;
      costs.back().push_back(std::max(a, b) * std::min(a, b) * std::min(a, b));
      numel.back().push_back(slot.numel);
    }
  }
  return layerwise_lpt_ranks(costs, numel, o.dims.dp, kLayerwiseNumelCap);
}

// As it ships (megatron_layerwise.h): the params Muon orthogonalises in a buffer of soft-minimum
// shard-aligned buckets, every other param in the regular distributed optimizer's buffer (fixed
// buckets, equal element shards, #4771). The two buffers' buckets are merged in the order
// backward completes them (a bucket is ready when its last param in backprop order is), the
// order the engine posts them and the simulator times them. Every bucket is dp equal shards, so
// the cuts are equal_chunk_cuts.
layout::Layout upstream_layerwise_layout(const model::ModelSpec& model,
                                         const std::vector<int>& params, const PlanOptions& o) {
  const layout::LayoutOptions options = stage_layout_options(o);
  std::vector<int> others;
  std::vector<megatron_layerwise::Param> managed;
  for (int p : params) {
    const model::ParamSpec& spec = model.params[p];
    if (!spec.is_matrix()) {
      others.push_back(p);
      continue;
    }
    // A tied embedding and its last-stage copy (PP > 1) are element-wise, in the other buffer,
    // and no param is GTP-rematerialised, so both flags keep their defaults here.
    managed.push_back({p, spec.local_numel(o.dims.tp), spec.local_shape(o.dims.tp)});
  }
  const megatron_layerwise::BufferLayout lw = megatron_layerwise::layerwise_buffer(
      managed, layout::effective_bucket_size(options), o.dims.dp);
  const layout::Layout distopt = layout::build_layout(model, others, options);

  std::vector<int> backprop(model.params.size(), -1);  // position in the backward walk
  for (std::size_t k = 0; k < params.size(); ++k)
    backprop[params[params.size() - 1 - k]] = static_cast<int>(k);
  struct Entry {
    int done;  // backprop position of the bucket's last-ready param
    const layout::Bucket* bucket;
  };
  std::vector<Entry> entries;
  for (const layout::Layout* buffer : {&lw.layout, &distopt})
    for (const layout::Bucket& bucket : buffer->buckets) {
      int done = -1;
      for (const layout::Slot& slot : bucket.slots) done = std::max(done, backprop[slot.param]);
      entries.push_back({done, &bucket});
    }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.done < b.done; });
  layout::Layout out;
  for (const Entry& e : entries) {
    layout::Bucket& bucket = out.buckets.emplace_back(*e.bucket);
    bucket.offset = out.numel;
    out.numel = checked_add(out.numel, bucket.numel, "layout: buffer size");
  }
  return out;
}

// Layer-sharded: every hosted weight of this DP rank in one fused All-to-All, homes by LPT.
std::vector<TpGroup> layerwise_groups(const StagePlan&, const std::vector<int>&,
                                      const std::vector<TpTask>& tp_tasks, const PlanOptions& o,
                                      std::vector<double>&) {
  std::vector<int> all(tp_tasks.size());
  std::iota(all.begin(), all.end(), 0);
  TpGroup g;
  g.tasks = all;
  g.hosts = lpt_hosts(tp_tasks, all, std::vector<double>(o.dims.tp, 0.0));
  Summariser(o.dims.tp)(tp_tasks, g);
  return {std::move(g)};
}

StagePlan plan_layerwise(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  if (o.layerwise_buckets == LayerwiseBuckets::kSoftMinimum) {
    stage.layout = upstream_layerwise_layout(model, stage.params, o);
  } else {
    // The fixed-bucket variant (before #5415, params not routed by optimizer): Megatron's layout,
    // per-bucket LPT on max·min² of the TP-shard shape under a 1.3x numel cap, laid out in padded
    // equal shards.
    std::vector<std::vector<int>> order;
    for (const layout::Bucket& bucket : stage.layout.buckets) {
      order.emplace_back(bucket.slots.size());
      std::iota(order.back().begin(), order.back().end(), 0);
    }
    const auto ranks = layerwise_ranks(model, stage.layout, o);
    stage.layout = layout::padded_shards(stage.layout, order, ranks, stage_layout_options(o));
  }
  for (const layout::Bucket& bucket : stage.layout.buckets)
    stage.cuts.push_back(equal_chunk_cuts(bucket.numel, o.dims.dp));
  owners_from_cuts(stage.layout, stage.cuts, model, stage.owner);
  plan_tp(o, stage, model, layerwise_groups);
  return stage;
}

}  // namespace canzona::plan::detail
