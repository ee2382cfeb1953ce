// Plans of real Qwen3 shapes: deterministic outputs of the planner checked against the paper's
// published balance (Figure 3) as regression guards; the plan's defaults (α = 1, C_max 512 MiB,
// lb-asc, Megatron layout) and the Megatron buckets of a default Qwen3-32B plan pinned by hand
// from docs/references.md; mixture-of-experts plans (the expert buffer over Megatron's expert
// groups). No timing here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/replan.h"

namespace canzona::plan {
namespace {

Metrics plan_metrics(const std::string& preset, int dp, int tp, Strategy strategy,
                     PlannerVariant variant) {
  model::BuildOptions build;
  build.tp = tp;
  const auto m = model::build_transformer(model::preset(preset), build);
  PlanOptions o;
  o.dims.dp = dp;
  o.dims.tp = tp;
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
  EXPECT_EQ(o.dims.dp, 1);
  EXPECT_EQ(o.dims.tp, 1);
  EXPECT_EQ(o.dims.pp, 1);
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
  o.dims.dp = 32;
  o.dims.tp = 8;
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
    o.dims.dp = 128;
    o.dims.tp = 8;
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

namespace canzona::plan {
namespace {

model::ModelSpec moe_cpu() {
  return model::build_transformer(model::preset("qwen3-moe-cpu"), {.tp = 2, .split_fc1 = true});
}

std::string moe_plan_error(const model::ModelSpec& m, const PlanOptions& o) {
  try {
    make_plan(m, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

// Megatron's expert grid inside a stage: rank l = dp_index x tp + tp_index has etp index l % etp,
// ep index (l / etp) % ep and expert DP index l / (etp x ep).
TEST(MoePlans, ExpertCoordinatesFollowMegatronsOrder) {
  ExpertPlan e;
  e.ep = 2;
  e.etp = 1;
  e.edp = 2;
  const int want[4][3] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}};
  for (int l = 0; l < 4; ++l) {
    const ExpertCoord c = ParallelDims{2, 2, 1, e.ep, e.etp}.expert_coord(l / 2, l % 2);
    EXPECT_EQ(c.edp, want[l][0]) << l;
    EXPECT_EQ(c.ep, want[l][1]) << l;
    EXPECT_EQ(c.etp, want[l][2]) << l;
  }
  e.ep = 1;
  e.etp = 2;
  const int etp2[4][3] = {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}};
  for (int l = 0; l < 4; ++l) {
    const ExpertCoord c = ParallelDims{4, 1, 1, e.ep, e.etp}.expert_coord(l, 0);
    EXPECT_EQ(c.edp, etp2[l][0]) << l;
    EXPECT_EQ(c.ep, etp2[l][1]) << l;
    EXPECT_EQ(c.etp, etp2[l][2]) << l;
  }
}

// DP2 x TP2 x EP2: the dense buffer holds every non-expert param over dp 2 x tp 2, the expert
// buffer EP rank 0's experts (0..3 of each layer) over expert DP 2 x 2 / 2 = 2 and ETP 1.
TEST(MoePlans, DenseAndExpertBuffersSplitTheModel) {
  const model::ModelSpec m = moe_cpu();
  PlanOptions o;
  o.dims.dp = 2;
  o.dims.tp = 2;
  o.dims.ep = 2;
  const Plan p = make_plan(m, o);
  ASSERT_TRUE(p.expert);
  const ExpertPlan& e = *p.expert;
  EXPECT_EQ(e.edp, 2);
  EXPECT_EQ(e.plan.options.dims.dp, 2);
  EXPECT_EQ(e.plan.options.dims.tp, 1);
  ASSERT_EQ(e.model.params.size(), 4u * 4 * 2);
  std::vector<int> seen(m.params.size(), 0);
  for (int q : p.stages[0].params) {
    EXPECT_FALSE(model::is_expert_param(m.params[q])) << m.params[q].name;
    ++seen[q];
  }
  for (int q : e.source) ++seen[q];
  for (std::size_t q = 0; q < m.params.size(); ++q) {
    const int expert = model::expert_index(m.params[q]);
    // EP rank 1's experts (4..7) are in no buffer of EP rank 0's plan; all else exactly once.
    EXPECT_EQ(seen[q], expert >= 4 ? 0 : 1) << m.params[q].name;
  }
  // Every expert matrix is one task per piece, owned by one of the 2 expert DP ranks.
  for (const Task& t : e.plan.stages[0].tasks) EXPECT_TRUE(t.dp_owner == 0 || t.dp_owner == 1);
  EXPECT_EQ(e.plan.stages[0].tasks.size(), 4u * 4 * 3);  // fc1 gate, fc1 up, fc2
  // The hash sees the experts' grid.
  PlanOptions o4 = o;
  o4.dims.ep = 4;
  EXPECT_NE(plan_hash(p), plan_hash(make_plan(m, o4)));
  // Metrics: the expert buffer's and the whole grid's exist, within [1, ranks].
  const Metrics metrics = compute_metrics(m, p);
  ASSERT_TRUE(metrics.expert);
  EXPECT_GE(metrics.expert->dp.flops, 1.0);
  EXPECT_LE(metrics.expert->dp.flops, 2.0);
  EXPECT_GE(metrics.whole_grid.flops, 1.0);
  // Whole grid by hand from the two buffers' per-rank loads and the coordinates above.
  double max = 0, sum = 0;
  for (int l = 0; l < 4; ++l) {
    const RankLoad& dense = metrics.loads[0].at(l / 2, l % 2);
    const RankLoad& expert = metrics.expert->loads[0].at(l / 2, 0);
    const double f = dense.flops + expert.flops;
    max = std::max(max, f);
    sum += f;
  }
  EXPECT_DOUBLE_EQ(metrics.whole_grid.flops, max / (sum / 4));
}

// --from-plan's movement counts the expert buffer once per EP rank. qwen3-moe-cpu's 12,582,912
// expert elements with Muon's 4-byte momentum are 50,331,648 state bytes beside the dense
// buffer's; a plan against itself moves none of them, one with other expert groups (EP 2 -> 4:
// each expert on another EP rank) all of them, and DP 2 -> 4 at EP 2 (expert DP 2 -> 4) some.
TEST(MoePlans, MovementCountsTheExpertBufferOncePerEpRank) {
  const model::ModelSpec m = moe_cpu();
  PlanOptions o;
  o.dims.dp = 2;
  o.dims.tp = 2;
  o.dims.ep = 2;
  const Plan p = make_plan(m, o);
  const auto without_experts = [](Plan plan) {
    plan.expert.reset();
    return plan;
  };
  const Plan pd = without_experts(p);
  const Movement self = state_movement(m, p, p);
  const Movement dense_self = state_movement(m, pd, pd);
  EXPECT_DOUBLE_EQ(self.total_state_bytes - dense_self.total_state_bytes, 50'331'648.0);
  EXPECT_EQ(self.moved_state_bytes, 0.0);
  // 2 EP ranks x 4 layers x 4 experts x (fc1 gate, fc1 up, fc2).
  EXPECT_EQ(self.kept_tasks - dense_self.kept_tasks, 2 * 4 * 4 * 3);
  PlanOptions o4 = o;
  o4.dims.ep = 4;
  const Plan q = make_plan(m, o4);
  const double expert_moved = state_movement(m, p, q).moved_state_bytes -
                              state_movement(m, pd, without_experts(q)).moved_state_bytes;
  EXPECT_DOUBLE_EQ(expert_moved, 50'331'648.0);
  PlanOptions wide = o;
  wide.dims.dp = 4;
  const Plan r = make_plan(m, wide);
  const double some = state_movement(m, p, r).moved_state_bytes -
                      state_movement(m, pd, without_experts(r)).moved_state_bytes;
  EXPECT_GT(some, 0.0);
  EXPECT_LT(some, 50'331'648.0);
}

TEST(MoePlans, BadGroupsAreUsageErrorsNamingTheFlags) {
  const model::ModelSpec m = moe_cpu();
  PlanOptions o;
  o.dims.dp = 2;
  o.dims.tp = 2;
  o.dims.ep = 3;
  EXPECT_NE(moe_plan_error(m, o).find("--ep 3 x --etp 1 = 3 does not divide --dp 2 x --tp 2 = 4 "
                                      "ranks (expert DP = DP x TP / (EP x ETP))"),
            std::string::npos)
      << moe_plan_error(m, o);
  o.dims.dp = 8;
  o.dims.ep = 16;
  EXPECT_NE(moe_plan_error(m, o).find("--ep 16 does not divide the 8 experts"), std::string::npos)
      << moe_plan_error(m, o);
  o.dims.ep = 0;
  EXPECT_NE(moe_plan_error(m, o).find("--ep must be in [1, "), std::string::npos);
  o.dims.ep = 1;
  o.dims.etp = 3;
  o.dims.dp = 3;
  o.dims.tp = 1;
  EXPECT_NE(moe_plan_error(m, o).find("--etp 3 does not divide its expert FFN width 512"),
            std::string::npos)
      << moe_plan_error(m, o);
  const auto dense = model::build_transformer(model::preset("qwen3-tiny"), {.tp = 1});
  PlanOptions d;
  d.dims.dp = 2;
  d.dims.ep = 2;
  EXPECT_NE(moe_plan_error(dense, d).find("need a mixture-of-experts model (model 'qwen3-tiny' has "
                                          "no experts)"),
            std::string::npos)
      << moe_plan_error(dense, d);
}

// The target grid: Qwen3-235B-A22B at DP 64, TP 4, EP 8 (expert DP 32). Our lb-asc
// balances the expert buffer's DP FLOPs within 5 % and never behind Megatron-LM's layer-wise
// optimizer on it.
TEST(MoePlans, Qwen3_235bExpertBufferIsBalanced) {
  const auto m = model::build_transformer(model::preset("qwen3-235b-a22b"), {.tp = 4});
  PlanOptions o;
  o.dims.dp = 64;
  o.dims.tp = 4;
  o.dims.ep = 8;
  o.cost.kind = cost::CostKind::kFlops;
  const Metrics ours = compute_metrics(m, make_plan(m, o));
  o.strategy = Strategy::kLayerwise;
  const Metrics layerwise = compute_metrics(m, make_plan(m, o));
  ASSERT_TRUE(ours.expert && layerwise.expert);
  EXPECT_LE(ours.expert->dp.flops, 1.05);
  EXPECT_LE(ours.expert->dp.flops, layerwise.expert->dp.flops);
  EXPECT_LE(ours.expert->dp.memory, layerwise.expert->dp.memory);
}

}  // namespace
}  // namespace canzona::plan
