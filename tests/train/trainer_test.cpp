// The training loop on the engine (trainer.h) with threads as ranks
// (include/canzona/comm/thread.h): every strategy against the single-process reference, the
// non-finite stop, the hooks that hand gradients to the engine during backward, and the lr schedule
// reaching the optimizers; ZeRO-3 against the reference and stage 1.
#include "canzona/train/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/train/model.h"
#include "train_threads.h"

namespace canzona::train {
namespace {

using ::testing::HasSubstr;

// A small English corpus written by the test (no dependency on the installed default corpus).
Corpus test_corpus(std::int64_t seq_len) {
  return test_util::write_corpus(
      "canzona_trainer_test",
      {"The quick brown fox jumps over the lazy dog.\n",
       "Pack my box with five dozen liquor jugs.\n", "How vexingly quick daft zebras jump!\n",
       "Sphinx of black quartz, judge my vow.\n"},
      7, seq_len);
}

TrainOptions tiny_options(int dp, int tp) {
  TrainOptions o;
  o.job.model = "qwen3-tiny";
  o.job.dims.dp = dp;
  o.job.dims.tp = tp;
  o.steps = 3;
  o.seq_len = 16;
  o.micro_batch = 2;
  o.grad_accum = 2;
  o.eval_every = 2;
  o.eval_windows = 4;
  o.schedule.warmup = 1;
  o.schedule.total = o.steps;
  o.strategies = {plan::Strategy::kSc,  plan::Strategy::kLayerwise, plan::Strategy::kLayerwisePaper,
                  plan::Strategy::kAsc, plan::Strategy::kLbAsc,     plan::Strategy::kFsdpA2a};
  o.keep_final_params = true;
  return o;
}

// Runs train() on a thread grid; returns world rank 0's runs.
std::vector<StrategyRun> train_on_threads(const TrainOptions& o, const Corpus& corpus) {
  return test_util::train_threaded(model::preset(o.job.model), o, corpus);
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(TrainThreads, EveryStrategyIsBitwiseTheSingleProcessRunAtDp2) {
  const TrainOptions o = tiny_options(2, 1);
  const Corpus corpus = test_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
  const model::TransformerConfig config = model::preset(o.job.model);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  ASSERT_EQ(runs.size(), 6u);
  ASSERT_EQ(ref.losses.size(), 3u);
  for (const StrategyRun& r : runs) {
    SCOPED_TRACE(plan::to_string(r.strategy));
    ASSERT_EQ(r.steps.size(), 3u);
    for (std::size_t s = 0; s < 3; ++s)
      EXPECT_TRUE(same_bits(r.steps[s].loss, ref.losses[s]))
          << "step " << s + 1 << ": " << r.steps[s].loss << " vs " << ref.losses[s];
    ASSERT_EQ(r.final_params.size(), ref.params.size());
    for (std::size_t p = 0; p < ref.params.size(); ++p) {
      ASSERT_EQ(r.final_params[p].size(), ref.params[p].size());
      EXPECT_EQ(std::memcmp(r.final_params[p].data(), ref.params[p].data(),
                            ref.params[p].size() * sizeof(float)),
                0)
          << "param " << p;
    }
    EXPECT_EQ(r.params_hash, runs.front().params_hash);
    ASSERT_EQ(r.val.size(), 2u);  // after step 2 and after the last step
    EXPECT_TRUE(same_bits(r.val[1].loss, runs.front().val[1].loss));
  }
  // The loss moved: the optimizer ran.
  EXPECT_FALSE(same_bits(ref.losses[0], ref.losses[2]));
}

TEST(TrainThreads, StrategiesAgreeBitwiseAtDp2Tp2AndFollowTheReferenceToRounding) {
  TrainOptions o = tiny_options(2, 2);
  o.job.qkv_split = model::QkvSplit::kQkv;
  o.job.split_fc1 = true;
  const Corpus corpus = test_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
  const model::TransformerConfig config = model::preset(o.job.model);
  const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
  for (const StrategyRun& r : runs) {
    SCOPED_TRACE(plan::to_string(r.strategy));
    EXPECT_EQ(r.params_hash, runs.front().params_hash);
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      EXPECT_TRUE(same_bits(r.steps[s].loss, runs.front().steps[s].loss));
      // fp32 rounding of a different summation order, a few steps deep: far below 1e-4.
      EXPECT_LT(std::fabs(r.steps[s].loss - ref.losses[s]) / std::fabs(ref.losses[s]), 1e-4);
    }
  }
}

TEST(TrainThreads, GradientsReachTheEngineDuringBackward) {
  TrainOptions o = tiny_options(2, 1);
  o.strategies = {plan::Strategy::kLbAsc};
  const Corpus corpus = test_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
  const model::ModelSpec spec = training_spec(model::preset(o.job.model), o);
  for (const StepRecord& s : runs.at(0).steps)
    EXPECT_EQ(s.grad_ready_in_backward, static_cast<int>(spec.params.size())) << s.step;
}

TEST(TrainThreads, ZeroLearningRateLeavesTheInitUntouched) {
  TrainOptions o = tiny_options(2, 1);
  o.strategies = {plan::Strategy::kLbAsc};
  o.job.optimizer_options["lr"] = 0.0;
  o.job.adamw_options["lr"] = 0.0;
  const Corpus corpus = test_corpus(o.seq_len);
  const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
  const model::TransformerConfig config = model::preset(o.job.model);
  const model::ModelSpec spec = training_spec(config, o);
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    std::vector<float> init(static_cast<std::size_t>(spec.params[p].numel()));
    init_param(spec.params[p], config, 1, 0, o.job.seed, init);
    EXPECT_EQ(
        std::memcmp(runs.at(0).final_params[p].data(), init.data(), init.size() * sizeof(float)), 0)
        << spec.params[p].name;
  }
}

// The copy of the final params is one more fp32 model; a run without --verify does not make it.
TEST(TrainThreads, FinalParamsAreCopiedOnlyWhenAsked) {
  TrainOptions o = tiny_options(2, 1);
  o.strategies = {plan::Strategy::kLbAsc};
  o.steps = 1;
  o.schedule.total = 1;
  o.keep_final_params = false;
  const std::vector<StrategyRun> runs = train_on_threads(o, test_corpus(o.seq_len));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].final_params.empty());
  EXPECT_NE(runs[0].params_hash, 0u);
}

