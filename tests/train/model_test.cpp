// The Qwen3 training model (model.h) on preset qwen3-tiny (h 128, f 384, 2 layers, 4 heads in 2
// query groups of head_dim 32, padded vocabulary 512, tied embeddings, qk-norm).
//
// TP = 2 runs as two threads of this process (include/canzona/comm/thread.h, kDeterministic) and is
// compared with one process at TP = 1 from the same init (init_param is TP-independent): per-token
// losses, local logits and every param's gradient shard. Also checked: the init's sharding against
// a hand slicing of the TP = 1 init (fc1's [gate_t; up_t] interleave included), the init's
// documented statistics, the constructor's spec checks, the loss at init, causality, and bind().
//
// Tolerance (fp32). TP changes the order of accumulation only (partial dot products over T shards
// summed by the communicator, the cross-entropy's sum of exponentials in two pieces), so the two
// runs differ by rounding, amplified a little by two layers of normalisation and attention. The
// observed differences are below 1e-6 of the value scale (loss ~ln 512, logits, each gradient's
// max |element|; 8e-7 at worst, for a q/k-norm gradient); the bound 2e-5 of the scale leaves a
// 25x margin for other BLAS kernels, while a wrong shard, a missing collective or a mis-ordered
// interleave moves values by O(scale).
#include "canzona/train/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/comm/thread.h"
#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::train {
namespace {

constexpr std::uint64_t kSeed = 1234;
constexpr double kValueTolerance = 2e-5;  // losses, logits: max abs diff / max(1, max abs)
constexpr double kGradTolerance = 2e-5;   // max |grad diff| / max |reference grad| of the param

model::TransformerConfig tiny() {
  return model::preset("qwen3-tiny");
}

model::ModelSpec tiny_spec(int tp) {
  model::BuildOptions options;
  options.tp = tp;
  return model::build_transformer(tiny(), options);
}

std::span<float> values_of(torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
}

std::vector<float> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

int param_index(const model::ModelSpec& spec, const std::string& name) {
  for (std::size_t p = 0; p < spec.params.size(); ++p)
    if (spec.params[p].name == name) return static_cast<int>(p);
  ADD_FAILURE() << "no param " << name;
  return 0;
}

void init_all(Qwen3Model& m, const model::ModelSpec& spec, int tp, int tp_rank) {
  for (int p = 0; p < m.num_params(); ++p)
    init_param(spec.params[p], tiny(), tp, tp_rank, kSeed, values_of(m.param(p)));
}

// Shard t of T of a global tensor of `param`, sliced by hand: rows (fc1: gate rows t, then up
// rows t), columns, or everything, as model.h describes the layout.
torch::Tensor hand_shard(const model::ParamSpec& param, int size, int t,
                         const torch::Tensor& global) {
  if (param.tp_split_dim == 1) {
    const std::int64_t n = global.size(1) / size;
    return global.narrow(1, t * n, n).contiguous();
  }
  if (param.tp_split_dim == 0) {
    const std::string suffix = "mlp.linear_fc1.weight";
    const bool fc1 =
        param.name.size() >= suffix.size() &&
        param.name.compare(param.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (fc1) {
      const std::int64_t f = global.size(0) / 2, n = f / size;
      return torch::cat({global.narrow(0, t * n, n), global.narrow(0, f + t * n, n)}).contiguous();
    }
    const std::int64_t n = global.size(0) / size;
    return global.narrow(0, t * n, n).contiguous();
  }
  return global.contiguous();
}

double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size()) return 1e30;
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A fixed batch: inputs and targets [batch, seq] int64 in [0, 512), loss weights [batch * seq].
struct Batch {
  torch::Tensor inputs, targets, weights;
};

Batch fixed_batch(std::int64_t batch, std::int64_t seq, std::uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.inputs = torch::randint(0, 512, {batch, seq}, torch::kInt64);
  b.targets = torch::randint(0, 512, {batch, seq}, torch::kInt64);
  b.weights = torch::randn({batch * seq});
  return b;
}

// One rank's results: losses [B * S], local logits [B, S, V/T], every param's gradient (local).
struct RunResult {
  std::vector<float> losses;
  torch::Tensor logits;
  std::vector<std::vector<float>> grads;
};

// Forward, then backward of sum(losses * weights).
RunResult forward_backward(Qwen3Model& m, const Batch& b) {
  RunResult r;
  const torch::Tensor losses = m.token_losses(b.inputs, b.targets);
  (losses * b.weights).sum().backward();
  r.losses = to_vector(losses);
  {
    torch::NoGradGuard no_grad;
    r.logits = m.local_logits(b.inputs).detach().clone();
  }
  for (int p = 0; p < m.num_params(); ++p) r.grads.push_back(to_vector(m.param(p).grad()));
  return r;
}

class Qwen3ModelTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(Qwen3ModelTest, InitShardsAreSlicesOfTheTp1Init) {
  const model::ModelSpec spec1 = tiny_spec(1), spec2 = tiny_spec(2);
  ASSERT_EQ(spec1.params.size(), spec2.params.size());
  bool saw_fc1 = false;
  for (std::size_t p = 0; p < spec1.params.size(); ++p) {
    const model::ParamSpec& ps1 = spec1.params[p];
    const model::ParamSpec& ps2 = spec2.params[p];
    SCOPED_TRACE(ps2.name);
    ASSERT_EQ(ps1.name, ps2.name);
    ASSERT_EQ(ps1.shape, ps2.shape);
    std::vector<float> global(static_cast<std::size_t>(ps1.numel()));
    init_param(ps1, tiny(), 1, 0, kSeed, global);
    const torch::Tensor global_tensor = torch::from_blob(global.data(), ps1.shape, torch::kFloat32);
    saw_fc1 = saw_fc1 || ps2.name.find("linear_fc1.weight") != std::string::npos;
    for (int t = 0; t < 2; ++t) {
      std::vector<float> local(static_cast<std::size_t>(ps2.local_numel(2)));
      init_param(ps2, tiny(), 2, t, kSeed, local);
      EXPECT_TRUE(bitwise_equal(local, to_vector(hand_shard(ps2, 2, t, global_tensor))))
          << "rank " << t;
      EXPECT_TRUE(bitwise_equal(local, shard_of(ps2, 2, t, global))) << "rank " << t;
    }
  }
  EXPECT_TRUE(saw_fc1);
}

// model.h: weights N(0, 0.02), linear_proj / linear_fc2 N(0, 0.02 / sqrt(2 layers)), norms 1.
TEST_F(Qwen3ModelTest, InitFollowsTheDocumentedDistributions) {
  const model::ModelSpec spec = tiny_spec(1);
  const auto stats = [&](const std::string& name) {
    const model::ParamSpec& ps = spec.params[param_index(spec, name)];
    std::vector<float> v(static_cast<std::size_t>(ps.numel()));
    init_param(ps, tiny(), 1, 0, kSeed, v);
    const torch::Tensor t = torch::tensor(v);
    return std::pair{t.mean().item<double>(), t.std().item<double>()};
  };
  const auto [emb_mean, emb_std] = stats("embedding.word_embeddings.weight");  // 65536 draws
  EXPECT_NEAR(emb_mean, 0.0, 0.001);
  EXPECT_NEAR(emb_std, 0.02, 0.02 * 0.02);
  const auto [proj_mean, proj_std] = stats("decoder.layers.1.self_attention.linear_proj.weight");
  EXPECT_NEAR(proj_mean, 0.0, 0.001);
  EXPECT_NEAR(proj_std, 0.01, 0.01 * 0.03);  // 16384 draws, 0.02 / sqrt(4)
  const auto [fc1_mean, fc1_std] = stats("decoder.layers.0.mlp.linear_fc1.weight");
  EXPECT_NEAR(fc1_mean, 0.0, 0.001);
  EXPECT_NEAR(fc1_std, 0.02, 0.02 * 0.02);
  const auto [norm_mean, norm_std] = stats("decoder.layers.0.self_attention.q_layernorm.weight");
  EXPECT_EQ(norm_mean, 1.0);
  EXPECT_EQ(norm_std, 0.0);
  std::vector<float> wrong(10);
  EXPECT_THROW(init_param(spec.params[0], tiny(), 1, 0, kSeed, wrong), UsageError);
}

TEST_F(Qwen3ModelTest, Tp2MatchesTp1LossesLogitsAndGradientShards) {
  const model::ModelSpec spec1 = tiny_spec(1), spec2 = tiny_spec(2);
  ASSERT_EQ(spec2.arch.padded_vocab_size, 512);
  const Batch batch = fixed_batch(2, 16, 7);

  Qwen3Model reference(tiny(), spec1, TpGroup{});
  init_all(reference, spec1, 1, 0);
  const RunResult want = forward_backward(reference, batch);

  std::vector<RunResult> got(2);
  comm::run_on_thread_grid({1, 2, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
    const TpGroup tp{&grid.tp(), 2, grid.tp().rank()};
    Qwen3Model m(tiny(), spec2, tp);
    init_all(m, spec2, 2, tp.rank);
    got[static_cast<std::size_t>(tp.rank)] = forward_backward(m, batch);
  });

  const double loss_scale = std::max(1.0, max_abs(want.losses));
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    const RunResult& r = got[static_cast<std::size_t>(t)];
    EXPECT_LE(max_abs_diff(r.losses, want.losses) / loss_scale, kValueTolerance);
    EXPECT_TRUE(bitwise_equal(r.losses, got[0].losses));  // identical on every rank
    const torch::Tensor want_logits = want.logits.narrow(2, t * 256, 256);
    const double logit_scale = std::max(1.0, want_logits.abs().max().item<double>());
    EXPECT_LE((r.logits - want_logits).abs().max().item<double>() / logit_scale, kValueTolerance);
    ASSERT_EQ(r.grads.size(), spec2.params.size());
    for (std::size_t p = 0; p < spec2.params.size(); ++p) {
      const model::ParamSpec& ps = spec2.params[p];
      const std::vector<float> want_shard = shard_of(ps, 2, t, want.grads[p]);
      const double scale = max_abs(want.grads[p]);
      EXPECT_GT(scale, 0.0) << ps.name;
      EXPECT_LE(max_abs_diff(r.grads[p], want_shard) / scale, kGradTolerance) << ps.name;
      // Replicated params get the all-reduced gradient: the same bits on both ranks.
      if (ps.tp_split_dim == -1) {
        EXPECT_TRUE(bitwise_equal(r.grads[p], got[0].grads[p])) << ps.name;
      }
    }
  }
}

