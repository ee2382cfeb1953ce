// optim::NamedState::row_axes, the contract checkpoints rely on to reorder a matrix's rows with its
// state (an unsplit fc1 whose task rows follow the TP degree). Matrix optimizers are
// row-permutation equivariant: stepping P·X with P·G gives P·(what X with G gives), and each
// state must transform as its row_axes say: bit 0 rows permuted, bit 1 columns permuted, bit 2
// only the upper triangle compared (the lower one is never read), nothing for 0. Checked for
// Muon, Shampoo and SOAP on a 6 x 4 matrix over 3 steps, to rounding (1e-4 of the tensor's largest
// element; a wrong row_axes is off by O(1)). Eigenvector columns (SOAP's Q_left) are compared in
// absolute value (their signs are arbitrary), and so is the rotated-basis exp_avg_sq, which a sign
// flip of an eigenvector leaves unchanged anyway.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "canzona/optim/optimizer.h"

namespace canzona::optim {
namespace {

constexpr std::int64_t kRows = 6, kCols = 4;
const std::vector<std::int64_t> kPerm = {3, 0, 5, 1, 4, 2};  // row i of B is row kPerm[i] of A

std::vector<float> random_matrix(std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> m(kRows * kCols);
  for (float& x : m) x = n(rng);
  return m;
}

std::vector<float> permute_rows(const std::vector<float>& m) {
  std::vector<float> out(m.size());
  for (std::int64_t i = 0; i < kRows; ++i)
    for (std::int64_t j = 0; j < kCols; ++j) out[i * kCols + j] = m[kPerm[i] * kCols + j];
  return out;
}

void check_equivariant(const std::string& name) {
  std::mt19937 rng(11);
  std::vector<float> xa = random_matrix(rng), xb = permute_rows(xa);
  const ParamInfo info{"w", kRows, kCols};
  auto a = create_optimizer(name, info), b = create_optimizer(name, info);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = random_matrix(rng), gb = permute_rows(g);
    a->step(matrix_view(xa.data(), kRows, kCols), matrix_view(g.data(), kRows, kCols));
    b->step(matrix_view(xb.data(), kRows, kCols), matrix_view(gb.data(), kRows, kCols));
  }
  const std::vector<NamedState> sa = a->state(), sb = b->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t k = 0; k < sa.size(); ++k) {
    const NamedState& s = sa[k];
    const int axes = s.row_axes;
    SCOPED_TRACE(name + " " + s.name + " row_axes " + std::to_string(axes));
    ASSERT_EQ(s.values.size(), sb[k].values.size());
    if (s.values.empty()) continue;
    if (axes & 1) {
      ASSERT_EQ(s.rows, kRows);
    }
    if (axes & 2) {
      ASSERT_EQ(s.cols, kRows);
    }
    const bool signless = std::string(s.name) == "Q_left" || std::string(s.name) == "exp_avg_sq";
    float scale = 0.0f;
    for (float v : s.values) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0f);
    for (std::int64_t i = 0; i < s.rows; ++i) {
      for (std::int64_t j = 0; j < s.cols; ++j) {
        if ((axes & 4) && j < i) continue;
        std::int64_t ai = axes & 1 ? kPerm[i] : i, aj = axes & 2 ? kPerm[j] : j;
        if (axes & 4) std::tie(ai, aj) = std::pair{std::min(ai, aj), std::max(ai, aj)};
        float want = s.values[ai * s.cols + aj], got = sb[k].values[i * s.cols + j];
        if (signless) want = std::fabs(want), got = std::fabs(got);
        ASSERT_NEAR(got, want, 1e-4f * scale) << "element (" << i << ", " << j << ")";
      }
    }
  }
  // The params too: B's are A's with the rows permuted.
  const std::vector<float> want = permute_rows(xa);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(xb[i], want[i], 1e-4f) << name << " " << i;
}

TEST(StateRowAxes, MuonStateFollowsItsRowAxes) {
  check_equivariant("muon");
}
TEST(StateRowAxes, ShampooStateFollowsItsRowAxes) {
  check_equivariant("shampoo");
}
TEST(StateRowAxes, SoapStateFollowsItsRowAxes) {
  check_equivariant("soap");
}

}  // namespace
}  // namespace canzona::optim
