// SOAP against the straightforward formulas of the SOAP paper / reference code in double: eigh
// (dsyev) at the start, Adam in the rotated space, then power iteration + QR (Gram–Schmidt here,
// Householder in the kernel: the update does not depend on the basis vectors' signs). The
// reference runs on the published defaults (published.h), never on values read from the code.
#include "canzona/optim/soap.h"

#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <numeric>

#include "canzona/common/error.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

using test::DMat;

DMat eigenvectors_descending(const DMat& s) {
  const std::int64_t n = s.rows;
  DMat q = s;
  std::vector<double> w(n);
  EXPECT_EQ(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', n, q.v.data(), n, w.data()), 0);
  DMat out(n, n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) out(i, j) = q(i, n - 1 - j);
  return out;
}

void gram_schmidt_columns(DMat& q) {
  for (std::int64_t j = 0; j < q.cols; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::int64_t i = 0; i < q.rows; ++i) dot += q(i, j) * q(i, k);
        for (std::int64_t i = 0; i < q.rows; ++i) q(i, j) -= dot * q(i, k);
      }
    double norm = 0;
    for (std::int64_t i = 0; i < q.rows; ++i) norm += q(i, j) * q(i, j);
    for (std::int64_t i = 0; i < q.rows; ++i) q(i, j) /= std::sqrt(norm);
  }
}

struct ReferenceSoap {
  SoapOptions o;
  bool left, right;
  DMat l, r, ql, qr, m, v;

  ReferenceSoap(std::int64_t rows, std::int64_t cols, SoapOptions opt)
      : o(opt),
        left(rows <= opt.max_precond_dim),
        right(cols <= opt.max_precond_dim),
        l(rows, rows),
        r(cols, cols),
        ql(test::identity(rows)),
        qr(test::identity(cols)),
        m(rows, cols),
        v(rows, cols) {}

  DMat rotate(const DMat& x) const {
    return test::matmul(test::matmul(test::transposed(ql), x), qr);
  }

  void accumulate(const DMat& g) {
    const DMat ggt = test::matmul(g, test::transposed(g));
    const DMat gtg = test::matmul(test::transposed(g), g);
    const double sb = o.shampoo_beta;
    for (std::size_t k = 0; k < l.v.size(); ++k) l.v[k] = sb * l.v[k] + (1 - sb) * ggt.v[k];
    for (std::size_t k = 0; k < r.v.size(); ++k) r.v[k] = sb * r.v[k] + (1 - sb) * gtg.v[k];
  }

  // Sort Q's columns by diag(Q^T S Q) descending, permute V alike, then Q <- orth(S Q).
  void refresh(const DMat& s, DMat& q, bool is_left) {
    const DMat sq = test::matmul(s, q);
    std::vector<double> est(q.cols, 0.0);
    for (std::int64_t i = 0; i < q.rows; ++i)
      for (std::int64_t k = 0; k < q.cols; ++k) est[k] += q(i, k) * sq(i, k);
    std::vector<std::int64_t> order(q.cols);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return est[a] > est[b]; });
    DMat sorted(q.rows, q.cols), vv = v;
    for (std::int64_t i = 0; i < q.rows; ++i)
      for (std::int64_t j = 0; j < q.cols; ++j) sorted(i, j) = q(i, order[j]);
    for (std::int64_t i = 0; i < v.rows; ++i)
      for (std::int64_t j = 0; j < v.cols; ++j)
        v(i, j) = is_left ? vv(order[i], j) : vv(i, order[j]);
    q = test::matmul(s, sorted);
    gram_schmidt_columns(q);
  }

  void step(DMat& w, const DMat& g, std::int64_t t) {
    if (t == 1) {
      accumulate(g);
      if (left) ql = eigenvectors_descending(l);
      if (right) qr = eigenvectors_descending(r);
      return;
    }
    const std::int64_t s = t - 1;
    const DMat gr = rotate(g);
    for (std::size_t k = 0; k < m.v.size(); ++k) {
      m.v[k] = o.beta1 * m.v[k] + (1 - o.beta1) * g.v[k];
      v.v[k] = o.beta2 * v.v[k] + (1 - o.beta2) * gr.v[k] * gr.v[k];
    }
    DMat nr = rotate(m);
    for (std::size_t k = 0; k < nr.v.size(); ++k) nr.v[k] /= std::sqrt(v.v[k]) + o.eps;
    const DMat n = test::matmul(test::matmul(ql, nr), test::transposed(qr));
    const double alpha =
        o.correct_bias ? o.lr * std::sqrt(1 - std::pow(o.beta2, s)) / (1 - std::pow(o.beta1, s))
                       : o.lr;
    for (std::size_t k = 0; k < w.v.size(); ++k)
      w.v[k] = w.v[k] * (1 - o.lr * o.weight_decay) - alpha * n.v[k];
    accumulate(g);
    if (s % o.precondition_frequency == 0) {
      if (left) refresh(l, ql, true);
      if (right) refresh(r, qr, false);
    }
  }
};

