// Plain reference helpers for the optimizer tests: double-precision matrices with triple-loop
// products, seeded random data and comparisons. Deliberately naive: the references these build
// share no code with the kernels under test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "canzona/optim/matrix.h"

namespace canzona::optim::test {

// Row-major double matrix.
struct DMat {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> v;

  DMat() = default;
  DMat(std::int64_t r, std::int64_t c, double fill = 0.0)
      : rows(r), cols(c), v(static_cast<std::size_t>(r * c), fill) {}
  double& operator()(std::int64_t r, std::int64_t c) { return v[r * cols + c]; }
  double operator()(std::int64_t r, std::int64_t c) const { return v[r * cols + c]; }
};

inline DMat identity(std::int64_t n) {
  DMat m(n, n);
  for (std::int64_t i = 0; i < n; ++i) m(i, i) = 1.0;
  return m;
}

inline DMat matmul(const DMat& a, const DMat& b) {
  DMat c(a.rows, b.cols);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t k = 0; k < a.cols; ++k)
      for (std::int64_t j = 0; j < b.cols; ++j) c(i, j) += a(i, k) * b(k, j);
  return c;
}

inline DMat transposed(const DMat& a) {
  DMat t(a.cols, a.rows);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j) t(j, i) = a(i, j);
  return t;
}

inline DMat to_dmat(ConstMatrixView m) {
  DMat d(m.rows, m.cols);
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) d(i, j) = m(i, j);
  return d;
}

inline DMat to_dmat(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  return to_dmat(matrix_view(v.data(), rows, cols));
}

inline double frobenius(const DMat& a) {
  double s = 0.0;
  for (double x : a.v) s += x * x;
  return std::sqrt(s);
}

// N(0, scale^2) floats from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = dist(gen);
  return out;
}

// max_ij |a_ij - b_ij|.
inline double max_abs_diff(const std::vector<float>& a, const DMat& b) {
  EXPECT_EQ(a.size(), b.v.size());
  double d = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.v.size(); ++i)
    d = std::max(d, std::abs(static_cast<double>(a[i]) - b.v[i]));
  return d;
}

inline double max_abs(const DMat& a) {
  double m = 0.0;
  for (double x : a.v) m = std::max(m, std::abs(x));
  return m;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace canzona::optim::test