// MoE: qwen3-tiny with layer 1 a block of 4 experts (FFN 64, top-2). At TP 2 x EP 2 (the EP group
// is the two TP ranks: each dispatches half the tokens, holds 2 experts) the losses, the
// load-balancing loss and every gradient match one process holding everything, to rounding;
// the replicated router and norm get the same bits on both ranks, and each expert's gradient is
// on the rank holding it only.
model::TransformerConfig tiny_moe_config() {
  model::TransformerConfig c = tiny();
  c.num_experts = 4;
  c.experts_per_token = 2;
  c.moe_ffn_hidden = 64;
  c.mlp_only_layers = {0};
  c.norm_topk_prob = true;
  return c;
}

TEST_F(Qwen3ModelTest, MoeAtTp2Ep2MatchesOneProcess) {
  const model::TransformerConfig config = tiny_moe_config();
  model::BuildOptions options;
  options.tp = 2;
  const model::ModelSpec spec1 = model::build_transformer(config, {}),
                         spec2 = model::build_transformer(config, options);
  const Batch batch = fixed_batch(2, 16, 7);
  // sum(losses x weights) + 0.5 x the load-balancing loss: both paths reach the router.
  const auto run = [&](Qwen3Model& m, const model::ModelSpec& spec, int tp, int tp_rank) {
    for (int p = 0; p < m.num_params(); ++p)
      if (m.holds(p)) init_param(spec.params[p], config, tp, tp_rank, kSeed, values_of(m.param(p)));
    RunResult r;
    const torch::Tensor losses = m.token_losses(batch.inputs, batch.targets);
    const torch::Tensor balance = m.load_balancing_loss();
    ((losses * batch.weights).sum() + 0.5 * balance).backward();
    r.losses = to_vector(losses);
    r.losses.push_back(balance.item<float>());
    for (int p = 0; p < m.num_params(); ++p)
      r.grads.push_back(m.holds(p) ? to_vector(m.param(p).grad()) : std::vector<float>{});
    return r;
  };
  Qwen3Model reference(config, spec1, TpGroup{});
  const RunResult want = run(reference, spec1, 1, 0);
  std::vector<comm::ExpertGroups> experts =
      comm::make_thread_expert_groups({1, 2, 1, 2, 1}, comm::ReduceMode::kDeterministic);
  std::vector<RunResult> got(2);
  comm::run_on_thread_grid(
      {1, 2, 1, 2, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
        const int t = grid.tp().rank();
        const comm::ExpertGroups& e = experts[static_cast<std::size_t>(grid.world().rank())];
        Qwen3Model m(config, spec2, TpGroup{&grid.tp(), 2, t}, Qwen3Model::Storage::kOwned,
                     EpGroup{e.ep.get(), 2, e.coord.ep});
        got[static_cast<std::size_t>(t)] = run(m, spec2, 2, t);
      });
  const double loss_scale = std::max(1.0, max_abs(want.losses));
  int experts_seen = 0;
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE("rank " + std::to_string(t));
    const RunResult& r = got[static_cast<std::size_t>(t)];
    EXPECT_LE(max_abs_diff(r.losses, want.losses) / loss_scale, kValueTolerance);
    EXPECT_TRUE(bitwise_equal(r.losses, got[0].losses));
    for (std::size_t p = 0; p < spec2.params.size(); ++p) {
      const model::ParamSpec& ps = spec2.params[p];
      const int e = model::is_expert_param(ps) ? model::expert_index(ps) : -1;
      if (e >= 0) {  // experts 0, 1 on EP rank 0 (TP rank 0), 2, 3 on rank 1
        EXPECT_EQ(r.grads[p].empty(), e / 2 != t) << ps.name;
        if (r.grads[p].empty()) continue;
        ++experts_seen;
      }
      const double scale = max_abs(want.grads[p]);
      EXPECT_GT(scale, 0.0) << ps.name;
      EXPECT_LE(max_abs_diff(r.grads[p], shard_of(ps, 2, t, want.grads[p])) / scale, kGradTolerance)
          << ps.name;
      if (ps.tp_split_dim == -1 && e < 0) {
        EXPECT_TRUE(bitwise_equal(r.grads[p], got[0].grads[p])) << ps.name;
      }
    }
  }
  EXPECT_EQ(experts_seen, 2 * 4);  // fc1 and fc2 of each of the 4 experts, once
}

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST_F(Qwen3ModelTest, ConstructorNamesAParamWithTheWrongShape) {
  model::ModelSpec spec = tiny_spec(1);
  const std::string name = "decoder.layers.1.mlp.linear_fc2.weight";
  spec.params[param_index(spec, name)].shape = {128, 380};
  EXPECT_THAT(usage_error_of([&] { Qwen3Model m(tiny(), spec, TpGroup{}); }),
              ::testing::AllOf(::testing::HasSubstr(name), ::testing::HasSubstr("[128, 380]"),
                               ::testing::HasSubstr("[128, 384]")));
}