TEST(Soap, MatchesReferenceFormulaOnSmallCases) {
  struct Case {
    std::int64_t rows, cols;
    int frequency;
    std::int64_t max_precond_dim;
    bool correct_bias;
    int steps;
  };
  const Case cases[] = {
      {8, 8, 2, 10000, true, 6},  // both sides, QR refresh at Adam steps 2 and 4
      {6, 12, 1, 8, false, 4},    // right side identity, refresh every step
      {12, 6, 3, 8, true, 5},     // left side identity
      {5, 5, 1, 2, true, 3},      // both identity: plain Adam
  };
  std::uint32_t seed = 31;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " f=" << c.frequency
                                      << " max_precond_dim=" << c.max_precond_dim);
    auto configure = [&](SoapOptions& o) {
      o.lr = 0.01;
      o.precondition_frequency = c.frequency;
      o.max_precond_dim = c.max_precond_dim;
      o.correct_bias = c.correct_bias;
      o.weight_decay = 0.1;
    };
    SoapOptions o, ref_options = published::soap_options();
    configure(o);
    configure(ref_options);
    Soap soap(ParamInfo{"w", c.rows, c.cols}, o);
    ReferenceSoap ref(c.rows, c.cols, ref_options);
    std::vector<float> w = test::random_floats(c.rows * c.cols, seed++);
    const DMat w0 = test::to_dmat(w, c.rows, c.cols);
    DMat w_ref = w0;
    for (int t = 1; t <= c.steps; ++t) {
      const std::vector<float> g = test::random_floats(c.rows * c.cols, seed++);
      soap.step(matrix_view(w.data(), c.rows, c.cols), matrix_view(g.data(), c.rows, c.cols));
      ref.step(w_ref, test::to_dmat(g, c.rows, c.cols), t);
    }
    DMat delta = w_ref;
    for (std::size_t k = 0; k < delta.v.size(); ++k) delta.v[k] -= w0.v[k];
    ASSERT_GT(test::max_abs(delta), 1e-3);
    EXPECT_LE(test::max_abs_diff(w, w_ref), 1e-4 * test::max_abs(delta));
  }
}

TEST(Soap, DefaultsAreThePublishedOnes) {
  {
    SCOPED_TRACE("SoapOptions{}");
    published::expect_same(SoapOptions{}, published::soap_options());
  }
  {
    SCOPED_TRACE("create_optimizer(\"soap\", {})");
    const auto opt = create_optimizer("soap", ParamInfo{"w", 4, 6});
    published::expect_same(dynamic_cast<const Soap&>(*opt).options(), published::soap_options());
  }
}

// Defaults on a plain step: the reference with the published values and the optimizer with its
// own, everything else untouched, agree over several steps including a QR refresh (f = 10 would
// need 11 steps; 12 are run). Square, so that neither first-step statistic is rank-deficient:
// a degenerate eigenspace has no unique basis, and Adam's v is not invariant to its choice.
TEST(Soap, DefaultStepMatchesTheReference) {
  const std::int64_t rows = 8, cols = 8;
  Soap soap(ParamInfo{"w", rows, cols}, SoapOptions{});
  ReferenceSoap ref(rows, cols, published::soap_options());
  std::vector<float> w = test::random_floats(rows * cols, 90);
  const DMat w0 = test::to_dmat(w, rows, cols);
  DMat w_ref = w0;
  for (int t = 1; t <= 12; ++t) {
    const std::vector<float> g = test::random_floats(rows * cols, 91 + t);
    soap.step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
    ref.step(w_ref, test::to_dmat(g, rows, cols), t);
  }
  DMat delta = w_ref;
  for (std::size_t k = 0; k < delta.v.size(); ++k) delta.v[k] -= w0.v[k];
  ASSERT_GT(test::max_abs(delta), 1e-3);
  EXPECT_LE(test::max_abs_diff(w, w_ref), 1e-4 * test::max_abs(delta));
}

TEST(Soap, FirstStepOnlyBuildsTheBasis) {
  Soap soap(ParamInfo{"w", 4, 6}, SoapOptions{});
  std::vector<float> w = test::random_floats(24, 1), before = w;
  const std::vector<float> g = test::random_floats(24, 2);
  soap.step(matrix_view(w.data(), 4, 6), matrix_view(g.data(), 4, 6));
  EXPECT_TRUE(test::same_bits(w, before));
  EXPECT_EQ(soap.step_count(), 1);
  soap.step(matrix_view(w.data(), 4, 6), matrix_view(g.data(), 4, 6));
  EXPECT_FALSE(test::same_bits(w, before));
}

TEST(Soap, ZeroAndTinyGradientsStayFinite) {
  for (float scale : {0.0f, 1e-30f}) {
    SCOPED_TRACE(scale);
    Soap soap(ParamInfo{"w", 6, 4}, SoapOptions{});
    std::vector<float> w = test::random_floats(24, 3);
    for (int t = 0; t < 4; ++t) {
      const std::vector<float> g = test::random_floats(24, 4 + t, scale);
      soap.step(matrix_view(w.data(), 6, 4), matrix_view(g.data(), 6, 4));
    }
    for (float x : w) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(Soap, NonFiniteGradientThrowsNamingParam) {
  Soap soap(ParamInfo{"attn.proj", 3, 5}, SoapOptions{});
  std::vector<float> w(15, 1.0f), g(15, 0.5f);
  g[14] = std::nanf("");
  EXPECT_THROW(
      {
        try {
          soap.step(matrix_view(w.data(), 3, 5), matrix_view(g.data(), 3, 5));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("'attn.proj' (3x5)"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_EQ(soap.step_count(), 0);
}

TEST(Soap, BitwiseRepeatableAcrossInstances) {
  SoapOptions o;
  o.precondition_frequency = 2;
  Soap a(ParamInfo{"w", 20, 28}, o), b(ParamInfo{"w", 20, 28}, o);
  std::vector<float> wa = test::random_floats(560, 5), wb = wa;
  for (int t = 0; t < 6; ++t) {
    const std::vector<float> g = test::random_floats(560, 60 + t);
    a.step(matrix_view(wa.data(), 20, 28), matrix_view(g.data(), 20, 28));
    b.step(matrix_view(wb.data(), 20, 28), matrix_view(g.data(), 20, 28));
  }
  EXPECT_TRUE(test::same_bits(wa, wb));
}

}  // namespace
}  // namespace canzona::optim
