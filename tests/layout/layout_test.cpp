// Megatron buffer rules: reverse order, 64-element param alignment, a bucket closes right after
// the param that makes it reach the bucket size, bucket ends padded to lcm(dp, 128), local shapes.
// The constants (64, 128, max(40,000,000, 1,000,000 dp)) are written here from docs/references.md
// ("Megatron bucket rule") and the expected offsets computed by hand from them.
#include "canzona/layout/layout.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::layout {
namespace {

using model::OptimizerClass;

model::ModelSpec three_params() {
  model::ModelSpec m;
  m.name = "three";
  m.params.push_back({"a", {100}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  m.params.push_back({"b", {10, 10}, 0, OptimizerClass::kMatrix, -1, -1, {}});
  m.params.push_back({"c", {30}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  return m;
}

TEST(Layout, ReverseOrderAlignedStartsOneBucket) {
  const auto m = three_params();
  LayoutOptions o;
  o.dp = 2;
  const Layout l = build_layout(m, {0, 1, 2}, o);
  ASSERT_EQ(l.buckets.size(), 1u);
  const auto& s = l.buckets[0].slots;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].param, 2);  // c first (last registered)
  EXPECT_EQ(s[0].offset, 0);
  EXPECT_EQ(s[1].param, 1);
  EXPECT_EQ(s[1].offset, 64);  // 30 rounded up to 64
  EXPECT_EQ(s[2].param, 0);
  EXPECT_EQ(s[2].offset, 192);         // 64 + 100 = 164 rounded up to 192
  EXPECT_EQ(l.buckets[0].numel, 384);  // 292 rounded up to lcm(2, 128) = 128
  EXPECT_EQ(l.numel, 384);
}

// ZeRO-3's default bucket is the largest layer's elements (here 100 + 30 = 130 in both layers), so
// each layer is a bucket of its own: reverse order, l1.n at 0, l1.w at 64 (ends 164 >= 130:
// close, padded to 256), then l0 the same way, then the embedding (200, padded to 256).
TEST(Layout, ZeroStageThreeBucketsHoldOneLayer) {
  model::ModelSpec m;
  m.name = "layers";
  m.params.push_back({"emb", {20, 10}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  m.params.push_back({"l0.w", {10, 10}, -1, OptimizerClass::kMatrix, 0, -1, {}});
  m.params.push_back({"l0.n", {30}, -1, OptimizerClass::kElementwise, 0, -1, {}});
  m.params.push_back({"l1.w", {10, 10}, -1, OptimizerClass::kMatrix, 1, -1, {}});
  m.params.push_back({"l1.n", {30}, -1, OptimizerClass::kElementwise, 1, -1, {}});
  EXPECT_EQ(layer_bucket_size(m, {0, 1, 2, 3, 4}, 1), 130);
  LayoutOptions o;
  o.dp = 2;
  o.zero_stage = ZeroStage::kThree;
  const Layout l = build_layout(m, {0, 1, 2, 3, 4}, o);
  ASSERT_EQ(l.buckets.size(), 3u);
  const std::vector<std::vector<int>> want = {{4, 3}, {2, 1}, {0}};
  for (std::size_t b = 0; b < 3; ++b) {
    std::vector<int> got;
    for (const Slot& s : l.buckets[b].slots) got.push_back(s.param);
    EXPECT_EQ(got, want[b]) << "bucket " << b;
    EXPECT_EQ(l.buckets[b].numel, 256);
  }
  // Stage 1 keeps Megatron's default (40M elements): one bucket.
  o.zero_stage = ZeroStage::kOne;
  EXPECT_EQ(build_layout(m, {0, 1, 2, 3, 4}, o).buckets.size(), 1u);
}

TEST(Layout, BucketClosesAfterTheParamThatReachesTheSize) {
  const auto m = three_params();
  LayoutOptions o;
  o.dp = 3;
  o.bucket_size = 64;  // c (30) does not reach 64; b ends at 164 >= 64 -> close; a alone
  const Layout l = build_layout(m, {0, 1, 2}, o);
  ASSERT_EQ(l.buckets.size(), 2u);
  EXPECT_EQ(l.buckets[0].slots.size(), 2u);
  EXPECT_EQ(l.buckets[0].numel, 384);  // 164 rounded up to lcm(3, 128) = 384
  EXPECT_EQ(l.buckets[1].offset, 384);
  EXPECT_EQ(l.buckets[1].slots[0].param, 0);
  EXPECT_EQ(l.buckets[1].slots[0].offset, 0);
  EXPECT_EQ(l.buckets[1].numel, 384);
  EXPECT_EQ(l.numel, 768);
}

TEST(Layout, AParamIsNeverSplitAcrossBuckets) {
  model::ModelSpec m;
  m.name = "big";
  for (int i = 0; i < 7; ++i)
    m.params.push_back({std::string("p").append(std::to_string(i)),
                        {1000 + 37 * i},
                        -1,
                        OptimizerClass::kElementwise,
                        -1,
                        -1,
                        {}});
  LayoutOptions o;
  o.dp = 4;
  o.bucket_size = 1500;
  std::vector<int> all(7);
  std::iota(all.begin(), all.end(), 0);
  const Layout l = build_layout(m, all, o);
  int seen = 0;
  for (const auto& b : l.buckets) {
    EXPECT_EQ(b.numel % 128, 0);
    for (const auto& s : b.slots) {
      ++seen;
      EXPECT_EQ(s.offset % 64, 0);
      EXPECT_LE(s.end(), b.numel);
    }
  }
  EXPECT_EQ(seen, 7);
}

TEST(Layout, UsesTpLocalShapes) {
  const auto m = three_params();
  LayoutOptions o;
  o.tp = 2;
  const Layout l = build_layout(m, {1}, o);
  EXPECT_EQ(l.buckets[0].slots[0].numel, 50);
}

TEST(Layout, DefaultBucketSizeIsMegatrons) {
  LayoutOptions o;
  o.dp = 8;
  EXPECT_EQ(effective_bucket_size(o), 40'000'000);
  o.dp = 64;
  EXPECT_EQ(effective_bucket_size(o), 64'000'000);
  o.bucket_size = 123;
  EXPECT_EQ(effective_bucket_size(o), 123);
}

TEST(Layout, DefaultsAreMegatrons) {
  const LayoutOptions o;
  EXPECT_EQ(o.dp, 1);
  EXPECT_EQ(o.tp, 1);
  EXPECT_EQ(o.bucket_size, 0);  // 0 = max(40,000,000, 1,000,000 dp)
  EXPECT_EQ(o.param_align, 64);
  EXPECT_TRUE(o.pad_bucket_end);
}

// max(40,000,000, 1,000,000 dp) around the crossover at dp = 40.
TEST(Layout, DefaultBucketSizeIsFortyMillionOrOneMillionPerRank) {
  struct Row {
    int dp;
    std::int64_t size;
  };
  for (const Row& r :
       {Row{1, 40'000'000}, Row{32, 40'000'000}, Row{39, 40'000'000}, Row{40, 40'000'000},
        Row{41, 41'000'000}, Row{128, 128'000'000}, Row{1024, 1'024'000'000}}) {
    LayoutOptions o;
    o.dp = r.dp;
    EXPECT_EQ(effective_bucket_size(o), r.size) << "dp=" << r.dp;
  }
}

// With default options a bucket is cut at 40,000,000 elements exactly: a param ending at
// 39,999,999 leaves the bucket open, one ending at 40,000,000 closes it.
TEST(Layout, DefaultBucketClosesAtFortyMillionElements) {
  model::ModelSpec m;
  m.name = "forty";
  // Registration order; the buffer (reverse order) sees z, y, x.
  m.params.push_back({"x", {100}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  m.params.push_back({"y", {64}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  m.params.push_back({"z", {39'999'936}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  LayoutOptions o;
  o.dp = 8;
  const Layout closes = build_layout(m, {0, 1, 2}, o);  // z + y end at 40,000,000
  ASSERT_EQ(closes.buckets.size(), 2u);
  EXPECT_EQ(closes.buckets[0].numel, 40'000'000);  // 40,000,000 = 312,500 x 128
  EXPECT_EQ(closes.buckets[1].slots.size(), 1u);
  m.params[1].shape = {63};  // z + y end at 39,999,999: x joins the first bucket
  const Layout open = build_layout(m, {0, 1, 2}, o);
  ASSERT_EQ(open.buckets.size(), 1u);
  EXPECT_EQ(open.buckets[0].slots[2].offset, 40'000'000);  // 39,999,999 rounded up to 64
  EXPECT_EQ(open.buckets[0].numel, 40'000'128);            // 40,000,100 rounded up to 128
}

// Param starts are rounded up to 64 elements: buffer sizes 1, 63, 64, 65 start at 0, 64, 128,
// 192; the bucket (end 257) is padded to 384 = 3 x 128.
TEST(Layout, ParamStartsRoundUpTo64Elements) {
  model::ModelSpec m;
  m.name = "align";
  for (std::int64_t n : {65, 64, 63, 1})  // registration order; the buffer reverses it
    m.params.push_back(
        {"p" + std::to_string(n), {n}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  const Layout l = build_layout(m, {0, 1, 2, 3}, LayoutOptions{});
  ASSERT_EQ(l.buckets.size(), 1u);
  const auto& s = l.buckets[0].slots;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].offset, 0);
  EXPECT_EQ(s[1].offset, 64);
  EXPECT_EQ(s[2].offset, 128);
  EXPECT_EQ(s[3].offset, 192);
  EXPECT_EQ(s[3].end(), 257);
  EXPECT_EQ(l.buckets[0].numel, 384);
}

// Bucket ends round up to lcm(dp, 128), by hand: a 1-element bucket becomes lcm(dp, 128) long.
TEST(Layout, BucketEndRoundsUpToLcmOfDpAnd128) {
  model::ModelSpec m;
  m.name = "one";
  m.params.push_back({"p", {1}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  struct Row {
    int dp;
    std::int64_t numel;
  };
  for (const Row& r :
       {Row{1, 128}, Row{2, 128}, Row{3, 384}, Row{5, 640}, Row{6, 384}, Row{48, 384}, Row{96, 384},
        Row{256, 256}, Row{384, 384}, Row{1000, 16000}}) {
    LayoutOptions o;
    o.dp = r.dp;
    EXPECT_EQ(build_layout(m, {0}, o).buckets[0].numel, r.numel) << "dp=" << r.dp;
  }
  LayoutOptions o;
  o.dp = 3;
  o.pad_bucket_end = false;
  EXPECT_EQ(build_layout(m, {0}, o).buckets[0].numel, 1);
}

// Qwen3-32B at TP = 8, DP = 32 with the default bucket size (40,000,000), by hand from
// docs/references.md: V_pad = ceil(151936 / 1024) * 1024 = 152576. Reverse order: the output layer
// (152576 / 8 x 5120 = 97,648,640) fills bucket 0 alone; bucket 1 is the final norm (5120),
// layer 63's fc2 (5120 x 3200 = 16,384,000, at 5120) and fc1 (6400 x 5120 = 32,768,000, at
// 16,389,120), ending at 49,157,120 >= 40,000,000; bucket 2 is the rest of layer 63 and
// layer 62's fc2 and fc1, ending at 60,958,976. Everything is a multiple of 128 already. 66
// buckets hold the 4,096,676,864 local elements with no padding.
TEST(Layout, Qwen3_32bBucketsFollowTheMegatronRule) {
  const model::ModelSpec m =
      model::build_transformer(model::preset("qwen3-32b"), model::BuildOptions{.tp = 8});
  std::vector<int> all(m.params.size());
  std::iota(all.begin(), all.end(), 0);
  LayoutOptions o;
  o.dp = 32;
  o.tp = 8;
  const Layout l = build_layout(m, all, o);
  ASSERT_EQ(l.buckets.size(), 66u);
  EXPECT_EQ(l.numel, 4'096'676'864);
  ASSERT_EQ(l.buckets[0].slots.size(), 1u);
  EXPECT_EQ(m.params[l.buckets[0].slots[0].param].name, "output_layer.weight");
  EXPECT_EQ(l.buckets[0].numel, 97'648'640);
  const auto& b1 = l.buckets[1];
  ASSERT_EQ(b1.slots.size(), 3u);
  EXPECT_EQ(m.params[b1.slots[0].param].name, "decoder.final_layernorm.weight");
  EXPECT_EQ(m.params[b1.slots[1].param].name, "decoder.layers.63.mlp.linear_fc2.weight");
  EXPECT_EQ(b1.slots[1].offset, 5120);
  EXPECT_EQ(m.params[b1.slots[2].param].name, "decoder.layers.63.mlp.linear_fc1.weight");
  EXPECT_EQ(b1.slots[2].offset, 16'389'120);
  EXPECT_EQ(b1.offset, 97'648'640);
  EXPECT_EQ(b1.numel, 49'157'120);
  EXPECT_EQ(l.buckets[2].slots.size(), 8u);
  EXPECT_EQ(l.buckets[2].numel, 60'958'976);
}

TEST(Layout, BadOptionsAreUsageErrors) {
  const auto m = three_params();
  LayoutOptions o;
  o.dp = 0;
  EXPECT_THROW(build_layout(m, {0}, o), UsageError);
  o.dp = 1;
  o.param_align = 0;
  EXPECT_THROW(build_layout(m, {0}, o), UsageError);
}

// Bucket sizes beyond kMaxBucketSize are UsageErrors naming it; offsets and padding that would
// overflow int64 are UsageErrors naming the computation, never wrapped values.
TEST(Layout, HostileBucketSizesAndOffsetsAreUsageErrors) {
  const auto m = three_params();
  LayoutOptions o;
  o.bucket_size = kMaxBucketSize + 1;
  EXPECT_THROW(
      {
        try {
          build_layout(m, {0, 1, 2}, o);
        } catch (const UsageError& e) {
          EXPECT_NE(std::string(e.what()).find("kMaxBucketSize"), std::string::npos) << e.what();
          throw;
        }
      },
      UsageError);
  o.bucket_size = kMaxBucketSize;
  EXPECT_EQ(build_layout(m, {0, 1, 2}, o).buckets.size(), 1u);

  model::ModelSpec huge;
  huge.name = "huge";
  for (const char* name : {"a", "b"})  // each fits int64, their padded sum does not
    huge.params.push_back(
        {name, {INT64_MAX / 2 + 1}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  EXPECT_THROW(build_layout(huge, {0, 1}, LayoutOptions{}), UsageError);
}

}  // namespace
}  // namespace canzona::layout

namespace canzona::layout {
namespace {

// Hand layout: params a (100 elements), b (30), c (200) in one bucket, align 64, dp 2.
Layout hand_bucket() {
  Layout l;
  Bucket b;
  b.slots = {{0, 0, 100}, {1, 128, 30}, {2, 192, 200}};
  b.numel = 512;
  l.buckets.push_back(b);
  l.numel = 512;
  return l;
}

TEST(LayoutReorder, PacksInTheNewOrderWithAlignmentAndEndPadding) {
  LayoutOptions o;
  o.dp = 2;
  const Layout r = reorder_buckets(hand_bucket(), {{2, 0, 1}}, o);
  // c at 0 (200), a at 256 (round_up(200, 64)), b at 384; end 414 -> lcm(2, 128) = 128: 512.
  ASSERT_EQ(r.buckets[0].slots.size(), 3u);
  EXPECT_EQ(r.buckets[0].slots[0].param, 2);
  EXPECT_EQ(r.buckets[0].slots[1].offset, 256);
  EXPECT_EQ(r.buckets[0].slots[2].offset, 384);
  EXPECT_EQ(r.buckets[0].numel, 512);
  EXPECT_EQ(r.numel, 512);
}

TEST(LayoutPaddedShards, EqualRegionsOfTheLargestExtent) {
  LayoutOptions o;
  o.dp = 2;
  // a and b to region 0 (a at 0, b at 128: extent 158), c to region 1 (200): S = round_up(200,
  // lcm(64, 128)) = 256, bucket 512; c at 256.
  const Layout r = padded_shards(hand_bucket(), {{0, 1, 2}}, {{0, 0, 1}}, o);
  ASSERT_EQ(r.buckets[0].slots.size(), 3u);
  EXPECT_EQ(r.buckets[0].numel, 512);
  EXPECT_EQ(r.buckets[0].slots[1].offset, 128);
  EXPECT_EQ(r.buckets[0].slots[2].param, 2);
  EXPECT_EQ(r.buckets[0].slots[2].offset, 256);
}

}  // namespace
}  // namespace canzona::layout
