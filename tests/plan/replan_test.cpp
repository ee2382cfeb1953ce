// Minimum-movement re-planning (plan/replan.h): the same grid keeps everything, hand-derived cuts
// and byte counts for DP 3 -> 2 and for replicated holders (sc <-> lb-asc, new and vanishing
// ranks), a brute-force reference over every monotone cut set of single-bucket models, the balance
// cap against the from-scratch plan on random models and Qwen3 presets, plans the runtime accepts,
// and determinism.
#include "canzona/plan/replan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <random>

#include "canzona/comm/grid.h"
#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/plan/metrics.h"
#include "canzona/runtime/session.h"
#include "random_model.h"

namespace canzona::plan {
namespace {

model::ParamSpec matrix(const std::string& name, std::int64_t rows, std::int64_t cols,
                        int split = -1) {
  model::ParamSpec p;
  p.name = name;
  p.shape = {rows, cols};
  p.tp_split_dim = split;
  p.optimizer = model::OptimizerClass::kMatrix;
  return p;
}

model::ParamSpec elementwise(const std::string& name, std::int64_t n, int split = -1) {
  model::ParamSpec p;
  p.name = name;
  p.shape = {n};
  p.tp_split_dim = split;
  p.optimizer = model::OptimizerClass::kElementwise;
  return p;
}

PlanOptions options(Strategy s, PlannerVariant v, int dp, int tp) {
  PlanOptions o;
  o.strategy = s;
  o.variant = v;
  o.dims.dp = dp;
  o.dims.tp = tp;
  o.cost.kind = cost::CostKind::kFlops;
  return o;
}

double muon_state(std::int64_t rows, std::int64_t cols) {
  return cost::state_bytes("muon", rows, cols, cost::CostOptions{});
}

void expect_valid(const model::ModelSpec& m, const Plan& plan) {
  EXPECT_NO_THROW(
      launch::validate_plan(m, plan, ParallelDims{plan.options.dims.dp, plan.options.dims.tp, 1}));
}

// Same grid and options: nothing moves, and (ours and asc) the plan is the old one.
TEST(Replan, SameGridKeepsEveryOwnerAndHost) {
  struct Grid {
    int dp, tp;
  };
  for (const auto& c : test_models::kCases) {
    for (Grid g : {Grid{1, 1}, Grid{4, 1}, Grid{4, 2}, Grid{3, 4}}) {
      std::mt19937 rng(17 + g.dp * 7 + g.tp);
      for (int trial = 0; trial < 6; ++trial) {
        const model::ModelSpec m = test_models::random_model(rng, g.tp);
        const PlanOptions o = options(c.strategy, c.variant, g.dp, g.tp);
        const Plan old = make_plan(m, o);
        const Plan again = replan(m, o, old, ReplanOptions{});
        const Movement mv = state_movement(m, old, again);
        EXPECT_EQ(mv.moved_state_bytes, 0.0) << to_string(c.strategy) << " " << g.dp << "x" << g.tp;
        EXPECT_EQ(mv.moved_tasks, 0);
        if (c.variant == PlannerVariant::kCanzona) {
          EXPECT_EQ(plan_hash(again), plan_hash(old)) << to_string(c.strategy);
        }
        for (std::size_t k = 0; k < old.stages[0].tasks.size(); ++k) {
          EXPECT_EQ(again.stages[0].tasks[k].dp_owner, old.stages[0].tasks[k].dp_owner);
          EXPECT_EQ(again.stages[0].tasks[k].host, old.stages[0].tasks[k].host);
        }
        expect_valid(m, again);
      }
    }
  }
}

// Six replicated matrices in one bucket, buffer order a b c d e f of 4 2 2 4 2 2 units (64
// elements each; cost = numel). Old plan (DP 3): a | b c d | e f. New DP 2: P* cuts after c
// (8 | 8, the only perfect split). Cuts within 25% of P*'s max (<= 10 units per rank) are after b
// (6 | 10) or after c; after b moves b (old rank 1 -> 0) and e, f (rank 2 vanished): 6 units;
// after c moves b, c and e, f: 8 units. With tolerance 0 only P*'s cuts remain.
TEST(Replan, HandDerivedDp3To2) {
  model::ModelSpec m;
  m.name = "hand";
  // Registration order is the reverse of buffer order.
  for (auto [name, units] : {std::pair{"f", 2}, {"e", 2}, {"d", 4}, {"c", 2}, {"b", 2}, {"a", 4}})
    m.params.push_back(matrix(name, 8, 8 * units));
  PlanOptions o = options(Strategy::kLbAsc, PlannerVariant::kCanzona, 3, 1);
  o.cost.kind = cost::CostKind::kNumel;
  Plan old = make_plan(m, o);
  ASSERT_EQ(old.stages[0].layout.buckets.size(), 1u);
  const auto& slots = old.stages[0].layout.buckets[0].slots;
  ASSERT_EQ(slots.size(), 6u);
  ASSERT_EQ(m.params[slots[0].param].name, "a");
  ASSERT_EQ(slots[1].offset, 256);
  // Old cuts: a | b c d | e f.
  old.stages[0].cuts[0] = {0, 256, 768, old.stages[0].layout.buckets[0].numel};
  const int old_owner[] = {0, 1, 1, 1, 2, 2};  // buffer order
  for (int k = 0; k < 6; ++k) old.stages[0].owner[slots[k].param] = old_owner[k];
  for (Task& t : old.stages[0].tasks) t.dp_owner = old.stages[0].owner[t.param];

  o.dims.dp = 2;
  const Plan star = make_plan(m, o);
  ASSERT_EQ(star.stages[0].cuts[0][1], 512);  // after a b c
  const double unit = muon_state(8, 8);       // state of one 64-element unit
  const Movement scratch = state_movement(m, old, star);
  EXPECT_DOUBLE_EQ(scratch.moved_state_bytes, 4 * 2 * unit);  // b, c, e, f

  const Plan kept = replan(m, o, old, ReplanOptions{0.25});
  EXPECT_EQ(kept.stages[0].cuts[0][1], 384);  // after a b
  const Movement mv = state_movement(m, old, kept);
  EXPECT_DOUBLE_EQ(mv.moved_state_bytes, 3 * 2 * unit);  // b, e, f
  EXPECT_EQ(mv.kept_tasks, 3);                           // a, c, d
  EXPECT_EQ(mv.moved_tasks, 3);
  expect_valid(m, kept);

  const Plan strict = replan(m, o, old, ReplanOptions{0.0});
  EXPECT_EQ(strict.stages[0].cuts[0][1], 512);
  EXPECT_DOUBLE_EQ(state_movement(m, old, strict).moved_state_bytes, 4 * 2 * unit);
}

// Buffer order B (split rows, 16 x 64), A (replicated 8 x 64), E (replicated vector of 128) at
// tp 2. sc at DP 2 holds everything on all 4 ranks; the lb-asc plan at DP 3 gives B to (DP 0,
// host 1) and A and E to the new DP rank 2 (A on both TP ranks).
TEST(Replan, StateMovementReplicatedHoldersAndVanishingRanks) {
  model::ModelSpec m;
  m.name = "holders";
  m.params = {elementwise("E", 128), matrix("A", 8, 64), matrix("B", 16, 64, 0)};
  const Plan sc = make_plan(m, options(Strategy::kSc, PlannerVariant::kCanzona, 2, 2));
  Plan lb = make_plan(m, options(Strategy::kLbAsc, PlannerVariant::kCanzona, 3, 2));
  StagePlan& st = lb.stages[0];
  const auto& slots = st.layout.buckets[0].slots;
  ASSERT_EQ(m.params[slots[0].param].name, "B");
  ASSERT_EQ(m.params[slots[1].param].name, "A");
  st.cuts[0] = {0, slots[1].offset, slots[1].offset, st.layout.buckets[0].numel};
  st.owner = {2, 2, 0};  // E, A, B
  st.groups.assign(3, {});
  for (Task& t : st.tasks) {
    t.dp_owner = st.owner[t.param];
    t.host = t.param == 2 ? 1 : kAllTp;
    t.group = t.param == 2 ? 0 : -1;
    if (t.param == 2) st.groups[0].push_back(MicroGroup{{static_cast<int>(&t - st.tasks.data())}});
  }
  expect_valid(m, lb);
  const double a = muon_state(8, 64), b = muon_state(16, 64);
  const double e = 128 * 8.0;  // AdamW: two fp32 moments per element

  // sc -> lb: only the new DP rank 2 receives: A on 2 TP ranks, E on 2 TP ranks.
  const Movement up = state_movement(m, sc, lb);
  EXPECT_DOUBLE_EQ(up.moved_state_bytes, 2 * a + 2 * e);
  EXPECT_DOUBLE_EQ(up.total_state_bytes, 2 * a + b + 2 * e);
  EXPECT_EQ(up.kept_tasks, 1);  // B
  EXPECT_EQ(up.moved_tasks, 1);

  // lb -> sc: DP rank 2 vanishes; every sc holder receives A and E, all but (0, 1) receive B.
  const Movement down = state_movement(m, lb, sc);
  EXPECT_DOUBLE_EQ(down.moved_state_bytes, 4 * a + 3 * b + 4 * e);
  EXPECT_DOUBLE_EQ(down.total_state_bytes, 4 * a + 4 * b + 4 * e);
  EXPECT_EQ(down.kept_tasks, 0);
  EXPECT_EQ(down.moved_tasks, 2);

  // TP 2 -> 1 at the same DP: E's TP rank 1 copy vanishes, TP rank 0 keeps its elements.
  const Plan sc1 = make_plan(m, options(Strategy::kSc, PlannerVariant::kCanzona, 2, 1));
  EXPECT_DOUBLE_EQ(state_movement(m, sc, sc1).moved_state_bytes, 0.0);
}

// Single-bucket matrix-only models: the re-plan's moved bytes equal the minimum over every
// monotone cut set on param boundaries whose DP load and memory stay within the cap.
TEST(Replan, BruteForceMinimumOverAllCutSets) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> count(1, 8), side(1, 12), ranks(1, 4), kind(0, 2);
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    model::ModelSpec m;
    m.name = "brute";
    const int n = count(rng);
    for (int i = 0; i < n; ++i) {
      m.params.push_back(matrix("p" + std::to_string(i), side(rng) * 8, side(rng) * 8));
      if (kind(rng) == 0) {
        const std::int64_t half = m.params.back().shape[0] / 2;
        m.params.back().pieces = {{"a", {{0, half}}}, {"b", {{half, m.params.back().shape[0]}}}};
      }
    }
    const PlannerVariant variant = trial % 2 ? PlannerVariant::kPaper : PlannerVariant::kCanzona;
    const Plan old = make_plan(m, options(Strategy::kLbAsc, variant, ranks(rng), 1));
    const PlanOptions o = options(Strategy::kLbAsc, variant, ranks(rng), 1);
    const double tol = std::uniform_real_distribution<double>(0.0, 0.5)(rng);
    const Plan star = make_plan(m, o);
    const Plan got = replan(m, o, old, ReplanOptions{tol});
    ASSERT_EQ(star.stages[0].layout.buckets.size(), 1u);
    const auto& slots = star.stages[0].layout.buckets[0].slots;
    // Per buffer item: load (FLOPs), memory and state bytes of its tasks, its old owner.
    std::vector<double> load(n, 0.0), memory(n, 0.0);
    std::vector<int> old_owner(n);
    for (int k = 0; k < n; ++k) {
      const int p = slots[k].param;
      old_owner[k] = old.stages[0].owner[p];
      for (const Task& t : star.stages[0].tasks)
        if (t.param == p) {
          load[k] += t.flops;
          memory[k] += t.state_bytes;
        }
    }
    auto loads_of = [&](const std::vector<int>& owner, std::vector<double>& l,
                        std::vector<double>& mem) {
      l.assign(o.dims.dp, 0.0);
      mem.assign(o.dims.dp, 0.0);
      for (int k = 0; k < n; ++k) {
        l[owner[k]] += load[k];
        mem[owner[k]] += memory[k];
      }
    };
    std::vector<int> owner(n);
    for (int k = 0; k < n; ++k) owner[k] = star.stages[0].owner[slots[k].param];
    std::vector<double> l, mem;
    loads_of(owner, l, mem);
    const double cap_l = *std::max_element(l.begin(), l.end()) * (1 + tol) * (1 + 1e-9);
    const double cap_m = *std::max_element(mem.begin(), mem.end()) * (1 + tol) * (1 + 1e-9);
    auto moved = [&](const std::vector<int>& own) {
      double bytes = 0.0;
      for (int k = 0; k < n; ++k)
        if (own[k] != old_owner[k]) bytes += memory[k];
      return bytes;
    };
    // Every monotone owner sequence (non-decreasing in buffer order) = every cut set.
    double best = std::numeric_limits<double>::infinity();
    std::function<void(int, int)> walk = [&](int k, int lo) {
      if (k == n) {
        loads_of(owner, l, mem);
        if (*std::max_element(l.begin(), l.end()) <= cap_l &&
            *std::max_element(mem.begin(), mem.end()) <= cap_m)
          best = std::min(best, moved(owner));
        return;
      }
      for (int r = lo; r < o.dims.dp; ++r) {
        owner[k] = r;
        walk(k + 1, r);
      }
    };
    walk(0, 0);
    std::vector<int> got_owner(n);
    for (int k = 0; k < n; ++k) got_owner[k] = got.stages[0].owner[slots[k].param];
    loads_of(got_owner, l, mem);
    EXPECT_LE(*std::max_element(l.begin(), l.end()), cap_l) << "trial " << trial;
    EXPECT_NEAR(moved(got_owner), best, 1e-9 * (best + 1)) << "trial " << trial;
    EXPECT_NEAR(state_movement(m, old, got).moved_matrix_bytes, moved(got_owner),
                1e-9 * (best + 1));
    ++checked;
  }
  EXPECT_EQ(checked, 120);
}