TEST_F(Qwen3ModelTest, ConstructorNamesAMissingParam) {
  model::ModelSpec spec = tiny_spec(1);
  const std::string name = "decoder.layers.0.self_attention.k_layernorm.weight";
  spec.params.erase(spec.params.begin() + param_index(spec, name));
  EXPECT_THAT(usage_error_of([&] { Qwen3Model m(tiny(), spec, TpGroup{}); }),
              ::testing::HasSubstr(name));
}

TEST_F(Qwen3ModelTest, ConstructorNamesAParamTheModelLacks) {
  model::ModelSpec spec = tiny_spec(1);
  spec.params[param_index(spec, "decoder.final_layernorm.weight")].name = "decoder.final_norm.w";
  EXPECT_THAT(usage_error_of([&] { Qwen3Model m(tiny(), spec, TpGroup{}); }),
              ::testing::HasSubstr("decoder.final_norm.w"));
}

// Logits at init have std ~0.02 sqrt(h) = 0.23, so the loss is near that of uniform logits.
TEST_F(Qwen3ModelTest, LossAtInitIsNearLogOfPaddedVocab) {
  const model::ModelSpec spec = tiny_spec(1);
  Qwen3Model m(tiny(), spec, TpGroup{});
  init_all(m, spec, 1, 0);
  const Batch batch = fixed_batch(4, 64, 8);
  torch::NoGradGuard no_grad;
  const double mean = m.token_losses(batch.inputs, batch.targets).mean().item<double>();
  EXPECT_NEAR(mean, std::log(static_cast<double>(spec.arch.padded_vocab_size)), 0.1);
}

