#include "canzona/optim/matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "canzona/common/error.h"

namespace canzona::optim {
namespace {

constexpr std::int64_t kTile = 32;  // transpose tile: 32 x 32 floats = 4 KiB

void check_same_shape(ConstMatrixView a, ConstMatrixView b, const char* op) {
  if (a.rows != b.rows || a.cols != b.cols)
    throw UsageError(str(op, ": shape mismatch ", shape_string(a.rows, a.cols), " vs ",
                         shape_string(b.rows, b.cols)));
}

// Adds the squares of row[0, n) to the 8 lane sums, element j going to lane j % 8.
inline void accumulate_squares(const float* row, std::int64_t n, double acc[8]) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const double x = row[j + k];
      acc[k] += x * x;
    }
  }
  for (int k = 0; j < n; ++j, ++k) {
    const double x = row[j];
    acc[k] += x * x;
  }
}

double combine(const double acc[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

std::string shape_string(std::int64_t rows, std::int64_t cols) {
  return str(rows, "x", cols);
}

void check_view(ConstMatrixView view, const char* what) {
  if (view.rows < 0 || view.cols < 0)
    throw UsageError(str(what, ": negative shape ", shape_string(view.rows, view.cols)));
  if (view.ld < std::max<std::int64_t>(view.cols, 1))
    throw UsageError(str(what, ": leading dimension ", view.ld, " < cols ", view.cols));
  if (view.data == nullptr && view.numel() > 0)
    throw UsageError(
        str(what, ": null data for a ", shape_string(view.rows, view.cols), " matrix"));
}

void copy(ConstMatrixView src, MatrixView dst) {
  check_same_shape(src, dst, "copy");
  for (std::int64_t r = 0; r < src.rows; ++r) std::copy_n(src.row(r), src.cols, dst.row(r));
}

void transpose(ConstMatrixView src, MatrixView dst) {
  if (src.rows != dst.cols || src.cols != dst.rows)
    throw UsageError(str("transpose: shape mismatch ", shape_string(src.rows, src.cols), " -> ",
                         shape_string(dst.rows, dst.cols)));
  for (std::int64_t r0 = 0; r0 < src.rows; r0 += kTile) {
    for (std::int64_t c0 = 0; c0 < src.cols; c0 += kTile) {
      const std::int64_t r1 = std::min(src.rows, r0 + kTile);
      const std::int64_t c1 = std::min(src.cols, c0 + kTile);
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t r = r0; r < r1; ++r) dst(c, r) = src(r, c);
    }
  }
}

void mirror_upper_to_lower(MatrixView a) {
  if (a.rows != a.cols)
    throw UsageError(str("mirror_upper_to_lower: not square ", shape_string(a.rows, a.cols)));
  const std::int64_t n = a.rows;
  for (std::int64_t r0 = 0; r0 < n; r0 += kTile) {
    for (std::int64_t c0 = 0; c0 <= r0; c0 += kTile) {
      const std::int64_t r1 = std::min(n, r0 + kTile);
      const std::int64_t c1 = std::min(n, c0 + kTile);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < std::min(c1, r); ++c) a(r, c) = a(c, r);
    }
  }
}

double frobenius_norm(ConstMatrixView a) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::int64_t r = 0; r < a.rows; ++r) accumulate_squares(a.row(r), a.cols, acc);
  return std::sqrt(combine(acc));
}

double frobenius_norm(std::span<const float> a) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  accumulate_squares(a.data(), static_cast<std::int64_t>(a.size()), acc);
  return std::sqrt(combine(acc));
}

NonFinite find_non_finite(ConstMatrixView a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* row = a.row(r);
    // Fast pass without an early exit so it vectorises: an element is NaN or Inf iff its
    // exponent bits are all ones.
    std::uint32_t all_ones = 0;
    for (std::int64_t c = 0; c < a.cols; ++c) {
      std::uint32_t bits;
      std::memcpy(&bits, row + c, sizeof bits);
      all_ones |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (all_ones == 0) continue;
    for (std::int64_t c = 0; c < a.cols; ++c)
      if (!std::isfinite(row[c])) return NonFinite{true, r, c, row[c]};
  }
  return NonFinite{};
}

}  // namespace canzona::optim
