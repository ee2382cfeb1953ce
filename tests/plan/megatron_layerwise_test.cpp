// Megatron-LM's layer-wise layout (src/plan/strategies/megatron_layerwise.h) against hand
// derivations of upstream's rules (layer_wise_optimizer.py at d98e8a64dd), and the layerwise
// strategy's plan.
#include "strategies/megatron_layerwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "algorithms/dp.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {
namespace {

using megatron_layerwise::BufferLayout;
using megatron_layerwise::layerwise_buffer;
using megatron_layerwise::ns_compute_cost;
using megatron_layerwise::Param;
using megatron_layerwise::shard_divisor;

Param matrix(int id, std::int64_t rows, std::int64_t cols) {
  return Param{id, rows * cols, {rows, cols}};
}

// (param, offset) of every slot of bucket b, and the shard of each.
std::vector<std::pair<int, std::int64_t>> slots(const BufferLayout& l, int b) {
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& s : l.layout.buckets[b].slots) out.emplace_back(s.param, s.offset);
  return out;
}

TEST(MegatronLayerwise, ShardDivisorIsLcmOf64AndTheBucketEndDivisorOverDp) {
  // lcm(64, lcm(dp, 128) / dp), by hand.
  EXPECT_EQ(shard_divisor(1, false), 128);   // lcm(64, 128)
  EXPECT_EQ(shard_divisor(2, false), 64);    // lcm(64, 64)
  EXPECT_EQ(shard_divisor(3, false), 128);   // lcm(64, 384 / 3 = 128)
  EXPECT_EQ(shard_divisor(32, false), 64);   // lcm(64, 4)
  EXPECT_EQ(shard_divisor(256, false), 64);  // lcm(64, 1)
  EXPECT_EQ(shard_divisor(8, true), 8192);   // lcm(64, 65536 / 8)
}

TEST(MegatronLayerwise, CostIsMaxTimesMinSquaredOnTheRematerialisedShape) {
  EXPECT_EQ(ns_compute_cost(matrix(0, 3, 5)), 5.0 * 3 * 3);
  Param remat = matrix(0, 3, 5);
  remat.remat_size = 2;  // full shape 6 x 5
  EXPECT_EQ(ns_compute_cost(remat), 6.0 * 5 * 5);
  EXPECT_EQ(ns_compute_cost(Param{0, 7, {7}}), 7.0);  // not 2-D: its element count
}