TEST_F(Qwen3ModelTest, ChangingTheLastTokenChangesOnlyTheLastLoss) {
  const model::ModelSpec spec = tiny_spec(1);
  Qwen3Model m(tiny(), spec, TpGroup{});
  init_all(m, spec, 1, 0);
  const Batch batch = fixed_batch(2, 16, 9);
  torch::Tensor changed = batch.inputs.clone();
  changed.select(1, 15).add_(1).remainder_(512);
  torch::NoGradGuard no_grad;
  const torch::Tensor before = m.token_losses(batch.inputs, batch.targets).view({2, 16});
  const torch::Tensor after = m.token_losses(changed, batch.targets).view({2, 16});
  for (std::int64_t b = 0; b < 2; ++b) {
    const torch::Tensor earlier_before = before[b].narrow(0, 0, 15).contiguous();
    const torch::Tensor earlier_after = after[b].narrow(0, 0, 15).contiguous();
    EXPECT_TRUE(bitwise_equal(to_vector(earlier_before), to_vector(earlier_after))) << "row " << b;
    EXPECT_GT(std::fabs(before[b][15].item<double>() - after[b][15].item<double>()), 1e-4)
        << "row " << b;
  }
}

TEST_F(Qwen3ModelTest, BoundParamAccumulatesIntoExternalMemory) {
  const model::ModelSpec spec = tiny_spec(1);
  Qwen3Model m(tiny(), spec, TpGroup{});
  init_all(m, spec, 1, 0);
  const int p = param_index(spec, "decoder.layers.0.mlp.linear_fc2.weight");
  std::vector<float> value = to_vector(m.param(p));
  std::vector<float> grad(value.size(), 0.0f);
  m.bind(p, value, grad);
  EXPECT_EQ(m.param(p).data_ptr<float>(), value.data());
  EXPECT_EQ(m.param(p).grad().data_ptr<float>(), grad.data());

  const Batch batch = fixed_batch(2, 16, 10);
  const torch::Tensor first = m.token_losses(batch.inputs, batch.targets);
  (first * batch.weights).sum().backward();
  const std::vector<float> once = grad;
  EXPECT_GT(max_abs(once), 0.0);
  const torch::Tensor second = m.token_losses(batch.inputs, batch.targets);
  (second * batch.weights).sum().backward();
  std::vector<float> twice(once.size());
  for (std::size_t i = 0; i < once.size(); ++i) twice[i] = once[i] + once[i];
  EXPECT_TRUE(bitwise_equal(grad, twice));

  for (float& x : value) x *= 3.0f;
  torch::NoGradGuard no_grad;
  const std::vector<float> scaled = to_vector(m.token_losses(batch.inputs, batch.targets));
  EXPECT_GT(max_abs_diff(scaled, to_vector(first)), 1e-4);
}

