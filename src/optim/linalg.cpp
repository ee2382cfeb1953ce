// CBLAS / LAPACKE implementation of the backend seam (linalg.h). Row-major views are passed to
// CBLAS as CblasRowMajor. LAPACK routines are called in column-major form on the row-major
// buffer (a row-major matrix is its transpose in column-major), which avoids the transposition
// copies LAPACKE makes for LAPACK_ROW_MAJOR.
#include "canzona/optim/linalg.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "canzona/common/error.h"
#include "scratch.h"

namespace canzona::optim {
namespace {

int blas_int(std::int64_t v, const char* op) {
  if (v < 0 || v > INT_MAX) throw Error(str(op, ": dimension ", v, " out of BLAS int range"));
  return static_cast<int>(v);
}

CBLAS_TRANSPOSE to_cblas(Trans t) {
  return t == Trans::kYes ? CblasTrans : CblasNoTrans;
}

std::int64_t op_rows(ConstMatrixView a, Trans t) {
  return t == Trans::kYes ? a.cols : a.rows;
}
std::int64_t op_cols(ConstMatrixView a, Trans t) {
  return t == Trans::kYes ? a.rows : a.cols;
}

// LAPACK info != 0 -> Error (the boundary of style.md rule 5).
void check_info(lapack_int info, const char* routine, std::int64_t m, std::int64_t n) {
  if (info == 0) return;
  if (info < 0)
    throw Error(str(routine, " on a ", shape_string(m, n), " matrix: argument ", -info,
                    " is invalid (info ", info, ")"));
  throw Error(
      str(routine, " on a ", shape_string(m, n), " matrix failed to converge (info ", info, ")"));
}

}  // namespace

void gemm(Trans ta, Trans tb, float alpha, ConstMatrixView a, ConstMatrixView b, float beta,
          MatrixView c) {
  const std::int64_t m = op_rows(a, ta), k = op_cols(a, ta);
  const std::int64_t kb = op_rows(b, tb), n = op_cols(b, tb);
  if (k != kb || c.rows != m || c.cols != n)
    throw Error(str("gemm: shapes op(A) ", shape_string(m, k), " * op(B) ", shape_string(kb, n),
                    " -> C ", shape_string(c.rows, c.cols)));
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < n; ++j) c(r, j) = beta == 0.0f ? 0.0f : beta * c(r, j);
    return;
  }
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), blas_int(m, "gemm"), blas_int(n, "gemm"),
              blas_int(k, "gemm"), alpha, a.data, blas_int(a.ld, "gemm"), b.data,
              blas_int(b.ld, "gemm"), beta, c.data, blas_int(c.ld, "gemm"));
}

void syrk_upper(Trans ta, float alpha, ConstMatrixView a, float beta, MatrixView c) {
  const std::int64_t n = op_rows(a, ta), k = op_cols(a, ta);
  if (c.rows != n || c.cols != n)
    throw Error(str("syrk: op(A) ", shape_string(n, k), " -> C ", shape_string(c.rows, c.cols)));
  if (n == 0) return;
  if (k == 0) {
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t j = r; j < n; ++j) c(r, j) = beta == 0.0f ? 0.0f : beta * c(r, j);
    return;
  }
  cblas_ssyrk(CblasRowMajor, CblasUpper, to_cblas(ta), blas_int(n, "syrk"), blas_int(k, "syrk"),
              alpha, a.data, blas_int(a.ld, "syrk"), beta, c.data, blas_int(c.ld, "syrk"));
}

void symm_upper_left(float alpha, ConstMatrixView s, ConstMatrixView b, float beta, MatrixView c) {
  if (s.rows != s.cols || b.rows != s.rows || c.rows != b.rows || c.cols != b.cols)
    throw Error(str("symm: S ", shape_string(s.rows, s.cols), " * B ", shape_string(b.rows, b.cols),
                    " -> C ", shape_string(c.rows, c.cols)));
  if (c.rows == 0 || c.cols == 0) return;
  cblas_ssymm(CblasRowMajor, CblasLeft, CblasUpper, blas_int(c.rows, "symm"),
              blas_int(c.cols, "symm"), alpha, s.data, blas_int(s.ld, "symm"), b.data,
              blas_int(b.ld, "symm"), beta, c.data, blas_int(c.ld, "symm"));
}

