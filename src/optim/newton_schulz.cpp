// Newton–Schulz orthogonalisation (muon.h). Works on the wide orientation X (s x l, s <= l).
#include <algorithm>
#include <array>

#include "canzona/common/error.h"
#include "canzona/optim/linalg.h"
#include "canzona/optim/muon.h"
#include "scratch.h"

namespace canzona::optim {
namespace {

constexpr std::array<NsTriple, 1> kSimple = {{{3.4445f, -4.7750f, 2.0315f}}};
constexpr std::array<NsTriple, 5> kQuintic = {{{4.0848f, -6.8946f, 2.9270f},
                                               {3.9505f, -6.3029f, 2.6377f},
                                               {3.7418f, -5.5913f, 2.3037f},
                                               {2.8769f, -3.1427f, 1.2046f},
                                               {2.8366f, -3.0525f, 1.2012f}}};
constexpr std::array<NsTriple, 8> kPolarExpress = {{{8.2051f, -22.9019f, 16.4607f},
                                                    {4.0664f, -2.8612f, 0.5184f},
                                                    {3.9096f, -2.8234f, 0.5250f},
                                                    {3.2856f, -2.4153f, 0.4853f},
                                                    {2.2779f, -1.6198f, 0.3985f},
                                                    {1.8726f, -1.2307f, 0.3585f},
                                                    {1.8564f, -1.2132f, 0.3568f},
                                                    {1.8750f, -1.2500f, 0.3750f}}};

}  // namespace

std::span<const NsTriple> ns_coefficients(NsCoefficients set) {
  switch (set) {
    case NsCoefficients::kSimple:
      return kSimple;
    case NsCoefficients::kQuintic:
      return kQuintic;
    case NsCoefficients::kPolarExpress:
      return kPolarExpress;
  }
  throw Error("ns_coefficients: invalid coefficient set");
}

double newton_schulz_flops(std::int64_t rows, std::int64_t cols, int steps) {
  const double s = static_cast<double>(std::min(rows, cols));
  const double l = static_cast<double>(std::max(rows, cols));
  return steps * (4.0 * s * s * l + 2.0 * s * s * s);
}

double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols, int steps) {
  const double s = static_cast<double>(std::min(rows, cols));
  const double l = static_cast<double>(std::max(rows, cols));
  return steps * (3.0 * s * s * l + s * s * s);
}

void newton_schulz(ConstMatrixView u, MatrixView out, const NewtonSchulzOptions& options) {
  check_view(u, "newton_schulz input");
  check_view(out, "newton_schulz output");
  CANZONA_REQUIRE(u.rows == out.rows && u.cols == out.cols, "newton_schulz: input ",
                  shape_string(u.rows, u.cols), " vs output ", shape_string(out.rows, out.cols));
  CANZONA_REQUIRE(options.steps >= 0, "newton_schulz: steps must be >= 0, got ", options.steps);
  CANZONA_REQUIRE(options.eps >= 0.0, "newton_schulz: eps must be >= 0, got ", options.eps);
  if (u.numel() == 0) return;

  const bool tall = u.rows > u.cols;
  const std::int64_t s = std::min(u.rows, u.cols), l = std::max(u.rows, u.cols);
  detail::Scratch scratch;
  MatrixView x = scratch.matrix(s, l);  // iterate, wide orientation
  MatrixView y = scratch.matrix(s, l);  // next iterate
  MatrixView a = scratch.matrix(s, s);  // X X^T
  MatrixView b = scratch.matrix(s, s);  // a I + b A + c A A

  const double norm = frobenius_norm(u);
  if (tall) {
    transpose(u, x);
  } else {
    copy(u, x);
  }
  if (norm == 0.0) {  // NS(0) = 0; avoids 0 / 0 when eps == 0
    for (std::int64_t r = 0; r < s; ++r) std::fill_n(x.row(r), l, 0.0f);
  } else {
    const float denom = static_cast<float>(norm + options.eps);
    for (std::int64_t r = 0; r < s; ++r) {
      float* row = x.row(r);
      for (std::int64_t j = 0; j < l; ++j) row[j] /= denom;
    }
  }

  const std::span<const NsTriple> set = ns_coefficients(options.coefficients);
  for (int i = 0; i < options.steps; ++i) {
    const NsTriple t = set[std::min<std::size_t>(static_cast<std::size_t>(i), set.size() - 1)];
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

  if (tall) {
    transpose(x, out);
  } else {
    copy(x, out);
  }
}

}  // namespace canzona::optim
