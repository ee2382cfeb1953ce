// Properties of simulated iterations on real plans (plan::make_plan on Qwen3 presets).
#include <gtest/gtest.h>

#include "canzona/sim/sweep.h"

namespace canzona::sim {
namespace {

const std::vector<plan::Strategy> kAll = {
    plan::Strategy::kSc,  plan::Strategy::kLayerwise, plan::Strategy::kLayerwisePaper,
    plan::Strategy::kAsc, plan::Strategy::kLbAsc,     plan::Strategy::kFsdpA2a};

Scenario scenario(const std::string& model, int dp, int tp) {
  Scenario s;
  s.model = model;
  s.plan.dims.dp = dp;
  s.plan.dims.tp = tp;
  s.workload.tokens = 4096LL * dp * 2;
  return s;
}

TEST(SimulatedPlans, MoreBandwidthIsNeverSlower) {
  for (bool pipelined : {false, true}) {
    Scenario s = scenario("qwen3-1.7b", 8, 4);
    s.workload.tp_pipeline = pipelined;
    Cluster c = cluster_preset("h100-8");
    std::vector<Breakdown> previous = run_strategies(s, c, kAll);
    for (int i = 0; i < 3; ++i) {
      c.intra_node.bandwidth_GBps *= 2;
      c.inter_node.bandwidth_GBps *= 2;
      std::vector<Breakdown> now = run_strategies(s, c, kAll);
      for (std::size_t k = 0; k < kAll.size(); ++k) {
        EXPECT_LE(now[k].iteration_s, previous[k].iteration_s) << plan::to_string(kAll[k]);
        EXPECT_LE(now[k].dp_comm_exposed_s, previous[k].dp_comm_exposed_s);
        EXPECT_LE(now[k].tp_comm_s, previous[k].tp_comm_s);
      }
      previous = now;
    }
  }
}

TEST(SimulatedPlans, MoreDpRanksNeverMoreOptimizerWorkPerRankForLbAsc) {
  for (auto variant : {plan::PlannerVariant::kPaper, plan::PlannerVariant::kCanzona}) {
    for (const char* model : {"qwen3-1.7b", "qwen3-8b"}) {
      for (int tp : {1, 4}) {
        double previous_max = 1e300, previous_mean = 1e300;
        for (int dp : {1, 2, 4, 8, 16, 32, 64}) {
          Scenario s = scenario(model, dp, tp);
          s.plan.variant = variant;
          Breakdown r = run_strategies(s, cluster_preset("h100-8"), {plan::Strategy::kLbAsc})[0];
          const std::string where = std::string(plan::to_string(variant)) + " " + model +
                                    " tp=" + std::to_string(tp) + " dp=" + std::to_string(dp);
          EXPECT_LE(r.optimizer_rank_max_s, previous_max * (1 + 1e-12)) << where;
          EXPECT_LT(r.optimizer_rank_mean_s, previous_mean) << where;
          previous_max = r.optimizer_rank_max_s;
          previous_mean = r.optimizer_rank_mean_s;
        }
      }
    }
  }
}

TEST(SimulatedPlans, PaperSetupOrdersTheStrategies) {
  auto r = run_strategies(scenario("qwen3-32b", 32, 8), cluster_preset("h100-8"), kAll);
  const Breakdown &sc = r[0], &megatron = r[1], &layerwise = r[2], &asc = r[3], &lb_asc = r[4];
  EXPECT_LT(lb_asc.optimizer_step_s, megatron.optimizer_step_s);
  EXPECT_LT(lb_asc.optimizer_step_s, layerwise.optimizer_step_s);
  EXPECT_LT(layerwise.optimizer_step_s, sc.optimizer_step_s);
  EXPECT_LE(lb_asc.optimizer_step_s, asc.optimizer_step_s);
  EXPECT_LT(lb_asc.iteration_s, layerwise.iteration_s);
  EXPECT_LT(lb_asc.iteration_s, megatron.iteration_s);
  EXPECT_LT(lb_asc.dp_comm_exposed_s, layerwise.dp_comm_exposed_s);  // RS + AG vs All-Reduce
  EXPECT_LE(lb_asc.dp_comm_exposed_s, megatron.dp_comm_exposed_s);   // unpadded vs padded
  EXPECT_DOUBLE_EQ(lb_asc.fwd_bwd_s, layerwise.fwd_bwd_s);
}

TEST(SimulatedPlans, PipeliningMicroGroupsNeverSlower) {
  Scenario s = scenario("qwen3-8b", 16, 8);
  for (double cmax : {1.0, 64.0, 512.0}) {
    s.plan.cmax_mb = cmax;
    s.workload.tp_pipeline = true;
    Breakdown pipe = run_strategies(s, cluster_preset("h200-8"), {plan::Strategy::kLbAsc})[0];
    s.workload.tp_pipeline = false;
    Breakdown seq = run_strategies(s, cluster_preset("h200-8"), {plan::Strategy::kLbAsc})[0];
    EXPECT_LE(pipe.optimizer_step_s, seq.optimizer_step_s + 1e-12) << "cmax " << cmax;
    EXPECT_GT(pipe.micro_groups, 0);
  }
}

}  // namespace
}  // namespace canzona::sim
