// Plans of real Qwen3 shapes: deterministic outputs of the planner checked against the paper's
// published balance (Figure 3) as regression guards; the plan's defaults (α = 1, C_max 512 MiB,
// lb-asc, Megatron layout) and the Megatron buckets of a default Qwen3-32B plan pinned by hand
// from docs/references.md. No timing here.
#include <gtest/gtest.h>

#include "canzona/model/load.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {
namespace {

Metrics plan_metrics(const std::string& preset, int dp, int tp, Strategy strategy,
                     PlannerVariant variant) {
  model::BuildOptions build;
  build.tp = tp;
  const auto m = model::build_transformer(model::preset(preset), build);
  PlanOptions o;
  o.dp = dp;
  o.tp = tp;
  o.strategy = strategy;
  o.variant = variant;
  o.cost.kind = cost::CostKind::kFlops;
  return compute_metrics(m, make_plan(m, o));
}

// α = 1 (the paper's pure deficit fill, best in its α sweep), C_max 512 MiB (where the paper's
// sweep plateaus), the paper's lb-asc strategy with its numel cost, Megatron's layout.
TEST(PlanDefaults, AreThePapersAndMegatrons) {
  const PlanOptions o;
  EXPECT_EQ(o.alpha, 1.0);
  EXPECT_EQ(o.cmax_mb, 512.0);
  EXPECT_EQ(o.strategy, Strategy::kLbAsc);
  EXPECT_EQ(o.variant, PlannerVariant::kCanzona);
  EXPECT_EQ(o.dp, 1);
  EXPECT_EQ(o.tp, 1);
  EXPECT_EQ(o.pp, 1);
  EXPECT_EQ(o.asc_group_tasks, 0);
  EXPECT_EQ(o.cost.kind, cost::CostKind::kNumel);
  EXPECT_EQ(o.cost.matrix_optimizer, "muon");
  EXPECT_EQ(o.cost.optimizer_options, nlohmann::json::object());  // Muon's defaults
  EXPECT_EQ(o.layout.bucket_size, 0);  // Megatron's max(40,000,000, 1,000,000 dp)
  EXPECT_EQ(o.layout.param_align, 64);
  EXPECT_TRUE(o.layout.pad_bucket_end);
}

// A default plan lays Qwen3-32B (TP = 8, DP = 32) out in Megatron buckets of 40,000,000
// elements, by hand (tests/layout has the derivation): bucket 0 the output layer alone
// (152576 / 8 x 5120 = 97,648,640), bucket 1 ending after layer 63's fc1 at 49,157,120, 66
// buckets, 4,096,676,864 elements.
TEST(QwenPlans, DefaultPlanUsesMegatronBuckets) {
  const auto m = model::build_transformer(model::preset("qwen3-32b"), model::BuildOptions{.tp = 8});
  PlanOptions o;
  o.dp = 32;
  o.tp = 8;
  const Plan plan = make_plan(m, o);
  ASSERT_EQ(plan.stages.size(), 1u);
  const layout::Layout& l = plan.stages[0].layout;
  ASSERT_EQ(l.buckets.size(), 66u);
  EXPECT_EQ(l.numel, 4'096'676'864);
  EXPECT_EQ(l.buckets[0].numel, 97'648'640);
  EXPECT_EQ(l.buckets[1].numel, 49'157'120);
  ASSERT_EQ(plan.stages[0].cuts.size(), 66u);
  EXPECT_EQ(plan.stages[0].cuts[1].size(), 33u);
}

TEST(QwenPlans, Qwen3_32bCanzonaBeatsThePapersBalance) {
  // Paper, Figure 3: DP FLOPs 1.43, memory 1.11. Ours (docs/results.md,
  // `canzona plan --model qwen3-32b --dp 32 --tp 8`): 1.036 and 1.001; the guards leave 0.5% for
  // planner changes.
  const Metrics m = plan_metrics("qwen3-32b", 32, 8, Strategy::kLbAsc, PlannerVariant::kCanzona);
  EXPECT_LE(m.dp.flops, 1.041);
  EXPECT_LE(m.dp.memory, 1.006);
  EXPECT_LE(m.grid.flops, 1.02 * m.lower_bound_grid.flops);
  EXPECT_LE(m.tp.flops, 1.05);
}

TEST(QwenPlans, OursBeatsThePapersAlgorithmsOnTheGrid) {
  const Metrics paper = plan_metrics("qwen3-32b", 32, 8, Strategy::kLbAsc, PlannerVariant::kPaper);
  const Metrics ours = plan_metrics("qwen3-32b", 32, 8, Strategy::kLbAsc, PlannerVariant::kCanzona);
  EXPECT_LT(ours.grid.flops, paper.grid.flops);
  EXPECT_LT(ours.grid.memory, paper.grid.memory);
  EXPECT_LT(ours.dp.memory, paper.dp.memory);
}

TEST(QwenPlans, BalancingImprovesOnStartIndex) {
  const Metrics before = plan_metrics("qwen3-8b", 16, 4, Strategy::kAsc, PlannerVariant::kCanzona);
  const Metrics after = plan_metrics("qwen3-8b", 16, 4, Strategy::kLbAsc, PlannerVariant::kCanzona);
  EXPECT_LT(after.dp.flops, before.dp.flops);
  EXPECT_LT(after.grid.flops, before.grid.flops);
}

}  // namespace
}  // namespace canzona::plan

namespace canzona::plan {
namespace {

// The target: with the order inside a bucket free, qwen3-32b at DP=128 TP=8 reaches DP
// FLOPs <= 1.05 at Megatron's default buckets and at 400M-element ones, where keeping Megatron's
// order cannot (1.55 and 1.80 when the issue was filed; the authors' code gets 1.55 at 400M).
// The free plan really re-lays: some bucket's params leave reverse registration order, every
// cut stays on a matrix boundary (check by hand below), and nothing is padded.
TEST(PlanFreeOrder, ReachesTheDpBoundOnQwen3_32bAtDp128) {
  model::BuildOptions build;
  build.tp = 8;
  const auto m = model::build_transformer(model::preset("qwen3-32b"), build);
  for (std::int64_t bucket : {std::int64_t{0}, std::int64_t{400'000'000}}) {
    PlanOptions o;
    o.dp = 128;
    o.tp = 8;
    o.cost.kind = cost::CostKind::kFlops;
    o.layout.bucket_size = bucket;
    const Plan free_plan = make_plan(m, o);
    o.reorder_buckets = false;
    const Plan kept = make_plan(m, o);
    const Metrics free_m = compute_metrics(m, free_plan), kept_m = compute_metrics(m, kept);
    EXPECT_LE(free_m.dp.flops, 1.05) << bucket;
    EXPECT_GT(kept_m.dp.flops, 1.3) << bucket;
    EXPECT_EQ(free_m.padding_elements, kept_m.padding_elements) << bucket;
    bool reordered = false;
    for (std::size_t b = 0; b < free_plan.stages[0].layout.buckets.size(); ++b) {
      const auto& slots = free_plan.stages[0].layout.buckets[b].slots;
      for (std::size_t k = 1; k < slots.size(); ++k)
        reordered |= slots[k].param > slots[k - 1].param;
      for (const auto& slot : slots) {
        if (!m.params[slot.param].is_matrix()) continue;
        for (std::int64_t c : free_plan.stages[0].cuts[b])
          EXPECT_FALSE(slot.offset < c && c < slot.end()) << m.params[slot.param].name;
      }
    }
    EXPECT_TRUE(reordered) << bucket;
  }
}

}  // namespace
}  // namespace canzona::plan
