// NS(U) exactly as docs/references.md states it, in double, on the published coefficient tables
// (published.h): the plain-loop reference of muon_test.cpp and ns_forms_test.cpp.
#pragma once

#include "canzona/optim/muon.h"
#include "published.h"
#include "test_util.h"

namespace canzona::optim::test {

inline DMat reference_newton_schulz(DMat u, const NewtonSchulzOptions& o) {
  const bool tall = u.rows > u.cols;
  if (tall) u = transposed(u);
  const double norm = frobenius(u);
  DMat x = u;
  for (double& e : x.v) e /= (norm + o.eps);
  const auto set = published::table(o.coefficients);
  for (int i = 0; i < o.steps; ++i) {
    const published::Triple t = published::triple(set, i);
    const DMat a = matmul(x, transposed(x));
    const DMat aa = matmul(a, a);
    DMat b(a.rows, a.cols);
    for (std::size_t k = 0; k < b.v.size(); ++k) b.v[k] = t.b * a.v[k] + t.c * aa.v[k];
    const DMat bx = matmul(b, x);
    for (std::size_t k = 0; k < x.v.size(); ++k) x.v[k] = t.a * x.v[k] + bx.v[k];
  }
  return tall ? transposed(x) : x;
}

}  // namespace canzona::optim::test
