// A fingerprint of the optimizers' results on fixed data (shared by the in-process test and the
// blas_core_probe child): three steps of each registered optimizer, FNV-1a over the parameter
// bytes. Equal strings mean bit-identical parameters.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "canzona/optim/optimizer.h"
#include "test_util.h"

namespace canzona::optim::test {

inline std::string optimizer_digest() {
  std::string out;
  const std::int64_t rows = 48, cols = 80;
  for (const std::string& name : optimizer_names()) {
    auto opt = create_optimizer(name, ParamInfo{name, rows, cols});
    std::vector<float> w = random_floats(rows * cols, 90, 0.1f);
    for (int t = 0; t < 3; ++t) {
      const std::vector<float> g = random_floats(rows * cols, 91 + t, 0.01f);
      opt->step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
    }
    std::uint64_t h = 1469598103934665603ull;
    const auto* bytes = reinterpret_cast<const unsigned char*>(w.data());
    for (std::size_t i = 0; i < w.size() * sizeof(float); ++i)
      h = (h ^ bytes[i]) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    out += name + "=" + hex + " ";
  }
  return out;
}

}  // namespace canzona::optim::test
