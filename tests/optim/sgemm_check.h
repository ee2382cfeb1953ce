// sgemm through the backend seam against a double triple loop (shared by the in-process test and
// the blas_core_probe child). Each element must satisfy the standard fp32 dot-product bound
// |c - ref| <= k u sum_p |a_ip b_pj| (u = 2^-24), and the relative Frobenius error must stay below
// 1e-6. Returns "" on success, else a description of the first failing case.
#pragma once

#include <cmath>
#include <sstream>
#include <string>

#include "canzona/optim/linalg.h"
#include "test_util.h"

namespace canzona::optim::test {

inline std::string check_sgemm_against_triple_loop() {
  struct Case {
    std::int64_t m, n, k;
    Trans ta, tb;
  };
  const Case cases[] = {{64, 96, 80, Trans::kNo, Trans::kNo},
                        {130, 70, 257, Trans::kNo, Trans::kYes},
                        {31, 200, 129, Trans::kYes, Trans::kNo},
                        {100, 33, 64, Trans::kYes, Trans::kYes},
                        {256, 384, 512, Trans::kNo, Trans::kNo}};
  std::uint32_t seed = 70;
  for (const Case& c : cases) {
    const std::int64_t ar = c.ta == Trans::kNo ? c.m : c.k, ac = c.ta == Trans::kNo ? c.k : c.m;
    const std::int64_t br = c.tb == Trans::kNo ? c.k : c.n, bc = c.tb == Trans::kNo ? c.n : c.k;
    const std::vector<float> a = random_floats(ar * ac, seed++);
    const std::vector<float> b = random_floats(br * bc, seed++);
    std::vector<float> out(c.m * c.n);
    gemm(c.ta, c.tb, 1.0f, matrix_view(a.data(), ar, ac), matrix_view(b.data(), br, bc), 0.0f,
         matrix_view(out.data(), c.m, c.n));
    auto av = [&](std::int64_t i, std::int64_t p) {
      return c.ta == Trans::kNo ? a[i * ac + p] : a[p * ac + i];
    };
    auto bv = [&](std::int64_t p, std::int64_t j) {
      return c.tb == Trans::kNo ? b[p * bc + j] : b[j * bc + p];
    };
    const double u = std::ldexp(1.0, -24);
    double err2 = 0, ref2 = 0;
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < c.m; ++i) {
      for (std::int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (std::int64_t p = 0; p < c.k; ++p) {
          ref += double(av(i, p)) * bv(p, j);
          mag += std::abs(double(av(i, p)) * bv(p, j));
        }
        const double err = std::abs(out[i * c.n + j] - ref);
        if (!(err <= c.k * u * mag)) ++bad;
        err2 += err * err;
        ref2 += ref * ref;
      }
    }
    const double rel = std::sqrt(err2 / ref2);
    if (bad > 0 || !(rel < 1e-6)) {
      std::ostringstream os;
      os << "sgemm " << c.m << "x" << c.n << "x" << c.k << ": " << bad
         << " elements outside the fp32 bound, relative Frobenius error " << rel;
      return os.str();
    }
  }
  return "";
}

}  // namespace canzona::optim::test