TEST(TrainThreads, ANonFiniteGradientStopsEveryRankBeforeTheOptimizer) {
  TrainOptions o = tiny_options(2, 1);
  o.strategies = {plan::Strategy::kLbAsc};
  const faults::Scoped poison(faults::Fault::kPoisonLoss, {.rank = 1, .step = 2});
  const Corpus corpus = test_corpus(o.seq_len);
  const model::TransformerConfig config = model::preset(o.job.model);
  const model::ModelSpec spec = training_spec(config, o);
  std::mutex mutex;
  std::vector<std::string> messages;
  comm::run_on_thread_grid({2, 1, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
    torch::set_num_threads(1);
    try {
      train(grid, config, spec, o, corpus, Progress{});
    } catch (const NonFiniteLoss& e) {
      const std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(e.what());
    }
  });
  ASSERT_EQ(messages.size(), 2u) << "every rank stops";
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_THAT(messages[0], HasSubstr("step 2: non-finite"));
  EXPECT_THAT(messages[0], HasSubstr("first non-finite tensor: gradient of "));
}

// ZeRO-3 (--zero-stage 3): each rank keeps its DP shard of params and gradients and gathers
// buckets of about one layer around their use. Small buckets so the model spans several.
TrainOptions zero3_options(int dp, int tp) {
  TrainOptions o = tiny_options(dp, tp);
  o.job.zero_stage = ZeroStage::kThree;
  o.job.bucket_size = 16384;
  o.strategies = {plan::Strategy::kAsc, plan::Strategy::kLbAsc, plan::Strategy::kFsdpA2a};
  return o;
}

TEST(TrainZero3, IsBitwiseTheSingleProcessRunAtDp2AndDp3WithAccumulation) {
  for (int dp : {2, 3}) {
    SCOPED_TRACE(dp);
    const TrainOptions o = zero3_options(dp, 1);
    ASSERT_EQ(o.grad_accum, 2);
    const Corpus corpus = test_corpus(o.seq_len);
    const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
    const model::TransformerConfig config = model::preset(o.job.model);
    const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
    ASSERT_EQ(runs.size(), 3u);
    for (const StrategyRun& r : runs) {
      SCOPED_TRACE(plan::to_string(r.strategy));
      ASSERT_EQ(r.steps.size(), ref.losses.size());
      for (std::size_t s = 0; s < ref.losses.size(); ++s)
        EXPECT_TRUE(same_bits(r.steps[s].loss, ref.losses[s])) << "step " << s + 1;
      ASSERT_EQ(r.final_params.size(), ref.params.size());
      for (std::size_t p = 0; p < ref.params.size(); ++p)
        EXPECT_EQ(std::memcmp(r.final_params[p].data(), ref.params[p].data(),
                              ref.params[p].size() * sizeof(float)),
                  0)
            << "param " << p;
    }
  }
}

// Loss curves, validation losses, final params and optimizer state (main params and every state
// tensor, hashed per rank) of stage 3 are stage 1's to the bit on DP2, DP3 and DP2xTP2 with
// gradient accumulation; and stage 3 keeps only the shard.
void expect_stage_three_is_stage_one(int dp, int tp);