// The re-plan's DP and TP maxima stay within (1 + tolerance) of the from-scratch plan's (cost
// FLOPs, so the planner's unit is the metrics'), and the runtime accepts it.
void expect_balanced(const model::ModelSpec& m, const PlanOptions& o, const Plan& old, double tol) {
  const Plan star = make_plan(m, o);
  const Plan got = replan(m, o, old, ReplanOptions{tol});
  const Metrics ms = compute_metrics(m, star), mg = compute_metrics(m, got);
  const double slack = (1 + tol) * (1 + 1e-9);
  EXPECT_LE(mg.dp.flops, ms.dp.flops * slack)
      << m.name << " dp " << o.dims.dp << " tp " << o.dims.tp;
  EXPECT_LE(mg.dp.memory, ms.dp.memory * slack)
      << m.name << " dp " << o.dims.dp << " tp " << o.dims.tp;
  if (o.strategy == Strategy::kLbAsc) {
    EXPECT_LE(mg.tp.flops, ms.tp.flops * slack)
        << m.name << " dp " << o.dims.dp << " tp " << o.dims.tp;
  }
  EXPECT_LE(state_movement(m, old, got).moved_state_bytes,
            state_movement(m, old, star).moved_state_bytes * (1 + 1e-9) + 1e-6)
      << m.name << " dp " << o.dims.dp << " tp " << o.dims.tp;
  expect_valid(m, got);
  EXPECT_EQ(plan_hash(replan(m, o, old, ReplanOptions{tol})), plan_hash(got));  // deterministic
}