// --precision bf16: a bf16 model (params, gradients and activations bf16) from the fp32 init
// rounded to bf16 gives per-token losses in fp32 within 2% of the fp32 model's (bf16 keeps 8
// bits: a few 1e-3 relative per product, over two layers), and every gradient bf16.
TEST_F(Qwen3ModelTest, Bf16ModelLossesAreFp32AndNearTheFp32Models) {
  const model::ModelSpec spec = tiny_spec(1);
  Qwen3Model f32(tiny(), spec, TpGroup{});
  init_all(f32, spec, 1, 0);
  Qwen3Model b16(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned, {}, {}, DType::kBF16);
  EXPECT_EQ(b16.dtype(), DType::kBF16);
  {
    torch::NoGradGuard no_grad;
    for (int p = 0; p < b16.num_params(); ++p) b16.param(p).copy_(f32.param(p));
  }
  const Batch batch = fixed_batch(2, 16, 11);
  const torch::Tensor want = f32.token_losses(batch.inputs, batch.targets);
  const torch::Tensor got = b16.token_losses(batch.inputs, batch.targets);
  ASSERT_EQ(got.scalar_type(), torch::kFloat32);
  const double scale = want.abs().max().item<double>();
  EXPECT_LT((got - want).abs().max().item<double>() / scale, 2e-2);
  EXPECT_GT((got - want).abs().max().item<double>(), 0.0);  // it did compute in bf16
  (got * batch.weights).sum().backward();
  for (int p = 0; p < b16.num_params(); ++p) {
    ASSERT_EQ(b16.param(p).grad().scalar_type(), torch::kBFloat16) << spec.params[p].name;
    EXPECT_GT(b16.param(p).grad().abs().max().item<double>(), 0.0) << spec.params[p].name;
  }
}

