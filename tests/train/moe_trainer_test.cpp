// Mixture-of-experts training (trainer.h with expert groups) with threads as ranks: every strategy
// against the single-process reference at EP 1 (bitwise) and EP 2 (to rounding), bitwise across
// strategies at DP x EP and DP x TP x EP, idle experts, the load-balancing loss in the gradient,
// ZeRO-3, and the flags train refuses for MoE models (checkpoints: ckpt_moe_test.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/train/trainer.h"
#include "train_threads.h"

namespace canzona::train {
namespace {

using ::testing::HasSubstr;

Corpus moe_corpus(std::int64_t seq_len) {
  return test_util::write_corpus("canzona_moe_trainer_test",
                                 {"A mixture of experts routes every token to a few of them.\n",
                                  "Pack my box with five dozen liquor jugs.\n",
                                  "Experts that see no token still take an optimizer step.\n"},
                                 5, seq_len);
}

// qwen3-tiny's attention (2 layers, hidden 128) with layer 1 a MoE block of `experts` experts of
// FFN 64 (layer 0 keeps its dense MLP, HF's mlp_only_layers), a visible aux-loss weight.
model::TransformerConfig tiny_moe(int experts, int top_k) {
  model::TransformerConfig c = model::preset("qwen3-tiny");
  c.name = "tiny-moe";
  c.num_experts = experts;
  c.experts_per_token = top_k;
  c.moe_ffn_hidden = 64;
  c.mlp_only_layers = {0};
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = 0.01;
  return c;
}

TrainOptions moe_options(int dp, int tp, int ep) {
  TrainOptions o;
  o.job.model = "tiny-moe";
  o.job.dims.dp = dp;
  o.job.dims.tp = tp;
  o.job.dims.ep = ep;
  o.steps = 3;
  o.seq_len = 16;
  o.micro_batch = 2;
  o.grad_accum = 2;
  o.eval_every = 3;
  o.eval_windows = 4;
  o.schedule.warmup = 1;
  o.schedule.total = o.steps;
  o.strategies = {plan::Strategy::kSc,  plan::Strategy::kLayerwise, plan::Strategy::kLayerwisePaper,
                  plan::Strategy::kAsc, plan::Strategy::kLbAsc,     plan::Strategy::kFsdpA2a};
  o.keep_final_params = true;
  return o;
}

bool bits_equal(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Every final param equal to the reference's, byte for byte.
void expect_params_bitwise(const std::vector<std::vector<float>>& got,
                           const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t p = 0; p < want.size(); ++p) {
    ASSERT_EQ(got[p].size(), want[p].size()) << p;
    EXPECT_EQ(std::memcmp(got[p].data(), want[p].data(), want[p].size() * sizeof(float)), 0)
        << "param " << p;
  }
}

// Every strategy's losses, load-balancing losses, validation and final params equal the first's.
void expect_strategies_agree(const std::vector<StrategyRun>& runs, std::size_t steps) {
  ASSERT_EQ(runs.size(), 6u);
  for (const StrategyRun& r : runs) {
    SCOPED_TRACE(plan::to_string(r.strategy));
    ASSERT_EQ(r.steps.size(), steps);
    for (std::size_t s = 0; s < steps; ++s) {
      EXPECT_TRUE(bits_equal(r.steps[s].loss, runs.front().steps[s].loss)) << "step " << s + 1;
      EXPECT_TRUE(bits_equal(r.steps[s].aux_loss, runs.front().steps[s].aux_loss));
    }
    ASSERT_EQ(r.val.size(), 1u);
    EXPECT_TRUE(bits_equal(r.val[0].loss, runs.front().val[0].loss));
    EXPECT_EQ(r.params_hash, runs.front().params_hash);
  }
}

// At EP 1 every rank holds every expert and reduces its own gradient over expert DP = DP: the
// single process that replays the DP ranks in order is bitwise the run, experts, routers and the
// aux loss included.
TEST(TrainMoe, EveryStrategyIsBitwiseTheSingleProcessRunAtEp1) {
  const model::TransformerConfig config = tiny_moe(4, 2);
  const TrainOptions o = moe_options(2, 1, 1);
  const Corpus corpus = moe_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = test_util::train_threaded(config, o, corpus);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  expect_strategies_agree(runs, 3);
  for (const StrategyRun& r : runs) {
    SCOPED_TRACE(plan::to_string(r.strategy));
    for (std::size_t s = 0; s < 3; ++s)
      EXPECT_TRUE(bits_equal(r.steps[s].loss, ref.losses[s]))
          << "step " << s + 1 << ": " << r.steps[s].loss << " vs " << ref.losses[s];
    expect_params_bitwise(r.final_params, ref.params);
  }
  // The load-balancing loss is reported: E sum_e F_e P_e is k = 2 for an even routing, and a
  // router initialised N(0, 0.02) routes nearly evenly.
  for (const StepRecord& s : runs.front().steps) EXPECT_NEAR(s.aux_loss, 2.0, 0.5) << s.step;
  EXPECT_FALSE(bits_equal(ref.losses[0], ref.losses[2]));  // it trained
}

// Pipeline stages with MoE layers on both, and with a dense first stage that only relays the
// routing statistics (the load-balancing loss spans them: each stage adds its share with every
// stage's expert choices): DP 2 x PP 2, 3 micro-batches, EP 1: every
// strategy bitwise the single process; the reported load-balancing loss is the whole model's, to
// rounding (the stages' probability sums add in stage order).
TEST(TrainMoe, PipelineStagesAreBitwiseTheSingleProcessRun) {
  for (const bool dense_first : {false, true}) {
    SCOPED_TRACE(dense_first ? "layer 0 dense (stage 0 relays the statistics)" : "both MoE");
    model::TransformerConfig config = tiny_moe(4, 2);
    if (!dense_first) config.mlp_only_layers.clear();
    TrainOptions o = moe_options(2, 1, 1);
    o.job.dims.pp = 2;
    o.grad_accum = 3;
    const Corpus corpus = moe_corpus(o.seq_len);
    const std::vector<StrategyRun> runs = test_util::train_threaded(config, o, corpus);
    TrainOptions one = o;
    one.job.dims.pp = 1;
    one.strategies = {plan::Strategy::kLbAsc};
    const std::vector<StrategyRun> flat = test_util::train_threaded(config, one, corpus);
    const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
    ASSERT_EQ(runs.size(), 6u);
    for (const StrategyRun& r : runs) {
      SCOPED_TRACE(plan::to_string(r.strategy));
      ASSERT_EQ(r.steps.size(), 3u);
      for (std::size_t s = 0; s < 3; ++s) {
        EXPECT_TRUE(bits_equal(r.steps[s].loss, ref.losses[s]))
            << "step " << s + 1 << ": " << r.steps[s].loss << " vs " << ref.losses[s];
        EXPECT_NEAR(r.steps[s].aux_loss, flat[0].steps[s].aux_loss,
                    1e-5 * flat[0].steps[s].aux_loss);
      }
      expect_params_bitwise(r.final_params, ref.params);
    }
  }
}

// DP4 x EP2 (expert DP 2): tokens cross the EP group, so an expert's gradient is one GEMM over
// two ranks' tokens: the reference is followed to rounding, the strategies agree bitwise.
TEST(TrainMoe, StrategiesAgreeBitwiseAtDp4Ep2AndFollowTheReferenceToRounding) {
  const model::TransformerConfig config = tiny_moe(4, 2);
  const TrainOptions o = moe_options(4, 1, 2);
  const Corpus corpus = moe_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = test_util::train_threaded(config, o, corpus);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  expect_strategies_agree(runs, 3);
  for (std::size_t s = 0; s < 3; ++s)
    EXPECT_LT(std::fabs(runs[0].steps[s].loss - ref.losses[s]) / ref.losses[s], 1e-5) << s;
  // Every expert came back to rank 0 (from the EP rank holding it) and moved as the reference's.
  const model::ModelSpec spec = training_spec(config, o);
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    ASSERT_EQ(runs[0].final_params[p].size(), ref.params[p].size()) << spec.params[p].name;
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < ref.params[p].size(); ++i) {
      diff = std::max(diff, std::fabs(double{runs[0].final_params[p][i]} - ref.params[p][i]));
      norm = std::max(norm, std::fabs(double{ref.params[p][i]}));
    }
    EXPECT_LT(diff, 1e-4 * std::max(norm, 1.0)) << spec.params[p].name;
  }
}

