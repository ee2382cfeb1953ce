// Shampoo against a direct reference: double statistics, LAPACK dsyev (a different eigensolver
// from the kernel's dsyevd) for the inverse 4th roots, and plain-loop products and grafting; the
// reference runs on the documented defaults written out in published.h, and a closed-form step
// pins the -1/4 root, the statistics and the grafting.
#include "canzona/optim/shampoo.h"

#include <gtest/gtest.h>
#include <lapacke.h>

#include "canzona/common/error.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

using test::DMat;

// (S + eps I)^(-1/4) with negative eigenvalues clamped to 0, via dsyev.
DMat reference_inverse_fourth_root(const DMat& s, double eps) {
  const std::int64_t n = s.rows;
  DMat q = s;
  std::vector<double> w(n);
  EXPECT_EQ(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', n, q.v.data(), n, w.data()), 0);
  DMat d(n, n);
  for (std::int64_t k = 0; k < n; ++k) d(k, k) = std::pow(std::max(w[k], 0.0) + eps, -0.25);
  return test::matmul(test::matmul(q, d), test::transposed(q));
}

struct ReferenceShampoo {
  ShampooOptions o;
  bool left, right;
  DMat l, r, l4, r4, m, v;

  ReferenceShampoo(std::int64_t rows, std::int64_t cols, ShampooOptions opt)
      : o(opt),
        left(rows <= opt.max_precond_dim),
        right(cols <= opt.max_precond_dim),
        l(rows, rows),
        r(cols, cols),
        l4(test::identity(rows)),
        r4(test::identity(cols)),
        m(rows, cols),
        v(rows, cols) {}

  void step(DMat& w, const DMat& g, std::int64_t t) {
    const DMat ggt = test::matmul(g, test::transposed(g));
    const DMat gtg = test::matmul(test::transposed(g), g);
    for (std::size_t k = 0; k < l.v.size(); ++k)
      l.v[k] = o.beta2 * l.v[k] + (1 - o.beta2) * ggt.v[k];
    for (std::size_t k = 0; k < r.v.size(); ++k)
      r.v[k] = o.beta2 * r.v[k] + (1 - o.beta2) * gtg.v[k];
    for (std::size_t k = 0; k < m.v.size(); ++k) m.v[k] = o.beta1 * m.v[k] + (1 - o.beta1) * g.v[k];
    if ((t - 1) % o.precondition_frequency == 0) {
      if (left) l4 = reference_inverse_fourth_root(l, o.eps);
      if (right) r4 = reference_inverse_fourth_root(r, o.eps);
    }
    const DMat p = test::matmul(test::matmul(l4, m), r4);
    double scale = 1.0;
    if (o.grafting != Grafting::kNone) {
      double graft = 0;
      if (o.grafting == Grafting::kAdam) {
        DMat a(m.rows, m.cols);
        for (std::size_t k = 0; k < v.v.size(); ++k) {
          v.v[k] = o.graft_beta2 * v.v[k] + (1 - o.graft_beta2) * g.v[k] * g.v[k];
          a.v[k] = (m.v[k] / (1 - std::pow(o.beta1, t))) /
                   (std::sqrt(v.v[k] / (1 - std::pow(o.graft_beta2, t))) + o.graft_eps);
        }
        graft = test::frobenius(a);
      } else {
        graft = test::frobenius(m);
      }
      scale = graft / test::frobenius(p);
    }
    for (std::size_t k = 0; k < w.v.size(); ++k)
      w.v[k] = w.v[k] * (1 - o.lr * o.weight_decay) - o.lr * scale * p.v[k];
  }
};

struct Case {
  std::int64_t rows, cols;
  int frequency;
  Grafting grafting;
  std::int64_t max_precond_dim;
  int steps;
};

TEST(Shampoo, MatchesDirectEigendecompositionReference) {
  const Case cases[] = {
      {12, 20, 1, Grafting::kAdam, 10000, 4},  // roots every step
      {16, 16, 3, Grafting::kSgd, 10000, 5},   // roots at steps 1 and 4 only
      {10, 30, 2, Grafting::kNone, 20, 3},     // right side above max_precond_dim: identity
      {40, 8, 1, Grafting::kAdam, 20, 3},      // left side identity
      {6, 7, 1, Grafting::kAdam, 4, 2},        // both identity: grafted momentum
  };
  std::uint32_t seed = 21;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " f=" << c.frequency
                                      << " max_precond_dim=" << c.max_precond_dim);
    auto configure = [&](ShampooOptions& o) {
      o.lr = 0.01;
      o.beta2 = 0.9;
      o.weight_decay = 0.1;
      o.precondition_frequency = c.frequency;
      o.grafting = c.grafting;
      o.max_precond_dim = c.max_precond_dim;
    };
    ShampooOptions o, ref_options = published::shampoo_options();
    configure(o);
    configure(ref_options);
    Shampoo shampoo(ParamInfo{"w", c.rows, c.cols}, o);
    EXPECT_EQ(shampoo.left_preconditioned(), c.rows <= c.max_precond_dim);
    EXPECT_EQ(shampoo.right_preconditioned(), c.cols <= c.max_precond_dim);
    ReferenceShampoo ref(c.rows, c.cols, ref_options);
    std::vector<float> w = test::random_floats(c.rows * c.cols, seed++);
    const DMat w0 = test::to_dmat(w, c.rows, c.cols);
    DMat w_ref = w0;
    for (int t = 1; t <= c.steps; ++t) {
      const std::vector<float> g = test::random_floats(c.rows * c.cols, seed++);
      shampoo.step(matrix_view(w.data(), c.rows, c.cols), matrix_view(g.data(), c.rows, c.cols));
      ref.step(w_ref, test::to_dmat(g, c.rows, c.cols), t);
    }
    DMat delta = w_ref;
    for (std::size_t k = 0; k < delta.v.size(); ++k) delta.v[k] -= w0.v[k];
    EXPECT_LE(test::max_abs_diff(w, w_ref), 1e-4 * test::max_abs(delta));
  }
}