TEST(TrainZero3, EqualsStageOneBitwiseAndKeepsOnlyTheShard) {
  for (const auto& [dp, tp] : {std::pair{2, 1}, std::pair{3, 1}, std::pair{2, 2}})
    expect_stage_three_is_stage_one(dp, tp);
}

void expect_stage_three_is_stage_one(int dp, int tp) {
  SCOPED_TRACE(::testing::Message() << "dp " << dp << " tp " << tp);
  TrainOptions three = zero3_options(dp, tp);
  TrainOptions one = three;
  one.job.zero_stage = ZeroStage::kOne;
  ASSERT_EQ(three.grad_accum, 2);
  const Corpus corpus = test_corpus(three.seq_len);
  const std::vector<StrategyRun> a = train_on_threads(one, corpus);
  const std::vector<StrategyRun> b = train_on_threads(three, corpus);
  ASSERT_EQ(a.size(), b.size());
  // The TP-local params of qwen3-tiny, counted from its shapes (model.h).
  const model::TransformerConfig config = model::preset(three.job.model);
  const model::ModelSpec spec = training_spec(config, three);
  std::int64_t local = 0;
  for (const model::ParamSpec& p : spec.params) local += p.local_numel(tp);
  for (std::size_t k = 0; k < a.size(); ++k) {
    SCOPED_TRACE(plan::to_string(a[k].strategy));
    EXPECT_EQ(a[k].params_hash, b[k].params_hash);
    // The state is hashed where it lives, so it compares on equal plans: asc's and fsdp-a2a's
    // cuts do not depend on the memory model; lb-asc's may (under stage 3 it balances params and
    // gradients with the state), and its state then lives elsewhere (the checkpoint tests compare
    // it in model space).
    if (a[k].strategy != plan::Strategy::kLbAsc) {
      EXPECT_EQ(a[k].plan_hash, b[k].plan_hash);
    }
    if (a[k].plan_hash == b[k].plan_hash) {
      EXPECT_EQ(a[k].state_hash, b[k].state_hash);
      EXPECT_EQ(a[k].memory.optimizer_state_bytes, b[k].memory.optimizer_state_bytes);
    }
    ASSERT_EQ(a[k].steps.size(), b[k].steps.size());
    for (std::size_t s = 0; s < a[k].steps.size(); ++s)
      EXPECT_TRUE(same_bits(a[k].steps[s].loss, b[k].steps[s].loss));
    ASSERT_EQ(a[k].val.size(), b[k].val.size());
    for (std::size_t v = 0; v < a[k].val.size(); ++v)
      EXPECT_TRUE(same_bits(a[k].val[v].loss, b[k].val[v].loss));
    // Stage 1 keeps the whole TP-local buffer (plus padding) and the reduced shard beside the
    // gradient buffer; stage 3 keeps the shards only. lb-asc balances them and fsdp-a2a cuts equal
    // ones, so the larger shard is about 1/dp (under 3/(2 dp)); asc's start-index cuts may leave
    // one rank nearly everything.
    EXPECT_GE(a[k].memory.params_bytes, 4 * local);
    EXPECT_GT(a[k].memory.grads_bytes, a[k].memory.params_bytes);
    EXPECT_LE(b[k].memory.params_bytes, a[k].memory.params_bytes);
    EXPECT_LT(b[k].memory.grads_bytes, a[k].memory.grads_bytes);
    if (a[k].strategy != plan::Strategy::kAsc) {
      EXPECT_LT(b[k].memory.params_bytes, 4 * local * 3 / (2 * dp));
      EXPECT_LT(b[k].memory.grads_bytes, a[k].memory.grads_bytes / 2);
    }
    // Measured (the buffers' resident pages): stage 1 keeps at least what it accounts; stage 3
    // what it accounts and at most the two edge pages of each bucket's shard in each buffer.
    const plan::Plan plan = plan::make_plan(spec, launch::plan_options(three.job, a[k].strategy));
    const auto edges =
        static_cast<std::int64_t>(4 * sysconf(_SC_PAGESIZE) * plan.stages[0].layout.buckets.size());
    EXPECT_GE(a[k].memory.resident_kept_bytes, a[k].memory.kept_bytes);
    EXPECT_GE(b[k].memory.resident_kept_bytes, b[k].memory.kept_bytes - edges);
    EXPECT_LE(b[k].memory.resident_kept_bytes, b[k].memory.kept_bytes + edges);
    EXPECT_LT(b[k].memory.resident_kept_bytes, a[k].memory.resident_kept_bytes);
  }
}