// --grad-reduce-in-fp32 (Megatron's main_grad): a bf16 param bound with an fp32 gradient buffer
// gets each backward's bf16 gradient added there in fp32, and no .grad of its own. Expected: the
// sum in fp32 of the bf16 gradients an unbound twin model produces for the same two batches.
TEST_F(Qwen3ModelTest, Bf16ParamWithFp32GradientAddsEachBackwardInFp32) {
  const model::ModelSpec spec = tiny_spec(1);
  const auto make = [&] {
    auto m = std::make_unique<Qwen3Model>(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned,
                                          EpGroup{}, PipelineStage{}, DType::kBF16);
    torch::NoGradGuard no_grad;
    for (int p = 0; p < m->num_params(); ++p) {
      std::vector<float> init(static_cast<std::size_t>(m->param(p).numel()));
      init_param(spec.params[static_cast<std::size_t>(p)], tiny(), 1, 0, kSeed, init);
      m->param(p).copy_(torch::tensor(init).view(m->param(p).sizes()));
    }
    return m;
  };
  const std::unique_ptr<Qwen3Model> bound = make(), twin = make();
  const int p = param_index(spec, "decoder.layers.1.self_attention.linear_qkv.weight");
  const torch::Tensor value = bound->param(p).detach().clone();
  std::vector<float> main(static_cast<std::size_t>(value.numel()), 0.0f);
  bound->bind(p, TypedSpan(value.data_ptr(), value.numel(), DType::kBF16), TypedSpan(main));
  std::vector<float> want(main.size(), 0.0f);
  for (std::uint64_t seed : {31u, 32u}) {
    const Batch batch = fixed_batch(2, 16, seed);
    (bound->token_losses(batch.inputs, batch.targets) * batch.weights).sum().backward();
    EXPECT_FALSE(bound->param(p).grad().defined());
    torch::Tensor& g = twin->param(p).mutable_grad();
    g.zero_();
    (twin->token_losses(batch.inputs, batch.targets) * batch.weights).sum().backward();
    const torch::Tensor wide = g.to(torch::kFloat32).contiguous();
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += wide.data_ptr<float>()[i];
  }
  EXPECT_GT(max_abs(main), 0.0);
  EXPECT_TRUE(bitwise_equal(main, want));
}