TEST(Shampoo, DefaultsAreTheDocumentedOnes) {
  {
    SCOPED_TRACE("ShampooOptions{}");
    published::expect_same(ShampooOptions{}, published::shampoo_options());
  }
  {
    SCOPED_TRACE("create_optimizer(\"shampoo\", {})");
    const auto opt = create_optimizer("shampoo", ParamInfo{"w", 4, 6});
    const auto& shampoo = dynamic_cast<const Shampoo&>(*opt);
    published::expect_same(shampoo.options(), published::shampoo_options());
    EXPECT_TRUE(shampoo.left_preconditioned());
    EXPECT_TRUE(shampoo.right_preconditioned());
  }
}

// First step with defaults on G = diag(d) (n x n): L = R = (1 - beta2) diag(d^2) = 1e-3 diag(d^2),
// M = (1 - beta1) G = 0.1 G, roots (1e-3 d^2 + 1e-12)^(-1/4), so
//   P = L^(-1/4) M R^(-1/4) = 0.1 d / sqrt(1e-3 d^2) = sqrt(10) sign(d) on the diagonal, 0 off it
// (any root other than -1/4 leaves a power of |d|). Without grafting W moves by -lr sqrt(10)
// sign(d); with the default Adam grafting, Adam's first step G / (|G| + eps) = sign(d) has norm
// sqrt(n), so W moves by -lr sign(d), lr = 1e-3.
TEST(Shampoo, DiagonalGradientStepsAlongItsSignUnderInverseFourthRoots) {
  const std::int64_t n = 6;
  const double d[n] = {2.0, -0.5, 1.0, 3.0, -1.5, 0.25};
  std::vector<float> g(n * n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) g[i * n + i] = static_cast<float>(d[i]);
  struct Case {
    Grafting grafting;
    double step;  // |W1 - W0| on the diagonal
  };
  for (const Case& c :
       {Case{Grafting::kNone, 1e-3 * std::sqrt(10.0)}, Case{Grafting::kAdam, 1e-3}}) {
    SCOPED_TRACE(c.grafting == Grafting::kNone ? "no grafting" : "adam grafting");
    ShampooOptions o;
    o.grafting = c.grafting;
    Shampoo shampoo(ParamInfo{"w", n, n}, o);
    std::vector<float> w = test::random_floats(n * n, 17), before = w;
    shampoo.step(matrix_view(w.data(), n, n), matrix_view(g.data(), n, n));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const double expected = i == j ? (d[i] > 0 ? -c.step : c.step) : 0.0;
        EXPECT_NEAR(double(w[i * n + j]) - before[i * n + j], expected, 1e-3 * c.step)
            << "(" << i << ", " << j << ")";
      }
  }
}

