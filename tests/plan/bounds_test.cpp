// Makespan lower bounds (src/plan/algorithms/bounds.h) against hand-derived cases and a brute-force
// optimum, and the bounds and padding compute_metrics reports on tiny models.
#include "algorithms/bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"
#include "random_model.h"

namespace canzona::plan {
namespace {

using model::OptimizerClass;

TEST(MakespanBound, HandDerivedComponents) {
  // (a) mean: 4 items of 1 and 8 divisible on 2 bins -> 6; largest 1; (c) k=1: 1 + 1 = 2.
  MakespanBound b = makespan_lower_bound(std::vector<double>{1, 1, 1, 1}, 8.0, 2);
  EXPECT_DOUBLE_EQ(b.mean, 6.0);
  EXPECT_DOUBLE_EQ(b.largest, 1.0);
  EXPECT_NEAR(b.pigeonhole, 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(b.value(), 6.0);
  EXPECT_DOUBLE_EQ(b.relative(), 1.0);
  // (b) largest: 9 and 1 on 2 bins -> 9, mean 5.
  b = makespan_lower_bound(std::vector<double>{9, 1}, 0.0, 2);
  EXPECT_DOUBLE_EQ(b.value(), 9.0);
  EXPECT_DOUBLE_EQ(b.relative(), 1.8);
  EXPECT_EQ(b.pigeonhole_k, 0);
  // (c) k = 1: 3 items of 5 on 2 bins -> p_2 + p_3 = 10 vs mean 7.5, largest 5.
  b = makespan_lower_bound(std::vector<double>{5, 5, 5}, 0.0, 2);
  EXPECT_DOUBLE_EQ(b.mean, 7.5);
  EXPECT_DOUBLE_EQ(b.largest, 5.0);
  EXPECT_NEAR(b.value(), 10.0, 1e-9);
  EXPECT_EQ(b.pigeonhole_k, 1);
  // (c) k = 1 picks p_m + p_{m+1}, not p_{m+1} + p_{m+2}: 8, 6, 4, 1 on 2 bins -> 6 + 4.
  b = makespan_lower_bound(std::vector<double>{1, 4, 8, 6}, 0.0, 2);
  EXPECT_NEAR(b.pigeonhole, 10.0, 1e-9);
  // (c) k = 2: 5 items on 2 bins, some bin holds 3 of them: p_3 + p_4 + p_5 = 12 beats k = 1
  // (p_2 + p_3 = 9), the mean (22 / 2 = 11) and the largest (5).
  b = makespan_lower_bound(std::vector<double>{5, 5, 4, 4, 4}, 0.0, 2);
  EXPECT_DOUBLE_EQ(b.mean, 11.0);
  EXPECT_EQ(b.pigeonhole_k, 2);
  EXPECT_NEAR(b.value(), 12.0, 1e-9);
  // (d) few items: n <= m, nothing from (c); divisible mass does not add to the largest item.
  b = makespan_lower_bound(std::vector<double>{7, 3}, 2.0, 3);
  EXPECT_DOUBLE_EQ(b.pigeonhole, 0.0);
  EXPECT_DOUBLE_EQ(b.value(), 7.0);
  // No work at all: relative 1.
  EXPECT_DOUBLE_EQ(makespan_lower_bound(std::vector<double>{}, 0.0, 4).relative(), 1.0);
}

TEST(MakespanBound, CountedItemsEqualTheirCopies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> size(1, 50), count(1, 6), bins(1, 5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BoundItem> counted;
    std::vector<double> copies;
    const int kinds = 1 + trial % 6;
    for (int i = 0; i < kinds; ++i) {
      const BoundItem item{static_cast<double>(size(rng)), count(rng)};
      counted.push_back(item);
      for (int c = 0; c < item.count; ++c) copies.push_back(item.size);
    }
    const int m = bins(rng);
    const MakespanBound a = makespan_lower_bound(counted, 3.0, m);
    const MakespanBound b = makespan_lower_bound(copies, 3.0, m);
    EXPECT_NEAR(a.value(), b.value(), 1e-9) << "trial " << trial;
    EXPECT_EQ(a.pigeonhole_k, b.pigeonhole_k) << "trial " << trial;
  }
}

// The optimal makespan of `sizes` (atomic) plus `divisible` on `bins` bins: every assignment of
// the items, the divisible mass water-filling the lowest bins.
double brute_force_makespan(const std::vector<double>& sizes, double divisible, int bins) {
  double best = 1e300;
  std::vector<int> bin_of(sizes.size(), 0);
  std::function<void(std::size_t)> visit = [&](std::size_t i) {
    if (i == sizes.size()) {
      std::vector<double> load(bins, 0.0);
      for (std::size_t k = 0; k < sizes.size(); ++k) load[bin_of[k]] += sizes[k];
      std::sort(load.begin(), load.end());
      // Water level L over the j lowest bins: Σ_{i<j} (L - load_i) = divisible.
      double level = load.back(), left = divisible, filled = 0.0;
      for (int j = 1; j <= bins; ++j) {
        filled += load[j - 1];
        const double top = j < bins ? load[j] : 1e300;
        const double l = (divisible + filled) / j;
        if (l <= top) {
          level = std::max(level, l);
          left = 0.0;
          break;
        }
      }
      (void)left;
      best = std::min(best, std::max(load.back(), level));
      return;
    }
    for (int b = 0; b < bins; ++b) {
      bin_of[i] = b;
      visit(i + 1);
    }
  };
  visit(0);
  return best;
}

TEST(MakespanBound, NeverAboveTheOptimumAndExactWhereDerived) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> count(0, 8), bins(1, 3), size(1, 20), mass(0, 30);
  int exact_cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<double> sizes(count(rng));
    for (double& s : sizes) s = size(rng);
    const int m = bins(rng);
    const double divisible = trial % 3 == 0 ? 0.0 : mass(rng);
    const double optimum = brute_force_makespan(sizes, divisible, m);
    const MakespanBound b = makespan_lower_bound(sizes, divisible, m);
    ASSERT_LE(b.value(), optimum + 1e-9) << "trial " << trial;
    // With no divisible mass and n <= m + 1 items, one bin takes the two smallest (or none
    // shares): the optimum is max(p_1, p_m + p_{m+1}) = the bound.
    if (divisible == 0.0 && static_cast<int>(sizes.size()) <= m + 1) {
      ++exact_cases;
      EXPECT_NEAR(b.value(), optimum, 1e-9) << "trial " << trial;
    }
  }
  EXPECT_GT(exact_cases, 20);
}

TEST(MakespanBound, TightOnEqualItems) {
  // km + 1 equal items on m bins: the optimum is (k + 1) p, which (c) finds for every k.
  for (int m = 1; m <= 3; ++m)
    for (int k = 1; k * m + 1 <= 8; ++k) {
      const std::vector<double> sizes(k * m + 1, 3.0);
      EXPECT_NEAR(makespan_lower_bound(sizes, 0.0, m).value(), 3.0 * (k + 1), 1e-9);
      EXPECT_NEAR(brute_force_makespan(sizes, 0.0, m), 3.0 * (k + 1), 1e-9);
    }
}

model::ParamSpec matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
  return {name, {rows, cols}, -1, OptimizerClass::kMatrix, -1, -1, {}};
}

