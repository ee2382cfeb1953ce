// compare_params: bitwise by default, every element counted, size mismatches (one side empty
// included) reported instead of skipped, the native-reduction bound applied per element; and the
// bound's factor written out from Higham's gamma(n).
#include "verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "toy_model.h"

namespace canzona::runtime {
namespace {

model::ModelSpec two_params() {
  model::ModelSpec m = testing::toy_model();
  m.params.resize(2);  // embedding (96 x 32), norm (32)
  return m;
}

std::vector<std::vector<float>> filled(const model::ModelSpec& m, float value) {
  std::vector<std::vector<float>> t;
  for (const model::ParamSpec& p : m.params)
    t.emplace_back(static_cast<std::size_t>(p.numel()), value);
  return t;
}

TEST(CompareParams, EqualTensorsCountEveryElement) {
  const model::ModelSpec m = two_params();
  const Mismatch r = compare_params(m, filled(m, 0.5f), filled(m, 0.5f));
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.elements, 96 * 32 + 32);
  EXPECT_EQ(r.not_bitwise, 0);
}

TEST(CompareParams, OneUlpIsAMismatchNamedByParamAndElement) {
  const model::ModelSpec m = two_params();
  auto got = filled(m, 0.5f);
  got[1][7] = std::nextafter(0.5f, 1.0f);
  const Mismatch r = compare_params(m, got, filled(m, 0.5f));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.param, "layer.norm.weight");
  EXPECT_EQ(r.element, 7);
  EXPECT_EQ(r.not_bitwise, 1);
  EXPECT_NE(r.describe().find("param 'layer.norm.weight' element 7: got"), std::string::npos)
      << r.describe();
}

TEST(CompareParams, NegativeZeroIsNotPositiveZero) {
  const model::ModelSpec m = two_params();
  auto got = filled(m, 0.0f);
  got[0][0] = -0.0f;
  EXPECT_TRUE(compare_params(m, got, filled(m, 0.0f)).found);
}

TEST(CompareParams, AnEmptySideIsAMismatchNotASkip) {
  const model::ModelSpec m = two_params();
  auto got = filled(m, 1.0f);
  got[0].clear();
  const Mismatch r = compare_params(m, got, filled(m, 1.0f));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.param, "embedding.word_embeddings.weight");
  EXPECT_EQ(r.describe(), "param 'embedding.word_embeddings.weight': got 0 elements, want 3072");
  EXPECT_EQ(r.elements, 32);  // only the norm was compared
  // Fewer tensors than params: the missing ones are mismatches too.
  got = filled(m, 1.0f);
  got.pop_back();
  EXPECT_TRUE(compare_params(m, got, filled(m, 1.0f)).found);
}

TEST(CompareParams, ToleranceIsPerElementFactorTimesScale) {
  const model::ModelSpec m = two_params();
  auto want = filled(m, 1.0f);
  auto scale = filled(m, 0.0f);
  scale[1][3] = 2.0f;
  auto got = want;
  got[1][3] = 1.0f + 0.25f;  // |diff| 0.25 <= 0.125 * 2.0
  Tolerance t{&scale, 0.125};
  Mismatch r = compare_params(m, got, want, t);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.not_bitwise, 1);
  EXPECT_DOUBLE_EQ(r.max_abs_diff, 0.25);
  got[1][3] = 1.0f + 0.5f;  // 0.5 > 0.25
  r = compare_params(m, got, want, t);
  EXPECT_TRUE(r.found);
  got[1][3] = 1.0f;
  got[1][4] = 1.0f + 1e-6f;  // scale 0 there: any difference fails
  EXPECT_TRUE(compare_params(m, got, want, t).found);
  got[1][4] = std::numeric_limits<float>::quiet_NaN();
  scale[1][4] = 1e30f;  // NaN is never within a bound
  EXPECT_TRUE(compare_params(m, got, want, t).found);
}

// 2 gamma(P-1) with gamma(n) = n u / (1 - n u), u = 2^-24, plus 1% headroom.
TEST(NativeSumFactor, IsTwiceHighamsGammaWithHeadroom) {
  EXPECT_EQ(native_sum_factor(1), 0.0);
  const double u = 1.0 / 16777216.0;
  EXPECT_DOUBLE_EQ(native_sum_factor(2), 2.0 * u / (1.0 - u) * 1.01);
  EXPECT_DOUBLE_EQ(native_sum_factor(4), 2.0 * 3.0 * u / (1.0 - 3.0 * u) * 1.01);
  // A gradient left unaveraged at DP = 2 (twice the value) is far outside it.
  EXPECT_LT(native_sum_factor(2) * 1.0, 0.5);
}

}  // namespace
}  // namespace canzona::runtime
