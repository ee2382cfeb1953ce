// Fused element-wise kernels of the decoder: RMSNorm, SwiGLU and the attention input (split of
// the QKV projection into heads, qk-norm, RoPE), each one autograd function with a hand-written
// backward in plain loops.
//
// Why. Written as libtorch expressions, each of these is five to fifteen passes over the
// activations forward and backward, and the narrow/select views of a fused projection cost a
// zero-filled gradient of the whole projection plus one copy per view in the backward. A fused
// kernel makes one pass forward and one backward and writes the projection's gradient once, as
// Megatron's fused kernels (Apex fused RMSNorm, fused RoPE, fused bias-SwiGLU) do on GPUs.
//
// Numerics. Sums over a row (the mean square of RMSNorm, the dot product of its backward) are
// accumulated in double; everything else is fp32 as in the unfused expressions, so results equal
// them up to float rounding. Weight gradients are summed over rows in row order: deterministic,
// identical on every rank and run. bf16 inputs are widened to fp32 (exactly), the kernel runs
// in fp32 and each output is rounded to bf16 once (round to nearest even); the backward gets the
// same: the incoming bf16 gradient widened, the input and weight gradients rounded once. So
// norms, SwiGLU and RoPE compute in fp32 under --precision bf16, as Megatron's fused kernels do.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace canzona::train {

// x [..., h] (made contiguous), weight [h] -> x * (mean_h(x^2) + eps)^-1/2 * weight.
torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// fc1 [..., 2f] = [gate | up] on the last dim -> silu(gate) * up [..., f].
torch::Tensor fused_swiglu(const torch::Tensor& fc1);

// The attention heads of a QKV projection, laid out for grouped-query attention.
struct AttentionHeads {
  torch::Tensor q;  // [B, G, S, P, d]: query head g * P + p of position s
  torch::Tensor k;  // [B, G, S, d]: the key head of query group g
  torch::Tensor v;  // [B, G, S, d]
};

// qkv [B, S, G * (P + 2) * d] (contiguous), each group's slice being P query heads, then its key
// head, then its value head (Megatron's interleaved layout). q_norm, k_norm [d]: RMSNorm weights
// applied per head to q and k (both undefined: no qk-norm). cos, sin [S, d]: RoPE tables, applied
// to q and k after the norm as x * cos + [-x2, x1] * sin with x1, x2 the two halves of a head.
AttentionHeads fused_attention_heads(const torch::Tensor& qkv, std::int64_t groups,
                                     std::int64_t per_group, std::int64_t head_dim,
                                     const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                                     double eps, const torch::Tensor& cos,
                                     const torch::Tensor& sin);

}  // namespace canzona::train
