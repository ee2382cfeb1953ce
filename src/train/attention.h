// Causal scaled dot-product attention in query blocks.
//
// softmax(q k^T / sqrt(d) + causal mask) v, computed block by block over the queries: block
// [i0, i0 + n) multiplies only keys [0, i0 + n), since every later key is masked for all of its
// queries. That skips about half of the two attention matmuls, and the scores held for the
// backward are the lower-triangular blocks (sum over blocks of n * (i0 + n)) instead of the full
// S x S matrix. The mask is an additive 0 / -inf bias the score product accumulates onto, so it
// costs no pass of its own. Each block's rows are an exact softmax over the keys they can see, so
// the result equals the full masked computation up to float rounding; it is causal exactly (a
// query's output never reads a later key or value), which the model's last-token test checks
// bitwise. The P query heads of a group share one product with their key and value head, so the
// key and value heads are never repeated (no copy forward, no sum backward).
//
// bf16 (docs/precision.md): the two products take bf16 operands and round their fp32 sums to
// bf16 (libtorch's bf16 bmm); the softmax runs in fp32 on the widened scores and is rounded once,
// as Hugging Face's Qwen3 attention computes it.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace canzona::train {

// Query block of causal_attention: 128 measured fastest for 8 heads of 64 at seq 256 x 8 and
// seq 1024 x 2 on one core (fwd+bwd, glibc malloc: full S x S 96.8 / 1856 ms, blocks of 64
// 52.1 / 135, 128 46.5 / 127, 256 - / 162; the bias mask then took 128 from 63.7 / 155 to
// 40.0 / 113 ms under tcmalloc).
inline constexpr std::int64_t kAttentionBlock = 128;

// Grouped-query layout: q [B, G, S, P, d] (query head g * P + p of position s), k and v
// [B, G, S, d] (the one key and value head of group g, not repeated). Returns [B, G, S, P, d].
// block >= 1 (a block >= S is the plain full computation). Multi-head attention is P = 1.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, std::int64_t block = kAttentionBlock);

}  // namespace canzona::train