TEST(Replan, BalanceWithinToleranceOnRandomModels) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> ranks(1, 6);
  for (int trial = 0; trial < 60; ++trial) {
    const int tp = trial % 3 == 0 ? 2 : 1;
    const model::ModelSpec m = test_models::random_model(rng, tp);
    const auto& c = test_models::kCases[std::array{4, 5, 8}[trial % 3]];  // asc, lb-asc paper, ours
    const Plan old = make_plan(m, options(c.strategy, c.variant, ranks(rng), tp));
    PlanOptions o = options(c.strategy, c.variant, ranks(rng), tp);
    o.layout.bucket_size = trial % 2 ? 0 : 2000;  // several buckets
    expect_balanced(m, o, old, trial % 4 * 0.05);
  }
}

TEST(Replan, BalanceWithinToleranceOnQwen3) {
  for (auto [name, new_tp] : {std::pair{"qwen3-tiny", 1}, {"qwen3-0.6b", 4}}) {
    const model::ModelSpec m2 = model::build_transformer(model::preset(name), {2});
    const model::ModelSpec m4 = model::build_transformer(model::preset(name), {new_tp});
    const PlanOptions o8 = options(Strategy::kLbAsc, PlannerVariant::kCanzona, 8, 2);
    PlanOptions o6 = o8;
    o6.dims.dp = 6;
    const Plan p8 = make_plan(m2, o8);
    expect_balanced(m2, o6, p8, 0.05);                      // DP 8 -> 6
    expect_balanced(m2, o8, replan(m2, o6, p8, {}), 0.05);  // and back
    PlanOptions o8t4 = o8;
    o8t4.dims.tp = new_tp;
    expect_balanced(m4, o8t4, p8, 0.05);  // TP 2 -> 1 or 4 (the old plan's sizes are its own)
  }
}

