// The strategy table (plan/strategy.h) against docs/architecture.md's table of parts and
// docs/design.md's list of strategies, written out here by hand.
#include "canzona/plan/strategy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

std::string message_of(ZeroStage stage, std::vector<Strategy> strategies) {
  try {
    check_zero_stage(stage, strategies);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

struct Row {
  Strategy strategy;
  const char* name;
  DpSync dp_sync;
  TpExchange tp;
  ParamSync param_sync;
  DpExchange dp_exchange;
  bool shards_params;
  std::int64_t compute_ranks_dp4_tp2;
};

// One row per strategy in design order.
const std::vector<Row> kWant = {
    {Strategy::kSc, "sc", DpSync::kAllReduce, TpExchange::kRedundantGather, ParamSync::kNone,
     DpExchange::kNone, false, 1},
    {Strategy::kLayerwise, "layerwise", DpSync::kReduceScatter, TpExchange::kRedundantGather,
     ParamSync::kBucketAllGather, DpExchange::kNone, false, 4},
    {Strategy::kLayerwisePaper, "layerwise-paper", DpSync::kAllReduce, TpExchange::kRedundantGather,
     ParamSync::kLayerwiseAllGatherV, DpExchange::kNone, false, 4},
    {Strategy::kAsc, "asc", DpSync::kReduceScatter, TpExchange::kMicroGroups,
     ParamSync::kBucketAllGather, DpExchange::kNone, true, 8},
    {Strategy::kLbAsc, "lb-asc", DpSync::kReduceScatter, TpExchange::kMicroGroups,
     ParamSync::kBucketAllGather, DpExchange::kNone, true, 8},
    {Strategy::kFsdpA2a, "fsdp-a2a", DpSync::kReduceScatter, TpExchange::kRedundantGather,
     ParamSync::kBucketAllGather, DpExchange::kOwnerAllToAll, true, 4},
};

TEST(StrategyTable, OneRowPerStrategyInDesignOrder) {
  ASSERT_EQ(strategy_table().size(), kWant.size());
  for (std::size_t i = 0; i < kWant.size(); ++i) {
    const Row& w = kWant[i];
    const StrategyInfo& got = strategy_table()[i];
    EXPECT_EQ(got.strategy, w.strategy) << w.name;
    EXPECT_STREQ(got.name, w.name);
    EXPECT_STREQ(to_string(w.strategy), w.name);
    EXPECT_EQ(parse_strategy(w.name), w.strategy);
    const StrategyParts parts = strategy_parts(w.strategy);
    EXPECT_EQ(parts.dp_sync, w.dp_sync) << w.name;
    EXPECT_EQ(parts.tp_exchange, w.tp) << w.name;
    EXPECT_EQ(parts.param_sync, w.param_sync) << w.name;
    EXPECT_EQ(parts.dp_exchange, w.dp_exchange) << w.name;
    EXPECT_EQ(got.shards_params, w.shards_params) << w.name;
    EXPECT_EQ(compute_ranks(w.strategy, 4, 2), w.compute_ranks_dp4_tp2) << w.name;
    EXPECT_NE(std::string(got.about), "") << w.name;
  }
  // Megatron's layer-sharded TP mode moves layerwise onto micro groups, and only layerwise.
  EXPECT_EQ(strategy_parts(Strategy::kLayerwise, LayerwiseTp::kLayerSharded).tp_exchange,
            TpExchange::kMicroGroups);
  EXPECT_EQ(strategy_parts(Strategy::kFsdpA2a, LayerwiseTp::kLayerSharded).tp_exchange,
            TpExchange::kRedundantGather);
}

TEST(StrategyTable, UnknownNamesListEveryStrategy) {
  try {
    parse_strategy("fast");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown strategy 'fast' (expected sc, layerwise, layerwise-paper, asc, lb-asc or "
                 "fsdp-a2a)");
  }
  try {
    parse_strategy_list(",");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--strategy: give sc, layerwise, layerwise-paper, asc, lb-asc, fsdp-a2a, a comma "
                 "list or all");
  }
}

TEST(StrategyTable, ZeroThreeRunsOnlyStrategiesThatShardParams) {
  EXPECT_EQ(message_of(ZeroStage::kOne, parse_strategy_list("all")), "");
  EXPECT_EQ(message_of(ZeroStage::kThree, {Strategy::kAsc, Strategy::kLbAsc, Strategy::kFsdpA2a}),
            "");
  EXPECT_EQ(message_of(ZeroStage::kThree, {Strategy::kLbAsc, Strategy::kSc}),
            "--zero-stage 3: strategy sc All-Reduces gradients, so every rank keeps every param; "
            "ZeRO-3 runs asc, lb-asc and fsdp-a2a");
  EXPECT_EQ(message_of(ZeroStage::kThree, {Strategy::kLayerwise}),
            "--zero-stage 3: strategy layerwise is Megatron-LM's layer-wise optimizer, which has "
            "no ZeRO-3; ZeRO-3 runs asc, lb-asc and fsdp-a2a");
  EXPECT_EQ(message_of(ZeroStage::kThree, {Strategy::kLayerwisePaper}),
            "--zero-stage 3: strategy layerwise-paper All-Reduces gradients, so every rank keeps "
            "every param; ZeRO-3 runs asc, lb-asc and fsdp-a2a");
  EXPECT_EQ(strategies_for_stage("all", ZeroStage::kThree),
            (std::vector<Strategy>{Strategy::kAsc, Strategy::kLbAsc, Strategy::kFsdpA2a}));
  EXPECT_EQ(strategies_for_stage("all", ZeroStage::kOne).size(), 6u);
  EXPECT_THROW(strategies_for_stage("sc,asc", ZeroStage::kThree), UsageError);
}

}  // namespace
}  // namespace canzona::plan