void symmetric_eigen(std::span<double> a, std::int64_t n, std::span<double> w) {
  if (n < 0 || static_cast<std::int64_t>(a.size()) < n * n ||
      static_cast<std::int64_t>(w.size()) < n)
    throw Error(str("symmetric_eigen: buffers too small for n = ", n));
  if (n == 0) return;
  // Row-major upper triangle == column-major lower triangle; column-major eigenvectors (columns)
  // are rows of the row-major buffer.
  const lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', blas_int(n, "dsyevd"),
                                         a.data(), blas_int(n, "dsyevd"), w.data());
  check_info(info, "LAPACKE_dsyevd", n, n);
}

namespace {

// Copies the upper triangle of float S into a double n x n buffer and decomposes it: on return
// w ascending and row k of z is the eigenvector of w[k].
void eigen_of_upper(ConstMatrixView s, double* z, double* w) {
  const std::int64_t n = s.rows;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i; j < n; ++j) z[i * n + j] = s(i, j);
  symmetric_eigen(std::span<double>(z, static_cast<std::size_t>(n * n)), n,
                  std::span<double>(w, static_cast<std::size_t>(n)));
}

void check_square(ConstMatrixView s, ConstMatrixView out, const char* op) {
  if (s.rows != s.cols || out.rows != s.rows || out.cols != s.cols)
    throw Error(
        str(op, ": S ", shape_string(s.rows, s.cols), " -> ", shape_string(out.rows, out.cols)));
}

}  // namespace

void symmetric_power(ConstMatrixView s, double exponent, double eps, MatrixView out) {
  check_square(s, out, "symmetric_power");
  const std::int64_t n = s.rows;
  if (n == 0) return;
  detail::Scratch scratch;
  const std::size_t nn = static_cast<std::size_t>(n * n);
  double* z = scratch.doubles(nn);
  double* t = scratch.doubles(nn);
  double* root = scratch.doubles(nn);
  double* w = scratch.doubles(static_cast<std::size_t>(n));
  eigen_of_upper(s, z, w);
  for (std::int64_t k = 0; k < n; ++k) {
    const double lambda = std::max(w[k], 0.0) + eps;
    if (!(lambda > 0.0) && exponent < 0.0)
      throw Error(str("symmetric_power: eigenvalue ", w[k], " + eps ", eps, " of a ",
                      shape_string(n, n), " matrix has no power ", exponent));
    // S^p = Z^T diag(f) Z = T^T T with T = diag(sqrt(f)) Z: one dsyrk, half a dgemm's flops.
    const double root_f = std::sqrt(std::pow(lambda, exponent));
    for (std::int64_t j = 0; j < n; ++j) t[k * n + j] = root_f * z[k * n + j];
  }
  const int ni = blas_int(n, "dsyrk");
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, ni, ni, 1.0, t, ni, 0.0, root, ni);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i; j < n; ++j) {
      const float v = static_cast<float>(root[i * n + j]);
      out(i, j) = v;
      out(j, i) = v;
    }
}

void symmetric_eigenvectors_descending(ConstMatrixView s, MatrixView q) {
  check_square(s, q, "symmetric_eigenvectors_descending");
  const std::int64_t n = s.rows;
  if (n == 0) return;
  detail::Scratch scratch;
  double* z = scratch.doubles(static_cast<std::size_t>(n * n));
  double* w = scratch.doubles(static_cast<std::size_t>(n));
  eigen_of_upper(s, z, w);
  for (std::int64_t j = 0; j < n; ++j) {
    const double* zj = z + (n - 1 - j) * n;
    for (std::int64_t i = 0; i < n; ++i) q(i, j) = static_cast<float>(zj[i]);
  }
}

void orthonormalize_columns(MatrixView a) {
  const std::int64_t m = a.rows, n = a.cols;
  if (m < n)
    throw Error(str("orthonormalize_columns: needs rows >= cols, got ", shape_string(m, n)));
  if (n == 0) return;
  // In column-major the buffer is A^T (n x m, ld = a.ld); A = QR  <=>  A^T = R^T Q^T = L Q'.
  detail::Scratch scratch;
  float* tau = scratch.floats(static_cast<std::size_t>(n));
  const int nn = blas_int(n, "sgelqf"), mm = blas_int(m, "sgelqf"), ld = blas_int(a.ld, "sgelqf");
  check_info(LAPACKE_sgelqf(LAPACK_COL_MAJOR, nn, mm, a.data, ld, tau), "LAPACKE_sgelqf", m, n);
  check_info(LAPACKE_sorglq(LAPACK_COL_MAJOR, nn, mm, nn, a.data, ld, tau), "LAPACKE_sorglq", m, n);
}

}  // namespace canzona::optim
