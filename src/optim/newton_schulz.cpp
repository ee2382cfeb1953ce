// Newton–Schulz orthogonalisation (muon.h). Works on the wide orientation X (s x l, s <= l): the
// fp32 standard iteration on OpenBLAS as it always ran, and the other forms (bf16 products, the
// Gram iteration) on the products of products.h.
#include <algorithm>
#include <array>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/optim/linalg.h"
#include "canzona/optim/muon.h"
#include "products.h"
#include "scratch.h"

namespace canzona::optim {
namespace {

using detail::Operand;
using detail::ProductPath;

NsTriple triple(std::span<const NsTriple> set, int i) {
  return set[std::min<std::size_t>(static_cast<std::size_t>(i), set.size() - 1)];
}

// x = u (or u^T when tall) / (||u||_F + eps); 0 when u is 0 (avoids 0 / 0 when eps == 0).
void normalised_wide(ConstMatrixView u, MatrixView x, double eps) {
  const double norm = frobenius_norm(u);
  if (u.rows > u.cols) {
    transpose(u, x);
  } else {
    copy(u, x);
  }
  if (norm == 0.0) {
    for (std::int64_t r = 0; r < x.rows; ++r) std::fill_n(x.row(r), x.cols, 0.0f);
    return;
  }
  const float denom = static_cast<float>(norm + eps);
  for (std::int64_t r = 0; r < x.rows; ++r) {
    float* row = x.row(r);
    for (std::int64_t j = 0; j < x.cols; ++j) row[j] /= denom;
  }
}

// The fp32 standard iteration: every product on OpenBLAS, a I folded into B'. Its bits are those
// of every fp32 run since the start; keep them.
void standard_f32(MatrixView& x, MatrixView& y, std::span<const NsTriple> set, int steps,
                  detail::Scratch& scratch) {
  const std::int64_t s = x.rows;
  MatrixView a = scratch.matrix(s, s);  // X X^T
  MatrixView b = scratch.matrix(s, s);  // a I + b A + c A A
  for (int i = 0; i < steps; ++i) {
    const NsTriple t = triple(set, i);
    syrk_upper(Trans::kNo, 1.0f, x, 0.0f, a);
    mirror_upper_to_lower(a);
    // A is symmetric, so A A = A A^T: a second symmetric rank-k product (half of gemm's s^3).
    syrk_upper(Trans::kNo, t.c, a, 0.0f, b);
    mirror_upper_to_lower(b);
    for (std::int64_t r = 0; r < s; ++r) {
      float* brow = b.row(r);
      const float* arow = a.row(r);
      for (std::int64_t j = 0; j < s; ++j) brow[j] += t.b * arow[j];
      brow[r] += t.a;
    }
    gemm(Trans::kNo, Trans::kNo, 1.0f, b, x, 0.0f, y);
    std::swap(x, y);
  }
}

// dst = alpha * p + beta * q elementwise (fp32, rounded as written).
void combine(MatrixView dst, float alpha, ConstMatrixView p, float beta, ConstMatrixView q) {
  for (std::int64_t r = 0; r < dst.rows; ++r) {
    float* d = dst.row(r);
    const float* pr = p.row(r);
    const float* qr = q.row(r);
    for (std::int64_t j = 0; j < dst.cols; ++j) d[j] = alpha * pr[j] + beta * qr[j];
  }
}

// The standard iteration on the products of `path`: A = X X^T, B' = b A + c A A and X = a X + B' X,
// each matrix rounded to the operand precision once before it enters a product and that value used
// in every term (a X + B' X with one X: rounding X only inside the product would leave B' times
// X's rounding error, about 2.4x the error of torch's bf16 loop, in every iteration); a X added in
// fp32, not folded into B' (whose rounding would round a's diagonal too).
void standard_products(ProductPath path, MatrixView& x, MatrixView& y,
                       std::span<const NsTriple> set, int steps, detail::Scratch& scratch) {
  const std::int64_t s = x.rows, l = x.cols;
  MatrixView a = scratch.matrix(s, s);   // X X^T
  MatrixView aa = scratch.matrix(s, s);  // A A, then B'
  const auto storage = [&](std::int64_t rows, std::int64_t cols) -> void* {
    return scratch.floats(detail::rounded_operand_bytes(path, rows, cols) / sizeof(float));
  };
  void* x_store = storage(s, l);
  void* a_store = storage(s, s);
  void* b_store = storage(s, s);
  for (int i = 0; i < steps; ++i) {
    const NsTriple t = triple(set, i);
    detail::round_in_place(path, x);
    const Operand xo = detail::rounded_operand(path, x, x_store);
    detail::gram_upper(path, xo, a);
    mirror_upper_to_lower(a);
    detail::round_in_place(path, a);
    const Operand ao = detail::rounded_operand(path, a, a_store);
    detail::square_upper(path, ao, aa);
    mirror_upper_to_lower(aa);
    combine(aa, t.b, a, t.c, aa);
    detail::round_in_place(path, aa);
    const Operand bo = detail::rounded_operand(path, aa, b_store);
    detail::product(path, bo, xo, y);
    combine(y, t.a, x, 1.0f, y);
    std::swap(x, y);
  }
}

// The Gram iteration (muon.h; Dao-AILab's Gram Newton–Schulz): R = X X^T, and per iteration
// Z = b R + c R R, Q = Z + a I after a (re)start or Q = Q Z + a Q, and, unless the next iteration
// is the last or a restart, R = Z (R Z + a R) + a (R Z + a R); a restart sets X = Q X, R = X X^T;
// at the end X = Q X. Every s x s matrix is a polynomial in the last R computed from X, so every
// s x s product is symmetric: one triangle, mirrored. Operands rounded once, as above.
void gram_products(ProductPath path, MatrixView& x, MatrixView& y, std::span<const NsTriple> set,
                   int steps, const std::vector<int>& restarts, detail::Scratch& scratch) {
  const std::int64_t s = x.rows, l = x.cols;
  MatrixView r = scratch.matrix(s, s);   // R
  MatrixView q = scratch.matrix(s, s);   // Q
  MatrixView z = scratch.matrix(s, s);   // R R, then Z
  MatrixView rz = scratch.matrix(s, s);  // R Z + a R
  MatrixView t1 = scratch.matrix(s, s);  // a product before it is combined
  const auto storage = [&](std::int64_t rows, std::int64_t cols) -> void* {
    return scratch.floats(detail::rounded_operand_bytes(path, rows, cols) / sizeof(float));
  };
  void* x_store = storage(s, l);
  void* r_store = storage(s, s);
  void* q_store = storage(s, s);
  void* z_store = storage(s, s);
  void* rz_store = storage(s, s);
  const auto restarts_at = [&](int i) {
    return std::find(restarts.begin(), restarts.end(), i) != restarts.end();
  };
  // Rounds m and returns its operand.
  const auto operand = [&](MatrixView m, void* store) {
    detail::round_in_place(path, m);
    return detail::rounded_operand(path, m, store);
  };
  // R = X X^T of the current X, whose operand is returned.
  const auto gram = [&] {
    const Operand xo = operand(x, x_store);
    detail::gram_upper(path, xo, r);
    mirror_upper_to_lower(r);
    return xo;
  };

  Operand xo = gram();
  bool fresh = true;
  for (int i = 0; i < steps; ++i) {
    const NsTriple t = triple(set, i);
    if (i > 0 && restarts_at(i)) {
      detail::product(path, operand(q, q_store), xo, y);  // X = Q X
      std::swap(x, y);
      xo = gram();
      fresh = true;
    }
    const Operand ro = operand(r, r_store);
    detail::square_upper(path, ro, z);
    mirror_upper_to_lower(z);
    combine(z, t.b, r, t.c, z);  // Z = b R + c R R
    const Operand zo = operand(z, z_store);
    if (fresh) {
      copy(z, q);
      for (std::int64_t d = 0; d < s; ++d) q(d, d) += t.a;  // Q = Z + a I
      fresh = false;
    } else {
      detail::product_upper(path, operand(q, q_store), zo, t1);
      mirror_upper_to_lower(t1);
      combine(q, 1.0f, t1, t.a, q);  // Q = Q Z + a Q
    }
    if (i + 1 < steps && !restarts_at(i + 1)) {
      detail::product_upper(path, ro, zo, t1);
      mirror_upper_to_lower(t1);
      combine(rz, 1.0f, t1, t.a, r);  // RZ = R Z + a R
      detail::product_upper(path, zo, operand(rz, rz_store), t1);
      mirror_upper_to_lower(t1);
      combine(r, 1.0f, t1, t.a, rz);  // R = Z RZ + a RZ
    }
  }
  detail::product(path, operand(q, q_store), xo, y);  // X = Q X
  std::swap(x, y);
}

void check_shapes(ConstMatrixView u, MatrixView out, const NewtonSchulzOptions& options) {
  check_view(u, "newton_schulz input");
  check_view(out, "newton_schulz output");
  CANZONA_REQUIRE(u.rows == out.rows && u.cols == out.cols, "newton_schulz: input ",
                  shape_string(u.rows, u.cols), " vs output ", shape_string(out.rows, out.cols));
  CANZONA_REQUIRE(options.steps >= 0, "newton_schulz: steps must be >= 0, got ", options.steps);
  CANZONA_REQUIRE(options.eps >= 0.0, "newton_schulz: eps must be >= 0, got ", options.eps);
}

}  // namespace

namespace detail {

void newton_schulz_on(ProductPath path, ConstMatrixView u, MatrixView out,
                      const NewtonSchulzOptions& options) {
  check_shapes(u, out, options);
  if (u.numel() == 0) return;
  const std::int64_t s = std::min(u.rows, u.cols), l = std::max(u.rows, u.cols);
  Scratch scratch;
  MatrixView x = scratch.matrix(s, l);  // iterate, wide orientation
  MatrixView y = scratch.matrix(s, l);  // next iterate
  normalised_wide(u, x, options.eps);
  const std::span<const NsTriple> set = ns_coefficients(options.coefficients);
  if (uses_gram(u.rows, u.cols, options)) {
    gram_products(path, x, y, set, options.steps, gram_restarts(options), scratch);
  } else if (path == ProductPath::kF32) {
    standard_f32(x, y, set, options.steps, scratch);
  } else {
    standard_products(path, x, y, set, options.steps, scratch);
  }
  if (u.rows > u.cols) {
    transpose(x, out);
  } else {
    copy(x, out);
  }
}

}  // namespace detail

void newton_schulz(ConstMatrixView u, MatrixView out, const NewtonSchulzOptions& options) {
  detail::newton_schulz_on(detail::product_path(options.dtype), u, out, options);
}

void newton_schulz_batch(std::span<const ConstMatrixView> u, std::span<const MatrixView> out,
                         const NewtonSchulzOptions& options) {
  CANZONA_REQUIRE(u.size() == out.size(), "newton_schulz_batch: ", u.size(), " inputs vs ",
                  out.size(), " outputs");
  if (u.empty()) return;
  for (std::size_t k = 0; k < u.size(); ++k)
    CANZONA_REQUIRE(u[k].rows == u[0].rows && u[k].cols == u[0].cols,
                    "newton_schulz_batch: matrix ", k, " is ", shape_string(u[k].rows, u[k].cols),
                    ", matrix 0 ", shape_string(u[0].rows, u[0].cols));
  const ProductPath path = detail::product_path(options.dtype);
  for (std::size_t k = 0; k < u.size(); ++k) detail::newton_schulz_on(path, u[k], out[k], options);
}

}  // namespace canzona::optim
