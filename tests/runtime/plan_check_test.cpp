// validate_plan accepts every plan make_plan produces for the grid it was made for and rejects a
// plan that does not match the model or the grid, naming what is wrong.
#include <gtest/gtest.h>

#include <algorithm>

#include "canzona/model/load.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/session.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

using launch::PlanAgreementError;
using launch::validate_plan;

using plan::Strategy;

constexpr Strategy kAll[] = {Strategy::kSc,  Strategy::kLayerwise, Strategy::kLayerwisePaper,
                             Strategy::kAsc, Strategy::kLbAsc,     Strategy::kFsdpA2a};

plan::Plan toy_plan(Strategy s, int dp, int tp) {
  RunOptions o;
  o.dims.dp = dp;
  o.dims.tp = tp;
  o.bucket_size = 2048;
  return plan::make_plan(testing::toy_model(), plan_options(o, s));
}

std::string rejection(const model::ModelSpec& m, const plan::Plan& p, ParallelDims g) {
  try {
    validate_plan(m, p, g);
  } catch (const PlanAgreementError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidatePlan, AcceptsEveryStrategyAndGrid) {
  const model::ModelSpec m = testing::toy_model();
  for (Strategy s : kAll)
    for (auto [dp, tp] : {std::pair{1, 1}, {2, 1}, {1, 2}, {2, 2}, {3, 2}, {4, 4}})
      EXPECT_EQ(rejection(m, toy_plan(s, dp, tp), {dp, tp, 1}), "")
          << plan::to_string(s) << " dp " << dp << " tp " << tp;
}

TEST(ValidatePlan, AcceptsQwenWithPieces) {
  for (Strategy s : kAll) {
    RunOptions o;
    o.model = "qwen3-tiny";
    o.dims.dp = 2;
    o.dims.tp = 2;
    o.qkv_split = model::QkvSplit::kQkv;
    o.split_fc1 = true;
    const model::ModelSpec m = load_model(o);
    EXPECT_EQ(rejection(m, plan::make_plan(m, plan_options(o, s)), {2, 2, 1}), "");
  }
}

// Pipeline stages: a PP 2 plan fits a PP 2 grid only, and every param must be in exactly one
// stage (qwen3-tiny: 2 layers, one per stage).
TEST(ValidatePlan, StagesHoldEveryParamOnceOnTheirGrid) {
  for (Strategy s : kAll) {
    RunOptions o;
    o.model = "qwen3-tiny";
    o.dims = {2, 1, 2};
    const model::ModelSpec m = load_model(o);
    const plan::Plan p = plan::make_plan(m, plan_options(o, s));
    ASSERT_EQ(p.stages.size(), 2u);
    EXPECT_EQ(rejection(m, p, {2, 1, 2}), "") << plan::to_string(s);
    EXPECT_NE(rejection(m, p, {2, 1, 1}).find("plan for pp 2 with 2 stages on a pp 1 grid"),
              std::string::npos);
    plan::Plan twice = p;  // the first param of stage 1 listed by stage 0 too
    twice.stages[0].params.push_back(p.stages[1].params.front());
    EXPECT_NE(rejection(m, twice, {2, 1, 2}).find("in another stage"), std::string::npos);
    plan::Plan foreign = p;  // a task of stage 1 listed by stage 0
    if (!p.stages[1].tasks.empty()) {
      foreign.stages[0].tasks.push_back(p.stages[1].tasks.front());
      EXPECT_NE(rejection(m, foreign, {2, 1, 2}).find("is a param of another stage"),
                std::string::npos)
          << plan::to_string(s);
    }
    plan::Plan missing = p;
    missing.stages.pop_back();
    missing.options.dims.pp = 1;
    missing.tied_embedding = -1;
    EXPECT_NE(rejection(m, missing, {2, 1, 1}).find("the stages hold"), std::string::npos);
  }
}

// qwen3-tiny ties its output layer to the embedding: at PP 2 the last stage lists the embedding
// (param 0) again, last, as its copy; nowhere else may a param appear twice, and a plan claiming
// a copy the last stage does not list is refused.
TEST(ValidatePlan, TiedEmbeddingCopyOnTheLastStageOnly) {
  for (Strategy s : kAll) {
    RunOptions o;
    o.model = "qwen3-tiny";
    o.dims = {2, 1, 2};
    const model::ModelSpec m = load_model(o);
    const plan::Plan p = plan::make_plan(m, plan_options(o, s));
    ASSERT_EQ(m.params[0].name, "embedding.word_embeddings.weight");
    EXPECT_EQ(p.tied_embedding, 0);
    EXPECT_EQ(p.stages[0].params.front(), 0);
    EXPECT_EQ(p.stages[1].params.back(), 0);
    EXPECT_EQ(std::count(p.stages[1].params.begin(), p.stages[1].params.end(), 0), 1);
    plan::Plan unlisted = p;
    unlisted.stages[1].params.pop_back();
    EXPECT_NE(rejection(m, unlisted, {2, 1, 2}).find("tied embedding copy 0 is not"),
              std::string::npos);
    plan::Plan undeclared = p;
    undeclared.tied_embedding = -1;
    EXPECT_NE(rejection(m, undeclared, {2, 1, 2})
                  .find("tied embedding copy -1 where the model's plan has 0"),
              std::string::npos);
    o.dims = {2, 1, 1};
    EXPECT_EQ(plan::make_plan(m, plan_options(o, s)).tied_embedding, -1);
  }
  RunOptions untied;
  untied.model = "qwen3-mini";
  untied.dims = {1, 1, 2};
  const model::ModelSpec mini = load_model(untied);
  EXPECT_EQ(plan::make_plan(mini, plan_options(untied, Strategy::kLbAsc)).tied_embedding, -1);
}

TEST(ValidatePlan, RejectsAGridOfAnotherShape) {
  const model::ModelSpec m = testing::toy_model();
  EXPECT_NE(rejection(m, toy_plan(Strategy::kLbAsc, 2, 1), {4, 1, 1}).find("dp 2 x tp 1"),
            std::string::npos);
}

TEST(ValidatePlan, RejectsAPlanForAnotherTpDegree) {
  // A tp = 2 plan's slots hold half of every split param; relabelled as a tp = 1 plan the slot
  // sizes no longer fit the model.
  const model::ModelSpec m = testing::toy_model();
  plan::Plan p = toy_plan(Strategy::kAsc, 2, 2);
  p.options.dims.tp = 1;
  EXPECT_NE(rejection(m, p, {2, 1, 1}).find("elements in the layout"), std::string::npos);
}

TEST(ValidatePlan, RejectsAModelWithADifferentParam) {
  model::ModelSpec m = testing::toy_model();
  const plan::Plan p = toy_plan(Strategy::kLbAsc, 2, 1);
  m.params[6].shape = {128, 32};
  EXPECT_NE(rejection(m, p, {2, 1, 1}).find("'layer.fc.weight'"), std::string::npos);
}

TEST(ValidatePlan, RejectsACutThroughAMatrix) {
  const model::ModelSpec m = testing::toy_model();
  plan::Plan p = toy_plan(Strategy::kLbAsc, 2, 1);
  auto& stage = p.stages[0];
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b)
    for (const auto& slot : stage.layout.buckets[b].slots)
      if (m.params[slot.param].is_matrix()) {
        stage.cuts[b][1] = slot.offset + 1;
        EXPECT_NE(rejection(m, p, {2, 1, 1}).find("split by a DP cut"), std::string::npos);
        return;
      }
  FAIL() << "no matrix slot";
}