// DP2 x TP2 x EP2: the EP group is the two TP ranks of a DP index, each dispatching its half of
// the tokens.
TEST(TrainMoe, StrategiesAgreeBitwiseAtDp2Tp2Ep2AndFollowTheReferenceToRounding) {
  const model::TransformerConfig config = tiny_moe(4, 2);
  TrainOptions o = moe_options(2, 2, 2);
  o.job.split_fc1 = true;
  const Corpus corpus = moe_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = test_util::train_threaded(config, o, corpus);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  expect_strategies_agree(runs, 3);
  for (std::size_t s = 0; s < 3; ++s)
    EXPECT_LT(std::fabs(runs[0].steps[s].loss - ref.losses[s]) / ref.losses[s], 1e-4) << s;
}

// Top-1 of 8 experts over 2 tokens per rank: an EP group routes 4 tokens, so at least 4 of its 8
// experts receive none in every step (pigeonhole). Their gradient is zero, their update the
// optimizer's for a zero gradient, identical on every strategy.
TEST(TrainMoe, IdleExpertsTakeTheSameStepOnEveryStrategy) {
  const model::TransformerConfig config = tiny_moe(8, 1);
  TrainOptions o = moe_options(2, 1, 2);
  o.seq_len = 2;
  o.micro_batch = 1;
  o.grad_accum = 1;
  const Corpus corpus = moe_corpus(16);
  const std::vector<StrategyRun> runs = test_util::train_threaded(config, o, corpus);
  expect_strategies_agree(runs, 3);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  for (const auto& p : runs[0].final_params)
    for (float x : p) ASSERT_TRUE(std::isfinite(x));
  for (std::size_t s = 0; s < 3; ++s)
    EXPECT_LT(std::fabs(runs[0].steps[s].loss - ref.losses[s]) / ref.losses[s], 1e-5) << s;
}

