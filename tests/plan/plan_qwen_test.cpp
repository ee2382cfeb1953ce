// Plans of real Qwen3 shapes: deterministic outputs of the planner checked against the paper's
// published balance (Figure 3) as regression guards. No timing here.
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

TEST(QwenPlans, Qwen3_32bCanzonaBeatsThePapersBalance) {
  // Paper, Figure 3: DP FLOPs 1.43, memory 1.11. Ours (README): 1.054 and 1.000.
  const Metrics m = plan_metrics("qwen3-32b", 32, 8, Strategy::kLbAsc, PlannerVariant::kCanzona);
  EXPECT_LE(m.dp.flops, 1.06);
  EXPECT_LE(m.dp.memory, 1.01);
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
