// The fused kernels (fused.h) against the plain expressions they replace, evaluated in double by
// libtorch's autograd: RMSNorm x * rsqrt(mean(x^2) + eps) * w, SwiGLU silu(gate) * up, and the
// attention input as view / narrow / select of the projection, RMSNorm per head, RoPE written with
// a concatenation ([-x2, x1]) and a permute into the grouped layout. The references share no code
// with the kernels: their backward is autograd's, the kernels' is hand-written. Inputs and
// upstream gradients are random; every output and every input gradient is compared.
//
// Tolerance: fp32 against double over sums of at most 64 O(1) terms, a few 1e-7 of the value
// scale; the bound 1e-5 of the scale leaves a wide margin, while a wrong sign, a missing term of
// a derivative or a misplaced head moves values by O(scale).
#include "fused.h"

#include <gtest/gtest.h>

#include <cmath>

#include "canzona/common/error.h"

// A named namespace: the sanitizer build compiles this file in one unit with attention_test.cpp.
namespace canzona::train::fused_test {
namespace {

constexpr double kEps = 1e-6;

torch::Tensor randn(std::vector<std::int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape);
}

double rel_diff(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = want.abs().max().item<double>();
  return (got.to(torch::kFloat64) - want).abs().max().item<double>() / scale;
}

torch::Tensor leaf64(const torch::Tensor& t) {
  return t.to(torch::kFloat64).requires_grad_(true);
}

torch::Tensor leaf32(const torch::Tensor& t) {
  return t.clone().requires_grad_(true);
}

torch::Tensor plain_rms_norm(const torch::Tensor& x, const torch::Tensor& w) {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + kEps) * w;
}

TEST(FusedRmsNorm, MatchesThePlainExpressionForwardAndBackward) {
  const torch::Tensor x = randn({3, 5, 16}, 1), w = randn({16}, 2), g = randn({3, 5, 16}, 3);
  torch::Tensor x64 = leaf64(x), w64 = leaf64(w);
  const torch::Tensor want = plain_rms_norm(x64, w64);
  want.backward(g.to(torch::kFloat64));
  torch::Tensor x32 = leaf32(x), w32 = leaf32(w);
  const torch::Tensor got = fused_rms_norm(x32, w32, kEps);
  got.backward(g);
  EXPECT_EQ(got.sizes(), x.sizes());
  EXPECT_LT(rel_diff(got, want), 1e-5);
  EXPECT_LT(rel_diff(x32.grad(), x64.grad()), 1e-5);
  EXPECT_LT(rel_diff(w32.grad(), w64.grad()), 1e-5);
}

TEST(FusedRmsNorm, TakesANonContiguousInput) {
  const torch::Tensor x = randn({16, 6}, 4).t(), w = randn({16}, 5);
  const torch::Tensor want = plain_rms_norm(x.to(torch::kFloat64), w.to(torch::kFloat64));
  EXPECT_LT(rel_diff(fused_rms_norm(x, w, kEps), want), 1e-5);
}

TEST(FusedSwiGlu, MatchesThePlainExpressionForwardAndBackward) {
  const torch::Tensor fc1 = 3.0 * randn({4, 7, 24}, 6), g = randn({4, 7, 12}, 7);
  torch::Tensor f64 = leaf64(fc1);
  const torch::Tensor want = torch::silu(f64.narrow(-1, 0, 12)) * f64.narrow(-1, 12, 12);
  want.backward(g.to(torch::kFloat64));
  torch::Tensor f32 = leaf32(fc1);
  const torch::Tensor got = fused_swiglu(f32);
  got.backward(g);
  EXPECT_EQ(got.sizes(), g.sizes());
  EXPECT_LT(rel_diff(got, want), 1e-5);
  EXPECT_LT(rel_diff(f32.grad(), f64.grad()), 1e-5);
}

constexpr std::int64_t kB = 2, kS = 9, kG = 2, kP = 3, kD = 8;

// The unfused attention input: [B, S, G, P + 2, d] views, qk-norm, RoPE by concatenation.
AttentionHeads plain_heads(const torch::Tensor& qkv, const torch::Tensor& qn,
                           const torch::Tensor& kn, const torch::Tensor& cos,
                           const torch::Tensor& sin) {
  const torch::Tensor grouped = qkv.view({kB, kS, kG, kP + 2, kD});
  torch::Tensor q = grouped.narrow(3, 0, kP), k = grouped.select(3, kP),
                v = grouped.select(3, kP + 1);
  if (qn.defined()) {
    q = plain_rms_norm(q, qn);
    k = plain_rms_norm(k, kn);
  }
  const auto rope = [&](const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& s) {
    const torch::Tensor rotated =
        torch::cat({-x.narrow(-1, kD / 2, kD / 2), x.narrow(-1, 0, kD / 2)}, -1);
    return x * c + rotated * s;
  };
  // cos, sin [S, d] broadcast over [B, S, G, (P,) d].
  q = rope(q, cos.view({kS, 1, 1, kD}), sin.view({kS, 1, 1, kD}));
  k = rope(k, cos.view({kS, 1, kD}), sin.view({kS, 1, kD}));
  return {q.permute({0, 2, 1, 3, 4}), k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3})};
}

