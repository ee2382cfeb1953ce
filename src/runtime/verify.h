// Final-parameter and reduced-gradient checks: rebuild global tensors from the TP (and DP) shards,
// compare bit for bit, or within a stated bound under the native reduction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/layout/layout.h"
#include "canzona/model/spec.h"

namespace canzona::runtime {

// The layout of each pipeline stage, [stage] (a plan's stages[s].layout).
using StageLayouts = std::vector<const layout::Layout*>;

// Collective over grid.world(): the TP ranks of DP replica `replica` of every pipeline stage send
// their model params (`local`, their stage's layout order) to world rank 0, which returns [param]
// global row-major tensors of every param in the layouts; other ranks return an empty vector.
// Params outside the layouts stay empty.
std::vector<std::vector<float>> gather_replica(comm::Grid& grid, const model::ModelSpec& model,
                                               const StageLayouts& layouts,
                                               std::span<const float> local, int replica);

// Reduced gradients of the last step as world rank 0 sees them: views[v][param] global row-major
// tensors of every stage's params. `ranges` are this rank's StrategyRunner::reduced_grads() (its
// stage's layout offsets). With `sharded` false
// (All-Reduce strategies) every rank holds the whole reduced gradient and there is one view per DP
// replica; with `sharded` true (Reduce-Scatter strategies) the DP ranks' shards are assembled into
// one view, and every element must be held by exactly one DP rank (canzona::Error otherwise).
// Other ranks return {}. Collective over grid.world().
std::vector<std::vector<std::vector<float>>> gather_reduced_grads(
    comm::Grid& grid, const model::ModelSpec& model, const StageLayouts& layouts,
    const std::vector<std::pair<std::int64_t, std::span<const float>>>& ranges, bool sharded);

// How far a compared element may be from the wanted one. Without `scale`: not at all (bitwise,
// memcmp). With it: |got - want| <= factor * scale[param][element].
struct Tolerance {
  const std::vector<std::vector<float>>* scale = nullptr;
  double factor = 0.0;
};

// The factor of the native-reduction tolerance on a reduced gradient. For P summands x_d, any
// summation order gives |s_hat - s| <= gamma(P-1) * sum_d |x_d| with gamma(n) = n u / (1 - n u)
// and u = 2^-24 (fp32 unit roundoff; Higham, Accuracy and Stability of Numerical Algorithms,
// eq. 4.4). The deterministic reference and the native reduction each obey it, so they differ by
// at most 2 gamma(P-1) sum_d |x_d|; the returned factor adds 1% headroom for the fp32 rounding of
// sum_d |x_d| itself. P = 1 gives 0 (no reduction, bitwise).
double native_sum_factor(int summands);

struct Mismatch {
  bool found = false;
  std::string param;
  std::string problem;       // set instead of element/got/want when the tensors' sizes differ
  std::int64_t element = 0;  // global row-major index
  float got = 0.0f;
  float want = 0.0f;
  double max_abs_diff = 0.0;     // over every compared element
  std::int64_t elements = 0;     // elements compared
  std::int64_t not_bitwise = 0;  // compared elements whose bits differ

  // "param 'name' element E: got G, want W (bits 0x..., 0x...)" or "param 'name': <problem>".
  std::string describe() const;
};

// Compares `got` with `want` ([param] tensors) per element, bitwise or within `tolerance`; the
// first element out of bounds in param order is reported. A param whose tensors differ in size
// (one of them empty included) is a mismatch; params empty in both are not compared (callers
// check `elements` against the model's numel).
Mismatch compare_params(const model::ModelSpec& model, const std::vector<std::vector<float>>& got,
                        const std::vector<std::vector<float>>& want, Tolerance tolerance = {});

}  // namespace canzona::runtime