// Pipeline stages: qwen3-tiny split in two (layer 0 | layer 1 and the head) holds each param on
// the stage that reads it (the tied embedding on both), and the stages chained by hand give the
// whole model's losses and gradients bit for bit. The tied embedding's gradient comes out right
// only as the trainer forms it: the last stage's copy (bound without a gradient buffer) hands its
// gradient to the first stage, whose backward takes it through a view of the embedding, so
// autograd adds the two uses before accumulating, as in the whole model.
TEST_F(Qwen3ModelTest, PipelineStagesChainToTheWholeModelBitwise) {
  const model::ModelSpec spec = tiny_spec(1);
  Qwen3Model whole(tiny(), spec, TpGroup{});
  init_all(whole, spec, 1, 0);
  Qwen3Model first(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned, {}, {0, 2, {}});
  Qwen3Model last(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned, {}, {1, 2, {}});
  EXPECT_TRUE(first.stage().first() && !first.stage().last());
  EXPECT_TRUE(last.stage().last() && !last.stage().first());
  const int embedding = param_index(spec, "embedding.word_embeddings.weight");
  std::vector<float> copy;
  for (int p = 0; p < whole.num_params(); ++p) {
    const std::string& name = spec.params[static_cast<std::size_t>(p)].name;
    const bool layer0 = name.rfind("decoder.layers.0.", 0) == 0;
    const bool layer1 = name.rfind("decoder.layers.1.", 0) == 0;
    EXPECT_EQ(first.holds(p), p == embedding || layer0) << name;
    EXPECT_EQ(last.holds(p), p == embedding || layer1 || name == "decoder.final_layernorm.weight")
        << name;
    for (Qwen3Model* m : {&first, &last})
      if (m->holds(p))
        init_param(spec.params[static_cast<std::size_t>(p)], tiny(), 1, 0, kSeed,
                   values_of(m->param(p)));
  }
  copy = to_vector(last.param(embedding));
  last.bind_value(embedding, copy);
  EXPECT_FALSE(last.param(embedding).grad().defined());

  const Batch batch = fixed_batch(2, 16, 11);
  const torch::Tensor losses = whole.token_losses(batch.inputs, batch.targets);
  (losses * batch.weights).sum().backward();

  const torch::Tensor hidden = first.stage_forward(batch.inputs, torch::Tensor());
  EXPECT_EQ(hidden.sizes().vec(), (std::vector<std::int64_t>{2, 16, tiny().hidden}));
  const torch::Tensor received = hidden.detach().clone().set_requires_grad(true);
  const torch::Tensor stage_losses = last.stage_forward(received, batch.targets);
  EXPECT_TRUE(bitwise_equal(to_vector(stage_losses), to_vector(losses)));
  (stage_losses * batch.weights).sum().backward();
  torch::Tensor& weight = first.param(embedding);
  torch::autograd::backward({hidden, weight.view_as(weight)},
                            {received.grad(), last.param(embedding).grad()});
  for (int p = 0; p < whole.num_params(); ++p) {
    const std::string& name = spec.params[static_cast<std::size_t>(p)].name;
    Qwen3Model& owner = first.holds(p) ? first : last;
    EXPECT_TRUE(bitwise_equal(to_vector(owner.param(p).grad()), to_vector(whole.param(p).grad())))
        << name;
  }
}

TEST_F(Qwen3ModelTest, PipelineStageRefusesALayoutThatDoesNotFit) {
  const model::ModelSpec spec = tiny_spec(1);
  EXPECT_THROW(Qwen3Model(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned, {}, {0, 3, {}}),
               UsageError);
  EXPECT_THROW(Qwen3Model(tiny(), spec, TpGroup{}, Qwen3Model::Storage::kOwned, {}, {0, 2, {2, 1}}),
               UsageError);
}

}  // namespace
}  // namespace canzona::train
