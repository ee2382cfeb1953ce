// Final-parameter checks: rebuild global tensors from the TP shards, compare bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/layout/layout.h"
#include "canzona/model/spec.h"

namespace canzona::runtime {

// Collective over grid.world(): the TP ranks of DP replica `replica` send their model params
// (`local`, layout order) to world rank 0, which returns [param] global row-major tensors of
// every param in the layout; other ranks return an empty vector. Params outside the layout stay
// empty.
std::vector<std::vector<float>> gather_replica(comm::Grid& grid, const model::ModelSpec& model,
                                               const layout::Layout& layout,
                                               std::span<const float> local, int replica);

struct Mismatch {
  bool found = false;
  std::string param;
  std::int64_t element = 0;  // global row-major index
  float got = 0.0f;
  float want = 0.0f;
  double max_abs_diff = 0.0;  // over every compared element
  std::int64_t elements = 0;  // elements compared

  // "param 'name' element E: got G, want W (bits 0x..., 0x...)".
  std::string describe() const;
};

// Compares `got` with `want` ([param] tensors) with memcmp per element; the first mismatching
// element in param order is reported. Params empty in either are skipped.
Mismatch compare_params(const model::ModelSpec& model, const std::vector<std::vector<float>>& got,
                        const std::vector<std::vector<float>>& want);

}  // namespace canzona::runtime