TEST(PlanMetrics, DpBoundUsesThePigeonholeOfWholeParams) {
  // Three equal matrices on 2 DP ranks, tp 1: some rank holds two, so DP and grid max/mean are at
  // least 2 / 1.5 = 4/3, while the largest-unit bound was only 1.
  model::ModelSpec m;
  m.name = "three matrices";
  for (int i = 0; i < 3; ++i) m.params.push_back(matrix(std::string(1, 'a' + i), 64, 64));
  for (const auto& c : test_models::kCases) {
    PlanOptions o;
    o.strategy = c.strategy;
    o.variant = c.variant;
    o.layerwise_tp = c.layerwise_tp;
    o.reorder_buckets = c.reorder_buckets;
    o.dims.dp = 2;
    const Metrics metrics = compute_metrics(m, make_plan(m, o));
    if (c.strategy == Strategy::kSc) {  // every rank computes everything: perfect
      EXPECT_DOUBLE_EQ(metrics.lower_bound_dp.flops, 1.0);
      continue;
    }
    EXPECT_NEAR(metrics.lower_bound_dp.flops, 4.0 / 3.0, 1e-9) << to_string(c.strategy);
    EXPECT_NEAR(metrics.lower_bound_dp.memory, 4.0 / 3.0, 1e-9);
    EXPECT_NEAR(metrics.lower_bound_grid.flops, 4.0 / 3.0, 1e-9);
    EXPECT_GE(metrics.dp.flops, metrics.lower_bound_dp.flops);
  }
}

