// The backend seam: the only dense linear algebra the optimizers use, implemented on CBLAS and
// LAPACKE (OpenBLAS). A GPU backend replaces src/optim/linalg.cpp behind these signatures.
//
// Contract for every function: views are row-major (matrix.h); shapes are checked and a mismatch
// throws Error naming the operation and both shapes; a LAPACK `info` != 0 throws Error naming the
// routine, the matrix size and the code. Results are deterministic for a fixed BLAS core and
// thread count: same inputs -> same bits (docs/design.md section 5; run with one BLAS thread).
#pragma once

#include <cstdint>
#include <span>

#include "canzona/optim/matrix.h"

namespace canzona::optim {

enum class Trans { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C (sgemm). op(X) is X or X^T per `ta`/`tb`. C must not
// alias A or B. With beta == 0, C's old contents are ignored (NaN in C does not propagate).
void gemm(Trans ta, Trans tb, float alpha, ConstMatrixView a, ConstMatrixView b, float beta,
          MatrixView c);

// Upper triangle of C = alpha * A * A^T + beta * C (ta == kNo) or alpha * A^T * A + beta * C
// (ta == kYes) (ssyrk). C is square; its strictly lower triangle is not touched.
void syrk_upper(Trans ta, float alpha, ConstMatrixView a, float beta, MatrixView c);

// C = alpha * S * B + beta * C where S is symmetric and only its upper triangle is read (ssymm,
// left side).
void symm_upper_left(float alpha, ConstMatrixView s, ConstMatrixView b, float beta, MatrixView c);

// Symmetric eigendecomposition in double precision (dsyevd). `a` is n x n row-major (ld n); only
// its upper triangle is read. On return w[k] holds the eigenvalues in ascending order and row k of
// `a` the unit eigenvector for w[k], so S = sum_k w[k] a_k a_k^T. Throws Error if LAPACK does not
// converge.
void symmetric_eigen(std::span<double> a, std::int64_t n, std::span<double> w);

// out = (S+ + eps I)^exponent for symmetric S (n x n, only the upper triangle read), where S+ is
// S with negative eigenvalues (rounding noise of a PSD statistic) clamped to 0. Computed in
// double: eigendecomposition (dsyevd), then Z^T diag((max(w, 0) + eps)^exponent) Z (as T^T T by
// dsyrk), rounded to float; the result is exactly symmetric. Shampoo's inverse 4th root is exponent
// -0.25. Throws Error when eps <= 0 and exponent < 0 leaves a zero eigenvalue unboundable, or when
// LAPACK fails.
void symmetric_power(ConstMatrixView s, double exponent, double eps, MatrixView out);

// Columns of q (n x n) = unit eigenvectors of symmetric S (only the upper triangle read) in
// descending eigenvalue order (SOAP's eigenbasis; eigh in double, rounded to float).
void symmetric_eigenvectors_descending(ConstMatrixView s, MatrixView q);

// Replaces the columns of `a` (m x n, m >= n, full column rank expected) by the orthonormal Q of
// its thin Householder QR factorisation a = Q R (sgelqf + sorglq on the transposed layout, so no
// copies). Throws Error on a LAPACK failure.
void orthonormalize_columns(MatrixView a);

}  // namespace canzona::optim