// ZeRO-3 shards the expert buffer over expert DP as it shards the dense one over DP: the same
// losses and params as stage 1 (its layer-sized buckets make other plans, so the optimizer state
// is spread differently).
TEST(TrainMoe, Zero3IsBitwiseStageOneAtDp4Ep2) {
  const model::TransformerConfig config = tiny_moe(4, 2);
  TrainOptions one = moe_options(4, 1, 2);
  one.strategies = {plan::Strategy::kAsc, plan::Strategy::kLbAsc, plan::Strategy::kFsdpA2a};
  TrainOptions three = one;
  three.job.zero_stage = ZeroStage::kThree;
  const Corpus corpus = moe_corpus(one.seq_len);
  const std::vector<StrategyRun> a = test_util::train_threaded(config, one, corpus);
  const std::vector<StrategyRun> b = test_util::train_threaded(config, three, corpus);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(plan::to_string(a[k].strategy));
    EXPECT_EQ(b[k].params_hash, a[k].params_hash);
    for (std::size_t s = 0; s < a[k].steps.size(); ++s)
      EXPECT_TRUE(bits_equal(b[k].steps[s].loss, a[k].steps[s].loss));
    ASSERT_EQ(b[k].final_params.size(), a[k].final_params.size());
    for (std::size_t p = 0; p < a[k].final_params.size(); ++p)
      EXPECT_EQ(b[k].final_params[p], a[k].final_params[p]) << p;
    // Each rank keeps a shard: less than a stage-1 rank's params.
    EXPECT_LT(b[k].memory.params_bytes, a[k].memory.params_bytes);
  }
}

std::string training_spec_error(const model::TransformerConfig& config, const TrainOptions& o) {
  try {
    training_spec(config, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TrainMoe, RefusesWhatMoeTrainingDoesNotRun) {
  const model::TransformerConfig moe = tiny_moe(4, 2);
  TrainOptions o = moe_options(4, 1, 2);
  o.job.dims.etp = 2;
  EXPECT_THAT(training_spec_error(moe, o), HasSubstr("--etp 2: train keeps each expert whole"));
  o = moe_options(4, 1, 3);
  EXPECT_THAT(training_spec_error(moe, o), HasSubstr("--ep 3 does not divide the 4 experts"));
  o = moe_options(2, 1, 4);
  EXPECT_THAT(training_spec_error(moe, o), HasSubstr("--ep"));
  o = moe_options(2, 1, 2);
  EXPECT_THAT(training_spec_error(model::preset("qwen3-tiny"), o),
              HasSubstr("--ep/--etp need a mixture-of-experts model"));
  EXPECT_EQ(training_spec_error(moe, moe_options(4, 1, 2)), "no error");
}

}  // namespace
}  // namespace canzona::train
