#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/model/limits.h"
#include "canzona/model/load.h"

namespace canzona::model {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ParamSpec param(std::string name, int layer, int stage = -1) {
  return {std::move(name), {4}, -1, OptimizerClass::kElementwise, layer, stage, {}};
}

TEST(Stages, SplitsLayersEvenlyWithEmbeddingFirstAndHeadLast) {
  const ModelSpec m = build_transformer(preset("qwen3-mini"), {});
  const std::vector<int> stages = assign_stages(m, 2);
  ASSERT_EQ(stages.size(), m.params.size());
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    const ParamSpec& p = m.params[i];
    const int expected = p.layer >= 0 ? p.layer / 2 : (i == 0 ? 0 : 1);
    EXPECT_EQ(stages[i], expected) << p.name;
  }
  EXPECT_EQ(stages.front(), 0);
  EXPECT_EQ(stages.back(), 1);
}

TEST(Stages, OneStagePutsEverythingOnStageZero) {
  const std::vector<int> stages = assign_stages(build_transformer(preset("qwen3-tiny"), {}), 1);
  EXPECT_EQ(stages, std::vector<int>(stages.size(), 0));
}

TEST(Stages, PpMustDivideLayers) {
  const ModelSpec m = build_transformer(preset("qwen3-0.6b"), {});
  EXPECT_THAT([&] { assign_stages(m, 3); },
              ThrowsMessage<UsageError>(
                  HasSubstr("--pp 3 does not divide the 28 transformer layers of model")));
  EXPECT_EQ(assign_stages(m, 28).back(), 27);
}

// --pp-layout: qwen3-mini's 4 layers as 1 + 3 (Megatron's --decoder-first-pipeline-num-layers 1).
TEST(Stages, LayoutPutsEachStagesLayerCount) {
  const ModelSpec m = build_transformer(preset("qwen3-mini"), {});
  EXPECT_EQ(stage_bounds(m.name, 4, 2, {1, 3}), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(stage_bounds(m.name, 4, 2, {}), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(stage_bounds(m.name, 4, 3, {2, 1, 1}), (std::vector<int>{0, 2, 3, 4}));
  const std::vector<int> stages = assign_stages(m, 2, {1, 3});
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    const ParamSpec& p = m.params[i];
    const int expected = p.layer >= 0 ? (p.layer < 1 ? 0 : 1) : (i == 0 ? 0 : 1);
    EXPECT_EQ(stages[i], expected) << p.name;
  }
  EXPECT_EQ(assign_stages(m, 4, {1, 1, 1, 1}), assign_stages(m, 4));
}

TEST(Stages, LayoutMustNameEveryStageAndSumToTheLayers) {
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {});
  EXPECT_THAT(
      [&] {
        assign_stages(m, 2, {1, 2});
      },
      ThrowsMessage<UsageError>(
          HasSubstr("--pp-layout 1,2 sums to 3 layers, model 'qwen3-tiny' has 2")));
  EXPECT_THAT(
      [&] {
        assign_stages(m, 2, {1, 1, 0});
      },
      ThrowsMessage<UsageError>(HasSubstr("--pp-layout 1,1,0 names 3 stages, --pp is 2")));
  EXPECT_THAT(
      [&] {
        assign_stages(m, 2, {2, 0});
      },
      ThrowsMessage<UsageError>(HasSubstr("--pp-layout 2,0: stage 1 has 0 layers")));
  EXPECT_THAT([&] { assign_stages(m, 3); },
              ThrowsMessage<UsageError>(HasSubstr("(--pp-layout sets uneven stages)")));
}

TEST(Stages, RejectsNonPositivePp) {
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {});
  EXPECT_THAT([&] { assign_stages(m, 0); }, ThrowsMessage<UsageError>(HasSubstr("pp=0")));
}

TEST(Stages, LayerCountFromParamsWhenArchUnknown) {
  ModelSpec m;
  m.name = "list";
  m.params = {param("pre", -1), param("l0", 0), param("l1", 1),   param("mid", -1),
              param("l2", 2),   param("l3", 3), param("post", -1)};
  EXPECT_EQ(assign_stages(m, 4), (std::vector<int>{0, 0, 1, 3, 2, 3, 3}));
  EXPECT_EQ(assign_stages(m, 2), (std::vector<int>{0, 0, 0, 1, 1, 1, 1}));
  EXPECT_THAT([&] { assign_stages(m, 3); },
              ThrowsMessage<UsageError>(
                  HasSubstr("--pp 3 does not divide the 4 transformer layers of model")));
}

TEST(Stages, ArchLayerCountWinsOverParams) {
  ModelSpec m;
  m.name = "list";
  m.arch.num_layers = 4;
  m.params = {param("l0", 0), param("l1", 1)};
  EXPECT_EQ(assign_stages(m, 4), (std::vector<int>{0, 1}));
  m.params.push_back(param("l4", 4));
  EXPECT_THAT([&] { assign_stages(m, 2); },
              ThrowsMessage<UsageError>(HasSubstr("layer 4 out of range for 4 layers")));
}

TEST(Stages, ExplicitStageWins) {
  ModelSpec m;
  m.name = "list";
  m.params = {param("emb", -1, 1), param("l0", 0), param("l1", 1, 0), param("head", -1, 0)};
  EXPECT_EQ(assign_stages(m, 2), (std::vector<int>{1, 0, 0, 0}));
  m.params[0].stage = 2;
  EXPECT_THAT([&] { assign_stages(m, 2); },
              ThrowsMessage<UsageError>(HasSubstr("param 'emb': stage 2 out of range for pp=2")));
}

// A layer index near INT_MAX overflowed `max_layer + 1` and crashed the planner: every
// layer and layer count outside the limit is a UsageError naming kMaxLayers, and every stage
// returned lies in [0, pp).
TEST(Stages, LayersBeyondTheLimitAreUsageErrors) {
  ModelSpec m;
  m.name = "hostile";
  m.params = {param("a", 0), param("b", 2147483647)};
  EXPECT_THAT([&] { assign_stages(m, 2); }, ThrowsMessage<UsageError>(HasSubstr("kMaxLayers")));
  m.params[1].layer = static_cast<int>(kMaxLayers);
  EXPECT_THAT([&] { assign_stages(m, 2); }, ThrowsMessage<UsageError>(HasSubstr("kMaxLayers")));
  m.params[1].layer = 1;
  m.arch.num_layers = 2147483647;
  EXPECT_THAT([&] { assign_stages(m, 2); }, ThrowsMessage<UsageError>(HasSubstr("kMaxLayers")));
  m.arch.num_layers = 0;
  m.params[1].layer = static_cast<int>(kMaxLayers) - 1;
  for (int pp : {1, 2, 4096}) {
    for (int stage : assign_stages(m, pp)) {
      EXPECT_GE(stage, 0);
      EXPECT_LT(stage, pp);
    }
  }
}

}  // namespace
}  // namespace canzona::model
