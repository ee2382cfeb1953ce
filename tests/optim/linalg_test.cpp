// The backend seam against triple loops and LAPACK's dsyev, and the matrix helpers.
#include "canzona/optim/linalg.h"

#include <gtest/gtest.h>
#include <lapacke.h>

#include "canzona/common/error.h"
#include "test_util.h"

namespace canzona::optim {
namespace {

using test::DMat;

TEST(Gemm, MatchesTripleLoopForTransposesAndStrides) {
  std::uint32_t seed = 1;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const std::int64_t m = 17, k = 23, n = 11, pad = 3;
      const std::int64_t ar = ta == Trans::kNo ? m : k, ac = ta == Trans::kNo ? k : m;
      const std::int64_t br = tb == Trans::kNo ? k : n, bc = tb == Trans::kNo ? n : k;
      std::vector<float> a = test::random_floats(ar * (ac + pad), seed++);
      std::vector<float> b = test::random_floats(br * (bc + pad), seed++);
      std::vector<float> c = test::random_floats(m * (n + pad), seed++);
      const ConstMatrixView av(a.data(), ar, ac, ac + pad), bv(b.data(), br, bc, bc + pad);
      const MatrixView cv{c.data(), m, n, n + pad};
      DMat ad = test::to_dmat(av), bd = test::to_dmat(bv), cd = test::to_dmat(cv);
      if (ta == Trans::kYes) ad = test::transposed(ad);
      if (tb == Trans::kYes) bd = test::transposed(bd);
      const DMat ab = test::matmul(ad, bd);
      gemm(ta, tb, 0.5f, av, bv, 2.0f, cv);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          EXPECT_NEAR(cv(i, j), 0.5 * ab(i, j) + 2.0 * cd(i, j), 1e-4);
    }
  }
  std::vector<float> x(6);
  EXPECT_THROW(gemm(Trans::kNo, Trans::kNo, 1, matrix_view(x.data(), 2, 3),
                    matrix_view(x.data(), 2, 3), 0, matrix_view(x.data(), 2, 3)),
               Error);
}

TEST(Syrk, FillsUpperTriangleOnly) {
  const std::int64_t n = 9, k = 14;
  const std::vector<float> a = test::random_floats(n * k, 5);
  std::vector<float> c(n * n, -7.0f);
  syrk_upper(Trans::kNo, 1.0f, matrix_view(a.data(), n, k), 0.0f, matrix_view(c.data(), n, n));
  const DMat ad = test::to_dmat(a, n, k);
  const DMat ref = test::matmul(ad, test::transposed(ad));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      if (j >= i) {
        EXPECT_NEAR(c[i * n + j], ref(i, j), 1e-4);
      } else {
        EXPECT_EQ(c[i * n + j], -7.0f);
      }
    }
  mirror_upper_to_lower(matrix_view(c.data(), n, n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < i; ++j) EXPECT_EQ(c[i * n + j], c[j * n + i]);
}

TEST(SymmetricPower, MatchesDsyevReferenceAndClampsNegativeEigenvalues) {
  const std::int64_t n = 12;
  const std::vector<float> g = test::random_floats(n * 5, 6);  // rank 5: 7 zero eigenvalues
  std::vector<float> s(n * n), root(n * n);
  syrk_upper(Trans::kNo, 1.0f, matrix_view(g.data(), n, 5), 0.0f, matrix_view(s.data(), n, n));
  mirror_upper_to_lower(matrix_view(s.data(), n, n));
  s[0] -= 1e-3f;  // a slightly indefinite matrix
  const double eps = 1e-2;
  symmetric_power(matrix_view(s.data(), n, n), -0.25, eps, matrix_view(root.data(), n, n));
  DMat q = test::to_dmat(s, n, n);
  std::vector<double> w(n);
  ASSERT_EQ(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', n, q.v.data(), n, w.data()), 0);
  ASSERT_LT(w[0], 0.0);
  DMat d(n, n);
  for (std::int64_t k = 0; k < n; ++k) d(k, k) = std::pow(std::max(w[k], 0.0) + eps, -0.25);
  const DMat ref = test::matmul(test::matmul(q, d), test::transposed(q));
  EXPECT_LE(test::max_abs_diff(root, ref), 1e-5 * test::max_abs(ref));
}

TEST(SymmetricEigenvectors, OrthonormalAndDescending) {
  const std::int64_t n = 10;
  const std::vector<float> g = test::random_floats(n * n, 7);
  std::vector<float> s(n * n), q(n * n);
  syrk_upper(Trans::kNo, 1.0f, matrix_view(g.data(), n, n), 0.0f, matrix_view(s.data(), n, n));
  symmetric_eigenvectors_descending(matrix_view(s.data(), n, n), matrix_view(q.data(), n, n));
  mirror_upper_to_lower(matrix_view(s.data(), n, n));
  const DMat qd = test::to_dmat(q, n, n);
  const DMat qtq = test::matmul(test::transposed(qd), qd);
  const DMat diag = test::matmul(test::matmul(test::transposed(qd), test::to_dmat(s, n, n)), qd);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(qtq(i, j), i == j ? 1.0 : 0.0, 1e-5);
      if (i != j) {
        EXPECT_NEAR(diag(i, j), 0.0, 1e-4 * diag(0, 0));
      }
    }
    if (i > 0) {
      EXPECT_GE(diag(i - 1, i - 1), diag(i, i));
    }
  }
}

