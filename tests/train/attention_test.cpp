// Causal attention in query blocks (attention.h) against a plain-loop double reference, in the
// grouped-query layout: query head (g, p) attends with key and value head g.
//
// The reference computes, for every query head and row i, s_ij = q_i . k_j / sqrt(d) over j <= i,
// the softmax p_i, o_i = sum_j p_ij v_j, and by hand the backward for an upstream gradient g: dv_j
// += p_ij g_i, dp_ij = g_i . v_j, ds_ij = p_ij (dp_ij - sum_l p_il dp_il), dq_i = sum_j ds_ij k_j /
// sqrt(d), dk_j += ds_ij q_i / sqrt(d). Tolerance: fp32 sums of at most 37 O(1) terms against
// double, so a few 1e-7 of the value scale; the bound 1e-5 of the scale leaves a wide margin, while
// a wrong mask, a missing key or a wrong block edge moves values by O(scale). Causality and the
// one-block case are checked bitwise.
#include "attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

constexpr std::int64_t kB = 2, kS = 37, kD = 8;

// Groups and query heads per group: multi-head (3 groups of 1) and grouped-query (2 of 2).
struct Shape {
  std::int64_t g, p;
};

struct Grads {
  torch::Tensor out, dq, dk, dv;
};

torch::Tensor randn_q(const Shape& sh, int seed) {
  torch::manual_seed(seed);
  return torch::randn({kB, sh.g, kS, sh.p, kD});
}

torch::Tensor randn_kv(const Shape& sh, int seed) {
  torch::manual_seed(seed);
  return torch::randn({kB, sh.g, kS, kD});
}

Grads run(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
          const torch::Tensor& g, std::int64_t block) {
  torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                v = v0.clone().requires_grad_(true);
  torch::Tensor out = causal_attention(q, k, v, block);
  out.backward(g);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

// Plain loops in double over one (batch, group, query head) at a time.
Grads reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                const torch::Tensor& g) {
  const std::int64_t groups = q.size(1), per_group = q.size(3);
  const torch::Tensor q64 = q.to(torch::kFloat64), k64 = k.to(torch::kFloat64),
                      v64 = v.to(torch::kFloat64), g64 = g.to(torch::kFloat64);
  const auto Q = q64.accessor<double, 5>(), G = g64.accessor<double, 5>();
  const auto K = k64.accessor<double, 4>(), V = v64.accessor<double, 4>();
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  Grads r{torch::zeros(q.sizes(), opts), torch::zeros(q.sizes(), opts),
          torch::zeros(k.sizes(), opts), torch::zeros(k.sizes(), opts)};
  auto O = r.out.accessor<double, 5>(), DQ = r.dq.accessor<double, 5>();
  auto DK = r.dk.accessor<double, 4>(), DV = r.dv.accessor<double, 4>();
  const double root_d = std::sqrt(static_cast<double>(kD));
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t h = 0; h < groups; ++h) {
      for (std::int64_t e = 0; e < per_group; ++e) {
        for (std::int64_t i = 0; i < kS; ++i) {
          std::vector<double> p(i + 1), dp(i + 1);
          double top = -INFINITY, sum = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double dot = 0.0;
            for (std::int64_t c = 0; c < kD; ++c) dot += Q[b][h][i][e][c] * K[b][h][j][c];
            p[j] = dot / root_d;
            top = std::max(top, p[j]);
          }
          for (std::int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - top));
          double weighted = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            p[j] /= sum;
            double dot = 0.0;
            for (std::int64_t c = 0; c < kD; ++c) {
              O[b][h][i][e][c] += p[j] * V[b][h][j][c];
              DV[b][h][j][c] += p[j] * G[b][h][i][e][c];
              dot += G[b][h][i][e][c] * V[b][h][j][c];
            }
            dp[j] = dot;
            weighted += p[j] * dot;
          }
          for (std::int64_t j = 0; j <= i; ++j) {
            const double ds = p[j] * (dp[j] - weighted) / root_d;
            for (std::int64_t c = 0; c < kD; ++c) {
              DQ[b][h][i][e][c] += ds * K[b][h][j][c];
              DK[b][h][j][c] += ds * Q[b][h][i][e][c];
            }
          }
        }
      }
    }
  }
  return r;
}

double rel_diff(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = want.abs().max().item<double>();
  return (got.to(torch::kFloat64) - want).abs().max().item<double>() / scale;
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * sizeof(float)) == 0;
}

TEST(CausalAttention, MatchesPlainLoopReferenceForEveryBlockSize) {
  for (const Shape sh : {Shape{3, 1}, Shape{2, 2}}) {
    const torch::Tensor q = randn_q(sh, 1), k = randn_kv(sh, 2), v = randn_kv(sh, 3),
                        g = randn_q(sh, 4);
    const Grads want = reference(q, k, v, g);
    // 1: one query per block; 5 and 16: ragged last block; 37 = S and 100: one block.
    for (std::int64_t block : {1, 5, 16, 37, 100}) {
      SCOPED_TRACE("groups " + std::to_string(sh.g) + " of " + std::to_string(sh.p) + ", block " +
                   std::to_string(block));
      const Grads got = run(q, k, v, g, block);
      EXPECT_LT(rel_diff(got.out, want.out), 1e-5);
      EXPECT_LT(rel_diff(got.dq, want.dq), 1e-5);
      EXPECT_LT(rel_diff(got.dk, want.dk), 1e-5);
      EXPECT_LT(rel_diff(got.dv, want.dv), 1e-5);
    }
  }
}

TEST(CausalAttention, ALaterKeyOrValueNeverReachesAnEarlierQuery) {
  const Shape sh{2, 2};
  const torch::Tensor q = randn_q(sh, 1), k = randn_kv(sh, 2), v = randn_kv(sh, 3);
  const std::int64_t later = 20;  // inside the second block of 16
  torch::Tensor k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, later, kS - later).mul_(3.0);
  v2.narrow(2, later, kS - later).add_(1.0);
  const torch::Tensor a = causal_attention(q, k, v, 16), b = causal_attention(q, k2, v2, 16);
  EXPECT_TRUE(same_bytes(a.narrow(2, 0, later), b.narrow(2, 0, later)));
  EXPECT_FALSE(same_bytes(a.narrow(2, later, 1), b.narrow(2, later, 1)));
}

TEST(CausalAttention, RejectsABlockBelowOneAndMismatchedHeads) {
  const Shape sh{2, 2};
  const torch::Tensor q = randn_q(sh, 1), kv = randn_kv(sh, 2);
  EXPECT_THROW(causal_attention(q, kv, kv, 0), Error);
  EXPECT_THROW(causal_attention(q, kv.narrow(1, 0, 1), kv.narrow(1, 0, 1)), Error);
}

}  // namespace
}  // namespace canzona::train