TEST(Replan, AllReduceStrategiesReturnTheFromScratchPlan) {
  std::mt19937 rng(5);
  const model::ModelSpec m = test_models::random_model(rng, 1);
  const Plan old = make_plan(m, options(Strategy::kLbAsc, PlannerVariant::kCanzona, 3, 1));
  for (Strategy s : {Strategy::kSc, Strategy::kLayerwise}) {
    const PlanOptions o = options(s, PlannerVariant::kCanzona, 2, 1);
    EXPECT_EQ(plan_hash(replan(m, o, old, {})), plan_hash(make_plan(m, o)));
  }
}

TEST(Replan, RejectsBadToleranceAndForeignPlans) {
  std::mt19937 rng(6);
  const model::ModelSpec m = test_models::random_model(rng, 1);
  const PlanOptions o = options(Strategy::kLbAsc, PlannerVariant::kCanzona, 2, 1);
  const Plan old = make_plan(m, o);
  for (double bad : {-0.01, 10.5, std::nan("")})
    EXPECT_THROW(replan(m, o, old, ReplanOptions{bad}), UsageError);
  model::ModelSpec bigger = m;
  bigger.params.push_back(elementwise("extra", 64));
  EXPECT_THROW(replan(bigger, o, old, {}), UsageError);
}

}  // namespace
}  // namespace canzona::plan