// Backprop walk A(32x32) B(16x32) C(16x16) D(8x8) E(8x16) F(8x8) G(8x8), dp 2, bucket_size 100
// (a fixed bucket would close after every param). Soft minimum max(100, int(2 x 1024 x 0.9)) =
// 1843: A..D make 1856; E (128) fits the estimate's slack (shard loads 1024 / 832, target 1024)
// and F (64) fills it to 1024 / 1024; G would grow the bucket, so it opens the next one.
// Emitting A..F (cap 2048 / 2 x 1.3 = 1331.2; cost order A B C E D F): A -> 0; B would make shard
// 0 1536, so 1; C, E, D, F to shard 1, whose compute load stays lowest. S = 1024. G's bucket: the
// cap (41.6) admits no shard, so G goes to the shard with the fewest elements in the bucket (0,
// lowest index) although shard 1 has the lower compute load (14336 < 32768).
TEST(MegatronLayerwise, SoftMinimumAbsorbsParamsIntoShardPadding) {
  enum { G, F, E, D, C, B, A };  // model order is the reverse of the walk
  const std::vector<Param> params = {matrix(G, 8, 8),  matrix(F, 8, 8),   matrix(E, 8, 16),
                                     matrix(D, 8, 8),  matrix(C, 16, 16), matrix(B, 16, 32),
                                     matrix(A, 32, 32)};
  const BufferLayout l = layerwise_buffer(params, 100, 2);
  ASSERT_EQ(l.layout.buckets.size(), 2u);
  EXPECT_EQ(l.layout.buckets[0].numel, 2048);
  EXPECT_EQ(slots(l, 0), (std::vector<std::pair<int, std::int64_t>>{
                             {A, 0}, {B, 1024}, {C, 1536}, {E, 1792}, {D, 1920}, {F, 1984}}));
  EXPECT_EQ(l.shard[0], (std::vector<int>{0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(l.layout.buckets[1].offset, 2048);
  EXPECT_EQ(l.layout.buckets[1].numel, 128);  // S = 64 rounded to the divisor 64, x 2
  EXPECT_EQ(slots(l, 1), (std::vector<std::pair<int, std::int64_t>>{{G, 0}}));
  EXPECT_EQ(l.shard[1], (std::vector<int>{0}));
  EXPECT_EQ(l.layout.numel, 2176);
}

// Equal 8x8 params, dp 2, bucket_size 100: soft minimum max(100, int(2 x 64 x 0.9) = 115); two
// params make 128 with no slack, so every bucket holds two, one per shard, and the lone last one
// sits in shard 0. Compute loads carry over: in the second bucket both shards are level again.
TEST(MegatronLayerwise, EqualParamsPairUpOnePerShard) {
  std::vector<Param> params;
  for (int i = 0; i < 5; ++i) params.push_back(matrix(i, 8, 8));
  const BufferLayout l = layerwise_buffer(params, 100, 2);
  ASSERT_EQ(l.layout.buckets.size(), 3u);
  EXPECT_EQ(slots(l, 0), (std::vector<std::pair<int, std::int64_t>>{{4, 0}, {3, 64}}));
  EXPECT_EQ(slots(l, 1), (std::vector<std::pair<int, std::int64_t>>{{2, 0}, {1, 64}}));
  EXPECT_EQ(slots(l, 2), (std::vector<std::pair<int, std::int64_t>>{{0, 0}}));
  for (int b = 0; b < 3; ++b) EXPECT_EQ(l.layout.buckets[b].numel, 128);
}

// A shared embedding closes the open chunk and is a bucket of its own: shard 0 holds it, shard 1
// is padding of its size and it adds no compute load. Param 2 (walked first) and param 0 each
// sit alone in shard 0 by the fewest-elements fallback.
TEST(MegatronLayerwise, SharedEmbeddingIsABucketOfItsOwnInShardZero) {
  Param shared = matrix(1, 8, 16);
  shared.shared_embedding = true;
  const BufferLayout l = layerwise_buffer({matrix(0, 8, 8), shared, matrix(2, 8, 8)}, 1000, 2);
  ASSERT_EQ(l.layout.buckets.size(), 3u);
  EXPECT_EQ(slots(l, 0), (std::vector<std::pair<int, std::int64_t>>{{2, 0}}));
  EXPECT_EQ(slots(l, 1), (std::vector<std::pair<int, std::int64_t>>{{1, 0}}));
  EXPECT_EQ(l.layout.buckets[1].numel, 256);
  EXPECT_EQ(slots(l, 2), (std::vector<std::pair<int, std::int64_t>>{{0, 0}}));
}

TEST(MegatronLayerwise, NoBucketSizeMeansOneBucket) {
  std::vector<Param> params;
  for (int i = 0; i < 6; ++i) params.push_back(matrix(i, 8, 8 * (i + 1)));
  const BufferLayout l = layerwise_buffer(params, 0, 3);
  ASSERT_EQ(l.layout.buckets.size(), 1u);
  EXPECT_EQ(l.layout.buckets[0].slots.size(), 6u);
  EXPECT_EQ(l.layout.buckets[0].numel % (3 * 128), 0);  // 3 shards of a multiple of 128
}

// The layerwise strategy's plan (upstream routing, #4771): matrix params only in buckets of whole
// params inside equal shards, the rest in the distributed optimizer's buckets (Megatron's fixed
// rule, element shards); buckets in the order backward completes them.
TEST(LayerwisePlan, MuonParamsAndTheRestLiveInSeparateBuckets) {
  model::BuildOptions build;
  build.tp = 2;
  const model::ModelSpec model = model::build_transformer(model::preset("qwen3-mini"), build);
  PlanOptions o;
  o.strategy = Strategy::kLayerwise;
  o.dims.dp = 4;
  o.dims.tp = 2;
  o.layout.bucket_size = 200'000;
  const Plan plan = make_plan(model, o);
  const StagePlan& stage = plan.stages.at(0);
  std::vector<int> backprop(model.params.size());
  for (std::size_t k = 0; k < stage.params.size(); ++k)
    backprop[stage.params[stage.params.size() - 1 - k]] = static_cast<int>(k);
  int managed = 0, others = 0, last_done = -1;
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = stage.layout.buckets[b];
    const bool matrix = model.params[bucket.slots.at(0).param].is_matrix();
    int done = -1;
    for (const layout::Slot& slot : bucket.slots) {
      ASSERT_EQ(model.params[slot.param].is_matrix(), matrix) << "bucket " << b;
      done = std::max(done, backprop[slot.param]);
      if (matrix) {  // whole inside one of the dp equal shards
        const std::int64_t shard = bucket.numel / o.dims.dp;
        EXPECT_EQ(slot.offset / shard, (slot.end() - 1) / shard) << model.params[slot.param].name;
        EXPECT_EQ(stage.owner[slot.param], slot.offset / shard);
      }
    }
    EXPECT_GT(done, last_done) << "bucket " << b << " completes before the one before it";
    last_done = done;
    EXPECT_EQ(bucket.numel % std::lcm(o.dims.dp, 128), 0);
    EXPECT_EQ(stage.cuts[b], equal_chunk_cuts(bucket.numel, o.dims.dp));
    (matrix ? managed : others)++;
  }
  EXPECT_GT(managed, 0);
  EXPECT_GT(others, 0);
  // The fixed-bucket variant keeps both kinds in Megatron's buckets.
  o.layerwise_buckets = LayerwiseBuckets::kFixed;
  const Plan fixed_plan = make_plan(model, o);
  const StagePlan& fixed = fixed_plan.stages.at(0);
  bool mixed = false;
  for (const layout::Bucket& bucket : fixed.layout.buckets) {
    const bool first = model.params[bucket.slots.at(0).param].is_matrix();
    for (const layout::Slot& slot : bucket.slots)
      mixed = mixed || model.params[slot.param].is_matrix() != first;
  }
  EXPECT_TRUE(mixed);
}

}  // namespace
}  // namespace canzona::plan