TEST(ValidatePlan, RejectsOwnersAndHostsOutOfRange) {
  const model::ModelSpec m = testing::toy_model();
  plan::Plan layerwise = toy_plan(Strategy::kLayerwisePaper, 2, 1);
  layerwise.stages[0].owner[1] = 5;
  EXPECT_NE(rejection(m, layerwise, {2, 1, 1}).find("not a DP rank"), std::string::npos);
  plan::Plan hosted = toy_plan(Strategy::kLbAsc, 2, 2);
  for (auto& t : hosted.stages[0].tasks)
    if (t.host >= 0) {
      t.host = 7;
      break;
    }
  EXPECT_NE(rejection(m, hosted, {2, 2, 1}).find("has host 7"), std::string::npos);
}

TEST(ValidatePlan, RejectsAMicroGroupMissingATask) {
  const model::ModelSpec m = testing::toy_model();
  plan::Plan p = toy_plan(Strategy::kLbAsc, 1, 2);
  auto& groups = p.stages[0].groups[0];
  ASSERT_FALSE(groups.empty());
  groups.back().tasks.pop_back();
  EXPECT_NE(rejection(m, p, {1, 2, 1}).find("listed 0 times"), std::string::npos);
}

// A MoE plan's stage holds every param but the experts; its expert plan fits each EP rank's
// expert model on the expert grid (DP 2 x EP 2: expert DP 1). The same stage without the expert
// plan is missing the experts.
TEST(ValidatePlan, AcceptsAMixtureOfExpertsBufferByBuffer) {
  const model::ModelSpec m =
      model::build_transformer(model::preset("qwen3-moe-cpu"), model::BuildOptions{});
  RunOptions o;
  o.dims.dp = 2;
  o.dims.ep = 2;
  const plan::Plan p = plan::make_plan(m, plan_options(o, Strategy::kLbAsc));
  ASSERT_TRUE(p.expert);
  EXPECT_EQ(rejection(m, p, {2, 1, 1}), "");
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(rejection(model::expert_part(m, 2, 1, k).model, p.expert->plan, {1, 1, 1}), "");
  plan::Plan dense_only = p;
  dense_only.expert = nullptr;
  EXPECT_NE(rejection(m, dense_only, {2, 1, 1}).find("the stages hold"), std::string::npos);
}

TEST(RunOptionsValidate, RejectsBadFlagsBeforeMpi) {
  auto message = [](auto mutate) {
    RunOptions o;
    mutate(o);
    try {
      validate(o);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([](RunOptions& o) { o.dims.pp = 2; }), "");  // pipeline stages run
  EXPECT_NE(message([](RunOptions& o) { o.dims.pp = 0; }).find("--pp must be positive"),
            std::string::npos);
  EXPECT_NE(message([](RunOptions& o) { o.steps = 0; }).find("--steps"), std::string::npos);
  EXPECT_NE(message([](RunOptions& o) { o.optimizer = "adamw"; }).find("matrix optimizer"),
            std::string::npos);
  EXPECT_NE(message([](RunOptions& o) {
              o.optimizer_options = {{"bogus", 1}};
            }).find("bogus"),
            std::string::npos);
  EXPECT_EQ(message([](RunOptions&) {}), "");
}

}  // namespace
}  // namespace canzona::runtime
