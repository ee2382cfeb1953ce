// Per-thread scratch memory for the kernels (internal).
//
// A `Scratch` is a frame on this thread's arena: memory taken through it stays valid until the
// frame is destroyed, and frames nest like a stack. The arena keeps its high-water mark, so after
// the largest matrix has been seen once no step allocates (style.md rule 4: no allocation hidden
// in hot loops). Memory is 64-byte aligned and not initialised.
#pragma once

#include <cstddef>
#include <cstdint>

#include "canzona/optim/matrix.h"

namespace canzona::optim::detail {

class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  float* floats(std::size_t n) { return static_cast<float*>(take(n * sizeof(float))); }
  double* doubles(std::size_t n) { return static_cast<double*>(take(n * sizeof(double))); }
  // A contiguous rows x cols matrix.
  MatrixView matrix(std::int64_t rows, std::int64_t cols) {
    return matrix_view(floats(static_cast<std::size_t>(rows * cols)), rows, cols);
  }

 private:
  void* take(std::size_t bytes);
  std::size_t block_mark_;
  std::size_t offset_mark_;
  std::size_t in_use_mark_;
};

}  // namespace canzona::optim::detail