TEST(PlanMetrics, TpAndGridBoundsFromTasks) {
  // One DP rank, tp 2, three equal TP-split matrices hosted one per task (lb-asc): the TP and the
  // grid axis put two of three tasks on one rank: 4/3. The DP axis has one rank: 1.
  model::ModelSpec m;
  m.name = "three split matrices";
  for (int i = 0; i < 3; ++i) {
    m.params.push_back(matrix(std::string(1, 'a' + i), 64, 64));
    m.params.back().tp_split_dim = 0;
  }
  PlanOptions o;
  o.dims.tp = 2;
  const Plan plan = make_plan(m, o);
  for (const Task& t : plan.stages[0].tasks) ASSERT_GE(t.host, 0);
  const Metrics metrics = compute_metrics(m, plan);
  EXPECT_DOUBLE_EQ(metrics.lower_bound_dp.flops, 1.0);
  EXPECT_NEAR(metrics.lower_bound_tp.flops, 4.0 / 3.0, 1e-9);
  EXPECT_NEAR(metrics.lower_bound_grid.flops, 4.0 / 3.0, 1e-9);
  EXPECT_GE(metrics.tp.flops, metrics.lower_bound_tp.flops);
}

TEST(PlanMetrics, BoundsNeverExceedTheRatiosOfRandomPlans) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 60; ++trial) {
    const int tp = 1 << (trial % 3);
    const model::ModelSpec m = test_models::random_model(rng, tp);
    for (const auto& c : test_models::kCases) {
      PlanOptions o;
      o.strategy = c.strategy;
      o.variant = c.variant;
      o.layerwise_tp = c.layerwise_tp;
      o.reorder_buckets = c.reorder_buckets;
      o.dims.dp = 1 + trial % 5;
      o.dims.tp = tp;
      const Metrics x = compute_metrics(m, make_plan(m, o));
      const auto where = testing::Message() << "trial " << trial << " " << to_string(c.strategy);
      for (auto [ratio, bound] :
           {std::pair{x.dp, x.lower_bound_dp}, std::pair{x.tp, x.lower_bound_tp},
            std::pair{x.grid, x.lower_bound_grid}}) {
        EXPECT_GE(bound.flops, 1.0) << where;
        EXPECT_GE(bound.memory, 1.0) << where;
        EXPECT_LE(bound.flops, ratio.flops) << where;
        EXPECT_LE(bound.memory, ratio.memory) << where;
      }
      EXPECT_GE(x.lower_bound_grid.flops, x.lower_bound_dp.flops * (1 - 1e-9)) << where;
      EXPECT_GE(x.lower_bound_grid.flops, x.lower_bound_tp.flops * (1 - 1e-9)) << where;
    }
  }
}

TEST(PlanMetrics, PaddingIsBucketSizeMinusSlots) {
  // Three 100-element vectors, param_align 64: slots at 0, 128, 256 (gaps 28 + 28), the bucket
  // end 356 padded to 384: 84 padding elements of 384.
  model::ModelSpec m;
  m.name = "three vectors";
  for (int i = 0; i < 3; ++i)
    m.params.push_back(
        {std::string(1, 'a' + i), {100}, -1, OptimizerClass::kElementwise, -1, -1, {}});
  PlanOptions o;
  o.strategy = Strategy::kSc;
  const Metrics metrics = compute_metrics(m, make_plan(m, o));
  EXPECT_EQ(metrics.padding_elements, 84);
  EXPECT_EQ(metrics.buffer_elements, 384);
  // Stages sum: the same model split over pp 3 (one vector each) pads each to 128.
  o.dims.pp = 3;
  for (auto& p : m.params) p.stage = static_cast<int>(&p - m.params.data());
  const Metrics staged = compute_metrics(m, make_plan(m, o));
  EXPECT_EQ(staged.padding_elements, 3 * 28);
  EXPECT_EQ(staged.buffer_elements, 3 * 128);
}

}  // namespace
}  // namespace canzona::plan
