#include "canzona/layout/layout.h"

#include <algorithm>
#include <numeric>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"

namespace canzona::layout {
namespace {

// value rounded up to a multiple of `multiple` (> 0); throws UsageError naming `what` on overflow.
std::int64_t round_up(std::int64_t value, std::int64_t multiple, const char* what) {
  return checked_mul(checked_add(value, multiple - 1, what) / multiple, multiple, what);
}

// Bucket ends are padded to a multiple of this (Megatron: lcm(DP, 128)).
std::int64_t bucket_end_alignment(const LayoutOptions& options) {
  return options.pad_bucket_end ? std::lcm<std::int64_t>(options.dp, 128) : 1;
}

}  // namespace

std::int64_t effective_bucket_size(const LayoutOptions& options) {
  if (options.bucket_size > 0) return options.bucket_size;
  return std::max<std::int64_t>(40'000'000, 1'000'000 * static_cast<std::int64_t>(options.dp));
}

std::int64_t layer_bucket_size(const model::ModelSpec& model, const std::vector<int>& params,
                               int tp) {
  std::vector<std::int64_t> per_layer;
  for (int p : params) {
    const model::ParamSpec& param = model.params.at(static_cast<std::size_t>(p));
    if (param.layer < 0) continue;
    if (per_layer.size() <= static_cast<std::size_t>(param.layer))
      per_layer.resize(static_cast<std::size_t>(param.layer) + 1, 0);
    per_layer[static_cast<std::size_t>(param.layer)] += param.local_numel(tp);
  }
  std::int64_t most = 1;
  for (std::int64_t n : per_layer) most = std::max(most, n);
  return most;
}

Layout build_layout(const model::ModelSpec& model, const std::vector<int>& params,
                    const LayoutOptions& options) {
  CANZONA_REQUIRE(options.dp > 0, "dp must be positive (got ", options.dp, ")");
  CANZONA_REQUIRE(options.tp > 0, "tp must be positive (got ", options.tp, ")");
  CANZONA_REQUIRE(options.bucket_size >= 0, "bucket size must be >= 0, 0 = Megatron default (got ",
                  options.bucket_size, ")");
  require_in_range(options.bucket_size, 0, kMaxBucketSize, "bucket size", "kMaxBucketSize");
  CANZONA_REQUIRE(options.param_align > 0, "param alignment must be positive (got ",
                  options.param_align, ")");
  require_in_range(options.param_align, 1, kMaxParamAlign, "param alignment", "kMaxParamAlign");
  const std::int64_t bucket_size =
      options.zero_stage == ZeroStage::kThree && options.bucket_size == 0
          ? layer_bucket_size(model, params, options.tp)
          : effective_bucket_size(options);
  const std::int64_t end_align = bucket_end_alignment(options);

  Layout layout;
  Bucket current;
  current.offset = 0;
  std::int64_t cursor = 0;  // next free element relative to the current bucket start
  auto close_bucket = [&] {
    current.numel = round_up(cursor, end_align, "layout: bucket end padding");
    layout.numel = checked_add(current.offset, current.numel, "layout: buffer size");
    layout.buckets.push_back(std::move(current));
    current = Bucket{};
    current.offset = layout.numel;
    cursor = 0;
  };
  // Megatron bucket rule: reverse registration order; a bucket closes right after the param
  // whose end makes it reach bucket_size.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const model::ParamSpec& param = model.params.at(static_cast<std::size_t>(*it));
    Slot slot;
    slot.param = *it;
    slot.offset = round_up(cursor, options.param_align, "layout: param offset");
    slot.numel = param.local_numel(options.tp);
    cursor = checked_add(slot.offset, slot.numel, "layout: bucket size");
    current.slots.push_back(slot);
    if (cursor >= bucket_size) close_bucket();
  }
  if (!current.slots.empty()) close_bucket();
  return layout;
}

namespace {

void check_order(const Layout& layout, const std::vector<std::vector<int>>& order) {
  CANZONA_CHECK(order.size() == layout.buckets.size(), "an order for every bucket");
  for (std::size_t b = 0; b < order.size(); ++b) {
    std::vector<char> seen(layout.buckets[b].slots.size(), 0);
    CANZONA_CHECK(order[b].size() == seen.size(), "bucket ", b, ": order is not a permutation");
    for (int k : order[b]) {
      CANZONA_CHECK(k >= 0 && k < static_cast<int>(seen.size()) && !seen[k], "bucket ", b,
                    ": order is not a permutation");
      seen[k] = 1;
    }
  }
}

// Places the buckets one after another once each bucket's slots have offsets and a size.
void chain_buckets(Layout& layout) {
  layout.numel = 0;
  for (Bucket& bucket : layout.buckets) {
    bucket.offset = layout.numel;
    layout.numel = checked_add(layout.numel, bucket.numel, "layout: buffer size");
  }
}

}  // namespace

Layout reorder_buckets(const Layout& layout, const std::vector<std::vector<int>>& order,
                       const LayoutOptions& options) {
  check_order(layout, order);
  const std::int64_t end_align = bucket_end_alignment(options);
  Layout out;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    Bucket& bucket = out.buckets.emplace_back();
    std::int64_t cursor = 0;
    for (int k : order[b]) {
      Slot slot = layout.buckets[b].slots[k];
      slot.offset = round_up(cursor, options.param_align, "layout: param offset");
      cursor = checked_add(slot.offset, slot.numel, "layout: bucket size");
      bucket.slots.push_back(slot);
    }
    bucket.numel = round_up(cursor, end_align, "layout: bucket end padding");
  }
  chain_buckets(out);
  return out;
}

Layout padded_shards(const Layout& layout, const std::vector<std::vector<int>>& order,
                     const std::vector<std::vector<int>>& region, const LayoutOptions& options) {
  check_order(layout, order);
  CANZONA_CHECK(region.size() == layout.buckets.size(), "a region for every bucket");
  const int dp = options.dp;
  const std::int64_t shard_align = std::lcm<std::int64_t>(options.param_align, 128);
  Layout out;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const Bucket& in = layout.buckets[b];
    CANZONA_CHECK(region[b].size() == in.slots.size(), "bucket ", b, ": a region for every slot");
    // Extent of each region, packed from its own start.
    std::vector<std::int64_t> used(dp, 0);
    std::vector<std::int64_t> local(in.slots.size(), 0);
    for (int k : order[b]) {
      const int r = region[b][k];
      CANZONA_CHECK(r >= 0 && r < dp, "bucket ", b, ": region ", r, " outside [0, ", dp, ")");
      local[k] = round_up(used[r], options.param_align, "layout: param offset");
      used[r] = checked_add(local[k], in.slots[k].numel, "layout: shard size");
    }
    std::int64_t shard = 0;
    for (std::int64_t u : used) shard = std::max(shard, u);
    shard = round_up(shard, shard_align, "layout: shard padding");
    Bucket& bucket = out.buckets.emplace_back();
    bucket.numel = checked_mul(shard, std::int64_t{dp}, "layout: padded bucket size");
    for (int k : order[b]) {
      Slot slot = in.slots[k];
      slot.offset = checked_add(checked_mul(shard, std::int64_t{region[b][k]}, "layout: shard"),
                                local[k], "layout: param offset");
      bucket.slots.push_back(slot);
    }
    std::stable_sort(bucket.slots.begin(), bucket.slots.end(),
                     [](const Slot& x, const Slot& y) { return x.offset < y.offset; });
  }
  chain_buckets(out);
  return out;
}

}  // namespace canzona::layout
