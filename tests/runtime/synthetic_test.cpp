// Synthetic values: pure functions of the counter, in [-1, 1), TP shards equal to slices of the
// global tensor, unscaled (the runtime divides by DP), float(1/DP) pinned by its bits.
#include "synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "canzona/engine/engine.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

TEST(Synthetic, UnitValuesAreExactFloatsInRange) {
  const std::uint64_t key = grad_key(1, 3, 1, 4);
  double sum = 0.0;
  for (std::int64_t e = 0; e < 100000; ++e) {
    const float u = unit_value(key, e);
    ASSERT_GE(u, -1.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, std::ldexp(std::round(std::ldexp(static_cast<double>(u), 23)), -23));
    sum += u;
  }
  EXPECT_LT(std::fabs(sum / 100000.0), 0.02);
}

TEST(Synthetic, KeysSeparateStepRankParamAndSeed) {
  const float base = unit_value(grad_key(1, 1, 0, 0), 5);
  EXPECT_EQ(base, unit_value(grad_key(1, 1, 0, 0), 5));
  int differ = 0;
  for (std::uint64_t k : {grad_key(2, 1, 0, 0), grad_key(1, 2, 0, 0), grad_key(1, 1, 1, 0),
                          grad_key(1, 1, 0, 1), init_key(1, 0)})
    differ += unit_value(k, 5) != base;
  EXPECT_EQ(differ, 5);
}

TEST(Synthetic, TpShardsAreSlicesOfTheGlobalTensor) {
  const model::ModelSpec m = testing::toy_model();
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    const model::ParamSpec& p = m.params[i];
    std::vector<float> global(static_cast<std::size_t>(p.numel()));
    fill_grad(p, static_cast<int>(i), 1, 0, 3, 2, 1, global);
    for (int t = 0; t < 2; ++t) {
      std::vector<float> local(static_cast<std::size_t>(p.local_numel(2)));
      fill_grad(p, static_cast<int>(i), 2, t, 3, 2, 1, local);
      const std::int64_t cols = p.cols();
      for (std::size_t k = 0; k < local.size(); ++k) {
        std::int64_t g = static_cast<std::int64_t>(k);
        if (p.tp_split_dim == 0) g += t * static_cast<std::int64_t>(local.size());
        if (p.tp_split_dim == 1) {
          const std::int64_t lc = cols / 2;
          g = (g / lc) * cols + t * lc + g % lc;
        }
        ASSERT_EQ(local[k], global[g]) << p.name << " tp " << t << " local " << k;
      }
    }
  }
}

// The local gradient is the unit value itself; averaging is the runtime's job (synthetic.h).
TEST(Synthetic, GradientsAreUnscaledUnitValues) {
  const model::ModelSpec m = testing::toy_model();
  const model::ParamSpec& p = m.params[1];
  std::vector<float> grad(32);
  fill_grad(p, 1, 1, 0, 9, 1, 2, grad);
  for (std::size_t k = 0; k < 32; ++k)
    EXPECT_EQ(grad[k], unit_value(grad_key(9, 1, 2, 1), static_cast<std::int64_t>(k)));
}

// float(1 / DP), written out: 1/2 and 1/4 are exact, 1/3 rounds to 0x3eaaaaab.
TEST(Synthetic, GradScaleIsTheFloatReciprocalOfDp) {
  EXPECT_EQ(engine::grad_scale(1), 1.0f);
  EXPECT_EQ(engine::grad_scale(2), 0.5f);
  EXPECT_EQ(engine::grad_scale(4), 0.25f);
  const float third = engine::grad_scale(3);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &third, sizeof(bits));
  EXPECT_EQ(bits, 0x3eaaaaabu);
}

TEST(Synthetic, InitKeepsNormsNearOne) {
  const model::ModelSpec m = testing::toy_model();
  std::vector<float> norm(32), matrix(96 * 32);
  fill_init(m.params[1], 1, 1, 0, 1, norm);
  fill_init(m.params[0], 0, 1, 0, 1, matrix);
  for (float v : norm) EXPECT_NEAR(v, 1.0f, 0.02f);
  for (float v : matrix) EXPECT_LE(std::fabs(v), 0.02f);
}

}  // namespace
}  // namespace canzona::runtime