TEST(TrainZero3, RefusesStrategiesThatCannotShardParams) {
  for (plan::Strategy st :
       {plan::Strategy::kSc, plan::Strategy::kLayerwise, plan::Strategy::kLayerwisePaper}) {
    TrainOptions o = zero3_options(2, 1);
    o.strategies = {st};
    try {
      validate(o);
      FAIL() << plan::to_string(st) << " accepted under ZeRO-3";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--zero-stage 3: strategy "));
      EXPECT_THAT(e.what(), HasSubstr(plan::to_string(st)));
    }
  }
  // A stage other than 1 or 3 cannot be spelled (ZeroStage; parse_zero_stage refuses 2).
  EXPECT_THROW(parse_zero_stage(2), UsageError);
  TrainOptions o = zero3_options(2, 1);
  o.job.zero_stage = ZeroStage::kThree;
  EXPECT_NO_THROW(validate(o));
}

// Pipeline stages (1F1B over threads as ranks): at PP 2, alone with 3 micro-batches and with
// DP 2 under ZeRO-3, every strategy's losses and final params are bitwise the single process's
// (qwen3-tiny ties its embeddings: the last stage's copy trains in step with the first's).
TEST(TrainThreads, PipelineStagesAreBitwiseTheSingleProcessRun) {
  for (const int dp : {1, 2}) {
    SCOPED_TRACE(dp);
    TrainOptions o = dp == 1 ? tiny_options(1, 1) : zero3_options(2, 1);
    o.job.dims.pp = 2;
    o.grad_accum = 3;
    o.keep_final_params = true;
    const Corpus corpus = test_corpus(o.seq_len);
    const std::vector<StrategyRun> runs = train_on_threads(o, corpus);
    const model::TransformerConfig config = model::preset(o.job.model);
    const ReferenceRun ref = run_reference(config, training_spec(config, o), o, corpus);
    ASSERT_EQ(runs.size(), o.strategies.size());
    for (const StrategyRun& r : runs) {
      SCOPED_TRACE(plan::to_string(r.strategy));
      ASSERT_EQ(r.steps.size(), ref.losses.size());
      for (std::size_t s = 0; s < ref.losses.size(); ++s)
        EXPECT_TRUE(same_bits(r.steps[s].loss, ref.losses[s]))
            << "step " << s + 1 << ": " << r.steps[s].loss << " vs " << ref.losses[s];
      ASSERT_EQ(r.final_params.size(), ref.params.size());
      for (std::size_t p = 0; p < ref.params.size(); ++p) {
        ASSERT_EQ(r.final_params[p].size(), ref.params[p].size()) << "param " << p;
        EXPECT_EQ(std::memcmp(r.final_params[p].data(), ref.params[p].data(),
                              ref.params[p].size() * sizeof(float)),
                  0)
            << "param " << p;
      }
      ASSERT_EQ(r.stage_steps.size(), 2u);
      EXPECT_EQ(r.stage_steps[0].size(), r.steps.size());
      ASSERT_EQ(r.val.size(), 2u);
      EXPECT_TRUE(same_bits(r.val[1].loss, runs.front().val[1].loss));
    }
  }
}

TEST(TrainSpec, PipelineStagesMustFitTheLayersAndTheModel) {
  TrainOptions o = tiny_options(1, 1);
  o.job.dims.pp = 2;
  EXPECT_NO_THROW(validate(o));
  EXPECT_NO_THROW(training_spec(model::preset("qwen3-tiny"), o));
  o.job.dims.pp = 3;
  EXPECT_THAT([&] { training_spec(model::preset("qwen3-tiny"), o); },
              testing::ThrowsMessage<UsageError>(HasSubstr(
                  "--pp 3 does not divide the 2 transformer layers of model 'qwen3-tiny'")));
  o.job.dims.pp = 2;
  o.job.dims.dp = 2;
  o.job.reduce_mode = comm::ReduceMode::kNative;
  EXPECT_THAT([&] { training_spec(model::preset("qwen3-tiny"), o); },
              testing::ThrowsMessage<UsageError>(
                  HasSubstr("--reduce-mode native with --pp 2 and --dp 2: model 'qwen3-tiny' ties "
                            "its embeddings")));
  EXPECT_NO_THROW(training_spec(model::preset("qwen3-mini"), o));  // untied
  o.job.reduce_mode = comm::ReduceMode::kDeterministic;
  o.job.dims.dp = 1;
  o.job.dims.pp = 3;
  o.job.pp_layout = {1, 1};
  EXPECT_THAT(
      [&] { training_spec(model::preset("qwen3-tiny"), o); },
      testing::ThrowsMessage<UsageError>(HasSubstr("--pp-layout 1,1 names 2 stages, --pp is 3")));
}

}  // namespace
}  // namespace canzona::train