// RoPE tables of 10000^(-2i/d) frequencies, halves repeated, as the model builds them.
void rope_tables(torch::Tensor& cos, torch::Tensor& sin) {
  const torch::Tensor inv = torch::pow(10000.0, -torch::arange(0, kD, 2, torch::kFloat64) / kD);
  const torch::Tensor freqs = torch::outer(torch::arange(kS, torch::kFloat64), inv);
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  cos = emb.cos().to(torch::kFloat32);
  sin = emb.sin().to(torch::kFloat32);
}

void check_heads(bool qk_norm, bool only_q) {
  torch::Tensor cos, sin;
  rope_tables(cos, sin);
  const torch::Tensor qkv = randn({kB, kS, kG * (kP + 2) * kD}, 8);
  const torch::Tensor qn = qk_norm ? randn({kD}, 9) : torch::Tensor();
  const torch::Tensor kn = qk_norm ? randn({kD}, 10) : torch::Tensor();
  const torch::Tensor gq = randn({kB, kG, kS, kP, kD}, 11), gk = randn({kB, kG, kS, kD}, 12),
                      gv = randn({kB, kG, kS, kD}, 13);
  const auto loss = [&](const AttentionHeads& h, torch::ScalarType type) {
    torch::Tensor l = (h.q * gq.to(type)).sum();
    if (!only_q) l = l + (h.k * gk.to(type)).sum() + (h.v * gv.to(type)).sum();
    return l;
  };
  torch::Tensor qkv64 = leaf64(qkv), qn64 = qk_norm ? leaf64(qn) : qn,
                kn64 = qk_norm ? leaf64(kn) : kn;
  const AttentionHeads want =
      plain_heads(qkv64, qn64, kn64, cos.to(torch::kFloat64), sin.to(torch::kFloat64));
  loss(want, torch::kFloat64).backward();
  torch::Tensor qkv32 = leaf32(qkv), qn32 = qk_norm ? leaf32(qn) : qn,
                kn32 = qk_norm ? leaf32(kn) : kn;
  const AttentionHeads got = fused_attention_heads(qkv32, kG, kP, kD, qn32, kn32, kEps, cos, sin);
  loss(got, torch::kFloat32).backward();
  ASSERT_EQ(got.q.sizes(), (std::vector<std::int64_t>{kB, kG, kS, kP, kD}));
  ASSERT_EQ(got.k.sizes(), (std::vector<std::int64_t>{kB, kG, kS, kD}));
  EXPECT_LT(rel_diff(got.q, want.q), 1e-5);
  EXPECT_LT(rel_diff(got.k, want.k), 1e-5);
  EXPECT_LT(rel_diff(got.v, want.v), 1e-5);
  EXPECT_LT(rel_diff(qkv32.grad(), qkv64.grad()), 1e-5);
  if (qk_norm) {
    EXPECT_LT(rel_diff(qn32.grad(), qn64.grad()), 1e-5);
    if (!only_q) {
      EXPECT_LT(rel_diff(kn32.grad(), kn64.grad()), 1e-5);
    }
  }
}

TEST(FusedAttentionHeads, MatchesViewsNormAndRopeWithQkNorm) {
  check_heads(true, false);
}

TEST(FusedAttentionHeads, MatchesViewsAndRopeWithoutQkNorm) {
  check_heads(false, false);
}

TEST(FusedAttentionHeads, AnUnusedKeyAndValueGetZeroGradient) {
  check_heads(true, true);
}

TEST(FusedAttentionHeads, RejectsAWidthThatIsNotTheGroupsHeads) {
  torch::Tensor cos, sin;
  rope_tables(cos, sin);
  const torch::Tensor qkv = randn({kB, kS, kG * (kP + 2) * kD + 1}, 8), none;
  EXPECT_THROW(fused_attention_heads(qkv, kG, kP, kD, none, none, kEps, cos, sin), Error);
  EXPECT_THROW(fused_attention_heads(qkv.narrow(2, 0, kG * (kP + 2) * 7), kG, kP, 7, none, none,
                                     kEps, cos, sin),
               Error);
}

TEST(FusedSwiGlu, RejectsAnOddWidth) {
  EXPECT_THROW(fused_swiglu(randn({3, 5}, 1)), Error);
}

