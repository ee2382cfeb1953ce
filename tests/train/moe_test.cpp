// Qwen3-MoE's sparse MLP block (moe.h) against plain per-token loops written here: routing and its
// tie rule, the load-balancing loss by hand, and the experts' output and gradients on one rank and
// under expert parallelism (EP 2 and 4 as threads of this process, each rank with its own tokens).
//
// Tolerance. The expert computation batches rows differently from the per-token reference (one
// GEMM over every row an expert received, or the rows of all EP ranks together), so values may
// differ by rounding: with O(1) values and sums of at most a few hundred terms that is ~1e-6 of
// the value scale; 1e-5 leaves a margin while every bug targeted (a row sent to the wrong rank, a
// weight applied to the wrong choice, a missing reverse All-to-All) moves values by O(scale).
#include "canzona/train/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/comm/thread.h"

namespace canzona::train {
namespace {

constexpr double kRelTolerance = 1e-5;

double scaled_diff(const torch::Tensor& got, const torch::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return 1e30;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return (got - want).abs().max().item<double>() / scale;
}

// Expert e of fc1 [2f, h] and fc2 [h, f] on one token v [h], as Hugging Face's Qwen3MoeMLP.
torch::Tensor expert_plain(const torch::Tensor& v, const torch::Tensor& fc1,
                           const torch::Tensor& fc2) {
  const std::int64_t f = fc1.size(0) / 2;
  const torch::Tensor gate = torch::mv(fc1.slice(0, 0, f), v);
  const torch::Tensor up = torch::mv(fc1.slice(0, f, 2 * f), v);
  return torch::mv(fc2, torch::silu(gate) * up);
}

// out[n] = sum_j w[n, j] expert_{e[n, j]}(x[n]), token by token.
torch::Tensor experts_plain(const torch::Tensor& x, const torch::Tensor& experts,
                            const torch::Tensor& weights, const std::vector<torch::Tensor>& fc1,
                            const std::vector<torch::Tensor>& fc2) {
  std::vector<torch::Tensor> rows;
  for (std::int64_t n = 0; n < x.size(0); ++n) {
    torch::Tensor sum = torch::zeros({x.size(1)});
    for (std::int64_t j = 0; j < experts.size(1); ++j) {
      const std::int64_t e = experts[n][j].item<std::int64_t>();
      sum = sum + weights[n][j] * expert_plain(x[n], fc1[e], fc2[e]);
    }
    rows.push_back(sum);
  }
  return torch::stack(rows);
}

TEST(MoeRouting, TiesGoToTheLowerExpertAndWeightsRenormalise) {
  // A zero router gives every expert probability 1/4: top-2 is experts 0 and 1, 1/2 each.
  const torch::Tensor x = torch::randn({3, 8}, torch::Generator(at::detail::createCPUGenerator(1)));
  Routing r = route(x, torch::zeros({4, 8}), 2, true);
  EXPECT_TRUE(
      torch::equal(r.experts, torch::tensor({0, 1, 0, 1, 0, 1}, torch::kInt64).view({3, 2})));
  EXPECT_TRUE(torch::allclose(r.weights, torch::full({3, 2}, 0.5f)));
  // Rows of W pick the experts: token 0 (x = e_0) prefers expert 2, then 3 and 1 tied at 0.
  torch::Tensor w = torch::zeros({4, 2});
  w[2][0] = 2.0f;
  w[0][0] = -1.0f;
  r = route(torch::tensor({1.0f, 0.0f}).view({1, 2}), w, 2, false);
  EXPECT_EQ(r.experts[0][0].item<std::int64_t>(), 2);
  EXPECT_EQ(r.experts[0][1].item<std::int64_t>(), 1);
  // Without renormalisation the weights are the softmax probabilities: e^2 / (e^2 + 2 + e^-1).
  const double z = std::exp(2.0) + 2.0 + std::exp(-1.0);
  EXPECT_NEAR(r.weights[0][0].item<double>(), std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[0][1].item<double>(), 1.0 / z, 1e-6);
}

// Two layers of two tokens, E = 2, k = 1. Layer A: probs (0.75, 0.25), (0.5, 0.5) -> choices 0, 0;
// layer B: (0.25, 0.75), (0.25, 0.75) -> 1, 1. Over the 4 tokens F = (1/2, 1/2),
// P = (0.4375, 0.5625): loss = 2 (0.5 x 0.4375 + 0.5 x 0.5625) = 1.
TEST(MoeRouting, LoadBalancingLossByHand) {
  auto layer = [](std::vector<float> p, std::vector<std::int64_t> e) {
    Routing r;
    r.probs = torch::tensor(p).view({2, 2});
    r.experts = torch::tensor(e, torch::kInt64).view({2, 1});
    return r;
  };
  const torch::Tensor loss = load_balancing_loss(
      {layer({0.75f, 0.25f, 0.5f, 0.5f}, {0, 0}), layer({0.25f, 0.75f, 0.25f, 0.75f}, {1, 1})}, 2);
  EXPECT_NEAR(loss.item<double>(), 1.0, 1e-7);
  // All on expert 0: F = (1, 0), loss = 2 x 0.4375.
  const torch::Tensor skewed = load_balancing_loss(
      {layer({0.75f, 0.25f, 0.5f, 0.5f}, {0, 0}), layer({0.25f, 0.75f, 0.25f, 0.75f}, {0, 0})}, 2);
  EXPECT_NEAR(skewed.item<double>(), 0.875, 1e-7);
}

// Pipeline stages: two "stages" of two layers each, random probabilities and choices. Each
// stage's share with every stage's choices (counts / rows) has, for its layers' probabilities,
// the gradient of the whole loss bit for bit, and the shares add up to the loss to rounding.
TEST(MoeRouting, StageSharesCarryTheWholeLossGradientBitwise) {
  const int e = 4;
  auto g = at::detail::createCPUGenerator(7);
  std::vector<Routing> layers(4);
  for (Routing& r : layers) {
    r.probs = torch::softmax(torch::randn({6, e}, g), -1).set_requires_grad(true);
    r.experts = torch::randint(0, e, {6, 2}, g);
  }
  const torch::Tensor whole = load_balancing_loss(layers, e) * 0.03f;
  whole.backward();
  std::vector<torch::Tensor> expected;
  for (Routing& r : layers) {
    expected.push_back(r.probs.grad().clone());
    r.probs.mutable_grad() = torch::Tensor();
  }
  const std::vector<Routing> first(layers.begin(), layers.begin() + 2);
  const std::vector<Routing> second(layers.begin() + 2, layers.end());
  const StageRouting a = stage_routing(first, e), b = stage_routing(second, e);
  const std::int64_t rows = a.probs.size(0) + b.probs.size(0);
  ASSERT_EQ(rows, 24);
  const torch::Tensor choices = (a.counts + b.counts) / static_cast<double>(rows);
  const torch::Tensor share_a = load_balancing_share(a.probs, choices, rows, e) * 0.03f;
  const torch::Tensor share_b = load_balancing_share(b.probs, choices, rows, e) * 0.03f;
  share_a.backward();
  share_b.backward();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const torch::Tensor got = layers[l].probs.grad().contiguous();
    ASSERT_EQ(got.numel(), expected[l].numel());
    EXPECT_EQ(std::memcmp(got.data_ptr<float>(), expected[l].contiguous().data_ptr<float>(),
                          static_cast<std::size_t>(got.numel()) * sizeof(float)),
              0)
        << "layer " << l;
  }
  EXPECT_NEAR((share_a + share_b).item<double>(), whole.item<double>(), 1e-6);
  EXPECT_GT(whole.item<double>(), 0.0);
}

struct Weights {
  std::vector<torch::Tensor> fc1, fc2, router;
};

Weights draw(int experts, std::int64_t h, std::int64_t f, std::uint64_t seed) {
  auto g = at::detail::createCPUGenerator(seed);
  Weights w;
  for (int e = 0; e < experts; ++e) {
    w.fc1.push_back(torch::randn({2 * f, h}, g) * 0.3);
    w.fc2.push_back(torch::randn({h, f}, g) * 0.3);
  }
  w.router.push_back(torch::randn({experts, h}, g));
  return w;
}

// One rank, every expert: the output and every gradient against the per-token loop; an expert
// no token chose gets a gradient of exact zeros.
TEST(MoeExperts, OneRankMatchesThePlainLoopAndIdleExpertsGetZeroGradients) {
  const int experts = 6, k = 2;
  const std::int64_t h = 8, f = 5, n = 7;
  Weights w = draw(experts, h, f, 7);
  // Expert 5 is never chosen: with positive inputs, its router row of -1s gives it the only
  // negative logit (the others' rows are positive).
  w.router[0] = w.router[0].abs();
  w.router[0][5].fill_(-1.0f);
  auto g = at::detail::createCPUGenerator(3);
  const torch::Tensor x0 = torch::randn({n, h}, g).abs() + 0.1;
  const torch::Tensor upstream = torch::randn({n, h}, g);
  auto run = [&](bool plain) {
    std::vector<torch::Tensor> fc1, fc2;
    for (int e = 0; e < experts; ++e) {
      fc1.push_back(w.fc1[e].clone().requires_grad_(true));
      fc2.push_back(w.fc2[e].clone().requires_grad_(true));
    }
    const torch::Tensor x = x0.clone().requires_grad_(true);
    const Routing r = route(x, w.router[0], k, true);
    const torch::Tensor out = plain ? experts_plain(x, r.experts, r.weights, fc1, fc2)
                                    : moe_experts(x, r, fc1, fc2, experts, EpGroup{});
    (out * upstream).sum().backward();
    // moe_experts gives every expert a defined gradient (the engine waits for each one).
    if (!plain) {
      for (int e = 0; e < experts; ++e) {
        EXPECT_TRUE(fc1[e].grad().defined() && fc2[e].grad().defined()) << "expert " << e;
      }
    }
    std::vector<torch::Tensor> results = {out.detach(), x.grad()};
    for (int e = 0; e < experts; ++e) {
      results.push_back(fc1[e].grad().defined() ? fc1[e].grad() : torch::zeros_like(fc1[e]));
      results.push_back(fc2[e].grad().defined() ? fc2[e].grad() : torch::zeros_like(fc2[e]));
    }
    return results;
  };
  const auto got = run(false), want = run(true);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(scaled_diff(got[i], want[i]), kRelTolerance) << "result " << i;
  // Expert 5's weights: a defined gradient of exact zeros from moe_experts.
  EXPECT_TRUE(torch::equal(got[2 + 2 * 5], torch::zeros({2 * f, h})));
  EXPECT_TRUE(torch::equal(got[3 + 2 * 5], torch::zeros({h, f})));
}

// EP 2 and 4: rank p holds experts [p E/P, (p+1) E/P) and routes its own tokens. Its output and
// input gradient equal the one-rank computation of its tokens; an expert's weight gradient on its
// rank equals the sum over every rank's one-rank gradient.
void check_ep(int size) {
  const int experts = 8, k = 2;
  const std::int64_t h = 8, f = 4, n = 5;
  const Weights w = draw(experts, h, f, 11);
  std::vector<torch::Tensor> x0, upstream;
  auto g = at::detail::createCPUGenerator(5);
  for (int p = 0; p < size; ++p) {
    x0.push_back(torch::randn({n, h}, g));
    upstream.push_back(torch::randn({n, h}, g));
  }
  // Reference: each rank's tokens through every expert on one rank.
  std::vector<torch::Tensor> want_out, want_dx, want_fc1(experts), want_fc2(experts);
  for (int p = 0; p < size; ++p) {
    std::vector<torch::Tensor> fc1, fc2;
    for (int e = 0; e < experts; ++e) {
      fc1.push_back(w.fc1[e].clone().requires_grad_(true));
      fc2.push_back(w.fc2[e].clone().requires_grad_(true));
    }
    const torch::Tensor x = x0[p].clone().requires_grad_(true);
    const Routing r = route(x, w.router[0], k, true);
    const torch::Tensor out = experts_plain(x, r.experts, r.weights, fc1, fc2);
    (out * upstream[p]).sum().backward();
    want_out.push_back(out.detach());
    want_dx.push_back(x.grad());
    for (int e = 0; e < experts; ++e) {
      const torch::Tensor g1 = fc1[e].grad().defined() ? fc1[e].grad() : torch::zeros_like(fc1[e]);
      const torch::Tensor g2 = fc2[e].grad().defined() ? fc2[e].grad() : torch::zeros_like(fc2[e]);
      want_fc1[e] = p == 0 ? g1 : want_fc1[e] + g1;
      want_fc2[e] = p == 0 ? g2 : want_fc2[e] + g2;
    }
  }
  std::mutex mutex;
  std::vector<std::vector<torch::Tensor>> got(size);
  comm::run_on_thread_grid({1, size, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
    const int p = grid.tp().rank();
    const int local = experts / size;
    std::vector<torch::Tensor> fc1, fc2;
    for (int l = 0; l < local; ++l) {
      fc1.push_back(w.fc1[p * local + l].clone().requires_grad_(true));
      fc2.push_back(w.fc2[p * local + l].clone().requires_grad_(true));
    }
    const torch::Tensor x = x0[p].clone().requires_grad_(true);
    const Routing r = route(x, w.router[0], k, true);
    const torch::Tensor out = moe_experts(x, r, fc1, fc2, experts, EpGroup{&grid.tp(), size, p});
    (out * upstream[p]).sum().backward();
    std::vector<torch::Tensor> mine = {out.detach(), x.grad()};
    for (int l = 0; l < local; ++l) {
      mine.push_back(fc1[l].grad());
      mine.push_back(fc2[l].grad());
    }
    const std::lock_guard<std::mutex> lock(mutex);
    got[p] = std::move(mine);
  });
  const int local = experts / size;
  for (int p = 0; p < size; ++p) {
    ASSERT_EQ(got[p].size(), 2u + 2 * local);
    EXPECT_LT(scaled_diff(got[p][0], want_out[p]), kRelTolerance) << "output, rank " << p;
    EXPECT_LT(scaled_diff(got[p][1], want_dx[p]), kRelTolerance) << "x grad, rank " << p;
    for (int l = 0; l < local; ++l) {
      const int e = p * local + l;
      ASSERT_TRUE(got[p][2 + 2 * l].defined()) << "expert " << e;
      EXPECT_LT(scaled_diff(got[p][2 + 2 * l], want_fc1[e]), kRelTolerance) << "fc1 of " << e;
      EXPECT_LT(scaled_diff(got[p][3 + 2 * l], want_fc2[e]), kRelTolerance) << "fc2 of " << e;
    }
  }
}

TEST(MoeExperts, ExpertParallel2MatchesOneRank) {
  check_ep(2);
}
TEST(MoeExperts, ExpertParallel4MatchesOneRank) {
  check_ep(4);
}

}  // namespace
}  // namespace canzona::train
