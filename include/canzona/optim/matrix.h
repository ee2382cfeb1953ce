// Dense matrix views for the optimizer kernels.
//
// Terms. A *view* borrows memory it does not own: `data` points at element (0, 0) of a row-major
// `rows x cols` matrix whose consecutive rows start `ld` (leading dimension, >= cols) floats apart.
// A contiguous matrix has ld == cols. Views are cheap values; pass them by value. A shape is
// `rows x cols` with both >= 0; an empty matrix (0 rows or 0 cols) is valid everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace canzona::optim {

// Mutable view: element (r, c) is data[r * ld + c].
struct MatrixView {
  float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // >= cols

  float& operator()(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  float* row(std::int64_t r) const { return data + r * ld; }
  std::int64_t numel() const { return rows * cols; }
  bool contiguous() const { return ld == cols || rows <= 1; }
};

// Read-only view with the same layout; every MatrixView converts to it.
struct ConstMatrixView {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // >= cols

  ConstMatrixView() = default;
  ConstMatrixView(const float* d, std::int64_t r, std::int64_t c, std::int64_t l)
      : data(d), rows(r), cols(c), ld(l) {}
  ConstMatrixView(MatrixView v) : data(v.data), rows(v.rows), cols(v.cols), ld(v.ld) {}

  const float& operator()(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  const float* row(std::int64_t r) const { return data + r * ld; }
  std::int64_t numel() const { return rows * cols; }
  bool contiguous() const { return ld == cols || rows <= 1; }
};

// A contiguous rows x cols view of `data` (ld == cols).
inline MatrixView matrix_view(float* data, std::int64_t rows, std::int64_t cols) {
  return MatrixView{data, rows, cols, cols};
}
inline ConstMatrixView matrix_view(const float* data, std::int64_t rows, std::int64_t cols) {
  return ConstMatrixView(data, rows, cols, cols);
}

// "rows x cols", for error messages.
std::string shape_string(std::int64_t rows, std::int64_t cols);

// Throws UsageError unless rows, cols >= 0, ld >= max(cols, 1) and data != nullptr for a
// non-empty view. `what` names the view in the message.
void check_view(ConstMatrixView view, const char* what);

// dst = src elementwise (shapes must match; layouts may differ).
void copy(ConstMatrixView src, MatrixView dst);
// dst = src^T (src rows x cols, dst cols x rows).
void transpose(ConstMatrixView src, MatrixView dst);
// Copies the upper triangle of square `a` onto its lower triangle, making it exactly symmetric.
void mirror_upper_to_lower(MatrixView a);

// Frobenius norm, sqrt(sum of squares) accumulated in double in an order fixed by the shape
// alone (rows in order; 8 partial sums, element (r, c) going to sum c % 8; the sums combined in a
// fixed tree). Same bits for the same values whatever the leading dimension, thread count or
// process. Non-finite when any element is NaN or Inf (finite floats cannot overflow the double
// sum).
double frobenius_norm(ConstMatrixView a);
// Same, for a flat span.
double frobenius_norm(std::span<const float> a);

// Position and value of the first non-finite element of `a` in row-major order; found == false
// when every element is finite.
struct NonFinite {
  bool found = false;
  std::int64_t row = 0;
  std::int64_t col = 0;
  float value = 0.0f;
};
NonFinite find_non_finite(ConstMatrixView a);

}  // namespace canzona::optim