TEST(Shampoo, ZeroGradientGivesZeroDirection) {
  ShampooOptions o;
  o.weight_decay = 0.5;
  Shampoo shampoo(ParamInfo{"w", 5, 9}, o);
  std::vector<float> w = test::random_floats(45, 3), before = w;
  const std::vector<float> zero(45, 0.0f);
  shampoo.step(matrix_view(w.data(), 5, 9), matrix_view(zero.data(), 5, 9));
  const float decay = static_cast<float>(1.0 - 1e-3 * 0.5);  // default lr 1e-3
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], before[i] * decay);
}

TEST(Shampoo, TinyGradientStaysFiniteWithEpsFloor) {
  for (float scale : {1e-30f, 1e-20f}) {
    SCOPED_TRACE(scale);
    Shampoo shampoo(ParamInfo{"w", 6, 10}, ShampooOptions{});
    std::vector<float> w = test::random_floats(60, 8), before = w;
    for (int t = 0; t < 3; ++t) {
      const std::vector<float> g = test::random_floats(60, 9 + t, scale);
      shampoo.step(matrix_view(w.data(), 6, 10), matrix_view(g.data(), 6, 10));
    }
    // Statistics underflow to ~0, so the roots are eps^(-1/4) I and Adam grafting bounds the
    // step: each element moves by at most about lr per step.
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_TRUE(std::isfinite(w[i]));
      EXPECT_LE(std::abs(w[i] - before[i]), 3 * 1e-3 * std::sqrt(60.0));
    }
  }
}

TEST(Shampoo, NonFiniteGradientThrowsNamingParam) {
  Shampoo shampoo(ParamInfo{"mlp.fc2", 4, 3}, ShampooOptions{});
  std::vector<float> w(12, 1.0f), g(12, 0.5f);
  g[7] = -std::numeric_limits<float>::infinity();
  try {
    shampoo.step(matrix_view(w.data(), 4, 3), matrix_view(g.data(), 4, 3));
    FAIL() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mlp.fc2' (4x3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(2, 1)"), std::string::npos) << e.what();
  }
  for (float x : w) EXPECT_EQ(x, 1.0f);
}

TEST(Shampoo, BitwiseRepeatableAcrossInstances) {
  ShampooOptions o;
  o.precondition_frequency = 2;
  Shampoo a(ParamInfo{"w", 24, 40}, o), b(ParamInfo{"w", 24, 40}, o);
  std::vector<float> wa = test::random_floats(960, 4), wb = wa;
  for (int t = 0; t < 4; ++t) {
    const std::vector<float> g = test::random_floats(960, 50 + t);
    a.step(matrix_view(wa.data(), 24, 40), matrix_view(g.data(), 24, 40));
    b.step(matrix_view(wb.data(), 24, 40), matrix_view(g.data(), 24, 40));
  }
  EXPECT_TRUE(test::same_bits(wa, wb));
}

TEST(Shampoo, RejectsBadOptions) {
  ShampooOptions o;
  o.precondition_frequency = 0;
  EXPECT_THROW(Shampoo(ParamInfo{"w", 3, 3}, o), UsageError);
  o = ShampooOptions{};
  o.eps = 0.0;
  EXPECT_THROW(Shampoo(ParamInfo{"w", 3, 3}, o), UsageError);
  EXPECT_THROW(parse_grafting("adagrad"), UsageError);
}

}  // namespace
}  // namespace canzona::optim
