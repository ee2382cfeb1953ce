// Causal attention in query blocks (attention.h).
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, std::int64_t block) {
  CANZONA_REQUIRE(block >= 1, "attention block ", block, " must be at least 1");
  CANZONA_REQUIRE(q.dim() == 5 && k.dim() == 4 && k.sizes() == v.sizes() &&
                      k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(2) == q.size(2) &&
                      k.size(3) == q.size(4),
                  "causal_attention takes q [B, G, S, P, d] and k, v [B, G, S, d]");
  const std::int64_t batch = q.size(0) * q.size(1), s = q.size(2), per_group = q.size(3),
                     d = q.size(4);
  // Scaling q (S x P x d) instead of the scores (about S x S x P / 2) is the same product up to
  // rounding. [B, G] merge into one batch dim, and a group's P query heads of one position are
  // adjacent rows: the rows of positions [i0, i0 + n) are one block of rows, a view.
  const torch::Tensor scaled =
      (q / std::sqrt(static_cast<double>(d))).reshape({batch, s * per_group, d});
  const torch::Tensor k3 = k.reshape({batch, s, d}), v3 = v.reshape({batch, s, d});
  const float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<torch::Tensor> blocks;
  for (std::int64_t i0 = 0; i0 < s; i0 += block) {
    const std::int64_t n = std::min(block, s - i0), end = i0 + n;
    // Keys [0, end): query position i0 + r sees keys 0 .. i0 + r, so column j is masked when
    // j > i0 + r, for each of the position's P rows. The mask enters as an additive bias of
    // 0 / -inf that the product accumulates onto (baddbmm): no pass over the scores for it,
    // forward or backward.
    torch::Tensor mask =
        torch::zeros({n, end}, q.scalar_type())
            .masked_fill_(torch::ones({n, end}, torch::kBool).triu(i0 + 1), minus_inf);
    if (per_group > 1) mask = mask.repeat_interleave(per_group, 0);
    const torch::Tensor scores =
        torch::baddbmm(mask, scaled.narrow(1, i0 * per_group, n * per_group),
                       k3.narrow(1, 0, end).transpose(1, 2));
    // bf16: the softmax in fp32 (Hugging Face's softmax(..., dtype=float32)), rounded once.
    const torch::Tensor probs =
        q.scalar_type() == torch::kFloat32
            ? torch::softmax(scores, -1)
            : torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());
    blocks.push_back(torch::bmm(probs, v3.narrow(1, 0, end)));
  }
  const torch::Tensor out = blocks.size() == 1 ? blocks.front() : torch::cat(blocks, 1);
  return out.view(q.sizes());
}

}  // namespace canzona::train