TEST(OrthonormalizeColumns, GivesQOfQr) {
  const std::int64_t m = 15, n = 6;
  const std::vector<float> a = test::random_floats(m * n, 8);
  std::vector<float> q = a;
  orthonormalize_columns(matrix_view(q.data(), m, n));
  const DMat qd = test::to_dmat(q, m, n), ad = test::to_dmat(a, m, n);
  const DMat qtq = test::matmul(test::transposed(qd), qd);
  const DMat r = test::matmul(test::transposed(qd), ad);  // upper triangular when A = QR
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(qtq(i, j), i == j ? 1.0 : 0.0, 1e-5);
      if (i > j) {
        EXPECT_NEAR(r(i, j), 0.0, 1e-4);
      }
    }
  const DMat qr = test::matmul(qd, r);
  EXPECT_LE(test::max_abs_diff(a, qr), 1e-4);
}

TEST(Lapack, FailureBecomesCanzonaErrorNamingRoutine) {
  std::vector<double> a(9, 1.0), w(3);
  a[4] = std::nan("");
  try {
    symmetric_eigen(a, 3, w);
    FAIL() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LAPACKE_dsyevd"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3x3"), std::string::npos) << e.what();
  }
}

TEST(FrobeniusNorm, SameBitsForAnyLeadingDimensionAndMatchesDouble) {
  const std::int64_t rows = 13, cols = 29;
  const std::vector<float> a = test::random_floats(rows * cols, 9);
  std::vector<float> padded(rows * 40, 1e30f);
  copy(matrix_view(a.data(), rows, cols), MatrixView{padded.data(), rows, cols, 40});
  const double contiguous = frobenius_norm(matrix_view(a.data(), rows, cols));
  const double strided = frobenius_norm(ConstMatrixView(padded.data(), rows, cols, 40));
  EXPECT_EQ(std::memcmp(&contiguous, &strided, sizeof(double)), 0);
  EXPECT_NEAR(contiguous, test::frobenius(test::to_dmat(a, rows, cols)), 1e-12 * contiguous);
  std::vector<float> bad = a;
  bad[100] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite(frobenius_norm(bad)));
  const NonFinite found = find_non_finite(matrix_view(bad.data(), rows, cols));
  EXPECT_TRUE(found.found);
  EXPECT_EQ(found.row, 100 / cols);
  EXPECT_EQ(found.col, 100 % cols);
}

TEST(MatrixView, TransposeAndCheckView) {
  const std::vector<float> a = test::random_floats(35, 10);
  std::vector<float> t(35), back(35);
  transpose(matrix_view(a.data(), 5, 7), matrix_view(t.data(), 7, 5));
  EXPECT_EQ(t[3 * 5 + 2], a[2 * 7 + 3]);
  transpose(matrix_view(t.data(), 7, 5), matrix_view(back.data(), 5, 7));
  EXPECT_TRUE(test::same_bits(a, back));
  EXPECT_THROW(check_view(ConstMatrixView(a.data(), 5, 7, 6), "x"), UsageError);
  EXPECT_THROW(check_view(ConstMatrixView(nullptr, 5, 7, 7), "x"), UsageError);
  EXPECT_NO_THROW(check_view(ConstMatrixView(nullptr, 0, 7, 7), "x"));
}

}  // namespace
}  // namespace canzona::optim