// bf16 (fused.h: widened, fp32 kernel, each output rounded once). Against the double reference
// of the bf16 inputs, every output element is the reference rounded to bf16 up to the fp32
// kernel's own error: within half a bf16 ulp of the reference value plus 1e-5 of the scale.
// Rounding twice, or computing in bf16, misses that bound on some of the elements (a bf16 sum of 16
// squares alone is off by several ulps).
void expect_rounded_once(const torch::Tensor& got, const torch::Tensor& want, const char* what) {
  ASSERT_EQ(got.scalar_type(), torch::kBFloat16) << what;
  const torch::Tensor g = got.to(torch::kFloat64), w = want.detach().to(torch::kFloat64);
  const double scale = w.abs().max().item<double>();
  // Half a bf16 ulp of each reference value: 2^(floor(log2 |w|) - 8) (8 significant bits).
  const torch::Tensor half_ulp = torch::exp2(torch::floor(torch::log2(w.abs())) - 8.0);
  const torch::Tensor excess = (g - w).abs() - (half_ulp + 1e-5 * scale);
  const auto worst = excess.flatten().argmax().item<std::int64_t>();
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": element " << worst << " is " << g.flatten()[worst].item<double>()
      << ", the reference " << w.flatten()[worst].item<double>();
}

torch::Tensor bf16_leaf(const torch::Tensor& t) {
  return t.to(torch::kBFloat16).requires_grad_(true);
}

TEST(FusedBf16, RmsNormComputesInFp32AndRoundsOnce) {
  const torch::Tensor x = randn({3, 5, 16}, 21), w = randn({16}, 22), g = randn({3, 5, 16}, 23);
  torch::Tensor x16 = bf16_leaf(x), w16 = bf16_leaf(w);
  torch::Tensor x64 = leaf64(x16.detach()), w64 = leaf64(w16.detach());
  const torch::Tensor g16 = g.to(torch::kBFloat16);
  const torch::Tensor want = plain_rms_norm(x64, w64);
  want.backward(g16.to(torch::kFloat64));
  const torch::Tensor got = fused_rms_norm(x16, w16, kEps);
  got.backward(g16);
  expect_rounded_once(got, want, "output");
  expect_rounded_once(x16.grad(), x64.grad(), "input gradient");
  expect_rounded_once(w16.grad(), w64.grad(), "weight gradient");
}

TEST(FusedBf16, SwiGluComputesInFp32AndRoundsOnce) {
  const torch::Tensor fc1 = 3.0 * randn({4, 7, 24}, 24), g = randn({4, 7, 12}, 25);
  torch::Tensor f16 = bf16_leaf(fc1), f64 = leaf64(f16.detach());
  const torch::Tensor g16 = g.to(torch::kBFloat16);
  const torch::Tensor want = torch::silu(f64.narrow(-1, 0, 12)) * f64.narrow(-1, 12, 12);
  want.backward(g16.to(torch::kFloat64));
  const torch::Tensor got = fused_swiglu(f16);
  got.backward(g16);
  expect_rounded_once(got, want, "output");
  expect_rounded_once(f16.grad(), f64.grad(), "input gradient");
}

TEST(FusedBf16, AttentionHeadsNormAndRopeInFp32AndRoundOnce) {
  torch::Tensor cos, sin;
  rope_tables(cos, sin);
  const torch::Tensor qkv = randn({kB, kS, kG * (kP + 2) * kD}, 26);
  torch::Tensor qkv16 = bf16_leaf(qkv), qn16 = bf16_leaf(randn({kD}, 27)),
                kn16 = bf16_leaf(randn({kD}, 28));
  torch::Tensor qkv64 = leaf64(qkv16.detach()), qn64 = leaf64(qn16.detach()),
                kn64 = leaf64(kn16.detach());
  const AttentionHeads want =
      plain_heads(qkv64, qn64, kn64, cos.to(torch::kFloat64), sin.to(torch::kFloat64));
  const AttentionHeads got = fused_attention_heads(qkv16, kG, kP, kD, qn16, kn16, kEps, cos, sin);
  expect_rounded_once(got.q, want.q, "q");
  expect_rounded_once(got.k, want.k, "k");
  expect_rounded_once(got.v, want.v, "v");
  const torch::Tensor gq = randn({kB, kG, kS, kP, kD}, 29).to(torch::kBFloat16);
  (want.q * gq.to(torch::kFloat64)).sum().backward();
  (got.q * gq).sum().backward();
  expect_rounded_once(qkv16.grad(), qkv64.grad(), "qkv gradient");
  expect_rounded_once(qn16.grad(), qn64.grad(), "q-norm gradient");
}

TEST(FusedBf16, RefusesMixedDtypes) {
  EXPECT_THROW(fused_rms_norm(randn({2, 4}, 1).to(torch::kBFloat16), randn({4}, 2), kEps),
               UsageError);
}

}  // namespace
}  // namespace canzona::train::fused_test
