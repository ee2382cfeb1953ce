// Megatron buffer rules: reverse order, 64-element param alignment, a bucket closes right after
// the param that makes it reach the bucket size, bucket ends padded to lcm(dp, 128), local shapes.
#include "canzona/layout/layout.h"

#include <gtest/gtest.h>

#include <numeric>

#include "canzona/common/error.h"

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

TEST(Layout, BadOptionsAreUsageErrors) {
  const auto m = three_params();
  LayoutOptions o;
  o.dp = 0;
  EXPECT_THROW(build_layout(m, {0}, o), UsageError);
  o.dp = 1;
  o.param_align = 0;
  EXPECT_THROW(build_layout(m, {0}, o), UsageError);
}

}  // namespace
}  // namespace canzona::layout
