// Deterministic synthetic parameters and gradients.
//
// Terms. Every value is a pure function of a counter: the *global element index* e of a param
// (row-major index into its global, un-split shape) plus the param index, step, DP rank and seed.
// So any TP rank generates exactly the values of its shard, and a single-process reference sees
// the same numbers without communication. The hash is splitmix64; its top 24 bits map to a float
// u in [-1, 1) exactly (u = k / 2^23 - 1, k in [0, 2^24)).
//
//   init value:     0.02 u (2-D params) or 1 + 0.02 u (1-D params, norm weights), step 0
//   gradient value: u for (step >= 1, DP rank d): the local gradient before any averaging
//
// Averaging by 1/DP is not done here: the engine multiplies each bucket by grad_scale(DP)
// (engine.h) right before posting its collective (Megatron's gradient_scaling_factor), so the
// reduced gradient is sum_d (u_d * float(1/DP)) summed in rank order d = 0..DP-1 in fp32, which
// is what ReduceMode::kDeterministic forms and what the reference computes on its own.
#pragma once

#include <cstdint>
#include <span>

#include "canzona/common/dtype.h"
#include "canzona/common/splitmix.h"
#include "canzona/model/spec.h"

namespace canzona::runtime {

// Key of one stream of values (one param's init, or its gradient on one DP rank at one step).
std::uint64_t init_key(std::uint64_t seed, int param);
std::uint64_t grad_key(std::uint64_t seed, int step, int dp_rank, int param);

// u in [-1, 1) for global element `element` of the stream `key`.
float unit_value(std::uint64_t key, std::int64_t element);

// Fills `out` (param.local_numel(tp) floats, TP rank tp_rank's shard, local row-major) with the
// init values of the elements it holds. tp = 1 gives the whole global tensor.
void fill_init(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
               std::uint64_t seed, std::span<float> out);

// Same for DP rank dp_rank's local gradient at `step` (>= 1), not yet scaled by grad_scale(dp).
void fill_grad(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
               std::uint64_t seed, int step, int dp_rank, std::span<float> out);

// The same values written into a buffer of either dtype: bf16 gets each fp32 value rounded to
// nearest even (what a bf16 model's weights hold of them). A gradient is first rounded to
// `model_dtype`, the dtype a model of that precision computes it in, then written: a bf16 model's
// gradient in an fp32 buffer (--grad-reduce-in-fp32) holds bf16 values.
void fill_init_typed(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
                     std::uint64_t seed, TypedSpan out);
void fill_grad_typed(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
                     std::uint64_t seed, int step, int dp_rank, DType model_dtype, TypedSpan out);

}  // namespace canzona::runtime
