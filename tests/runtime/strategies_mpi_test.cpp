// The four strategies on real ranks: every optimizer, every grid shape, bitwise equal to the
// single-process reference and to each other (design.md section 5). Suites are named for the
// grid they need (Dp2Tp1, Dp1Tp2, Dp2Tp2); CMakeLists runs each at its world size with a filter.
#include <gtest/gtest.h>

#include <memory>

#include "canzona/comm/mpi.h"
#include "canzona/runtime/session.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

using plan::Strategy;

const std::vector<Strategy> kAll = {Strategy::kSc, Strategy::kLayerwise, Strategy::kAsc,
                                    Strategy::kLbAsc};

// Small steps: 1 warmup + 2 timed, no simulated compute, several buckets.
RunOptions quick_options(int dp, int tp, const std::string& optimizer) {
  RunOptions o;
  o.dp = dp;
  o.tp = tp;
  o.optimizer = optimizer;
  o.steps = 2;
  o.warmup = 1;
  o.compute_scale = 0.0;
  return o;
}

RunOptions qwen_options(int dp, int tp, const std::string& optimizer) {
  RunOptions o = quick_options(dp, tp, optimizer);
  o.model = "qwen3-tiny";
  o.qkv_split = model::QkvSplit::kQkv;
  o.split_fc1 = true;
  o.bucket_size = 100000;
  return o;
}

CompareResult run_all(comm::Grid& grid, const model::ModelSpec& model, const RunOptions& o,
                      const std::vector<Strategy>& strategies = kAll) {
  SessionOptions session;
  session.verify = true;
  return run_strategies(grid, model, o, strategies, session);
}

class GridTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Builds the grid, or returns null when the world has another size (the test is skipped).
  std::unique_ptr<comm::Grid> grid(int dp, int tp) {
    auto g = std::unique_ptr<comm::Grid>();
    try {
      g = comm::make_mpi_grid(dp, tp, 1, comm::ReduceMode::kDeterministic);
    } catch (const UsageError&) {
    }
    return g;
  }

  void expect_bitwise(int dp, int tp) {
    auto g = grid(dp, tp);
    if (!g) GTEST_SKIP() << "needs " << dp * tp << " ranks";
    const RunOptions qwen = qwen_options(dp, tp, GetParam());
    const CompareResult a = run_all(*g, load_model(qwen), qwen);
    EXPECT_TRUE(a.verify.bitwise) << a.verify.first_mismatch;
    ASSERT_EQ(a.strategies.size(), 4u);

    RunOptions toy = quick_options(dp, tp, GetParam());
    toy.bucket_size = 2048;
    const CompareResult b = run_all(*g, testing::toy_model(), toy);
    EXPECT_TRUE(b.verify.bitwise) << b.verify.first_mismatch;
  }
};

class Dp2Tp1 : public GridTest {};
class Dp1Tp2 : public GridTest {};
class Dp2Tp2 : public GridTest {};

TEST_P(Dp2Tp1, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(2, 1);
}
TEST_P(Dp1Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(1, 2);
}
TEST_P(Dp2Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(2, 2);
}

const auto kOptimizers = ::testing::Values("muon", "shampoo", "soap");
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp2Tp1, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp1Tp2, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp2Tp2, kOptimizers);

// Returns the grid or skips.
#define GRID_OR_SKIP(g, dp, tp)                                           \
  std::unique_ptr<comm::Grid> g;                                          \
  try {                                                                   \
    g = comm::make_mpi_grid(dp, tp, 1, comm::ReduceMode::kDeterministic); \
  } catch (const UsageError&) {                                           \
    GTEST_SKIP() << "needs " << (dp) * (tp) << " ranks";                  \
  }

const StrategyResult& result_of(const CompareResult& r, Strategy s) {
  for (const StrategyResult& x : r.strategies)
    if (x.strategy == s) return x;
  throw Error("strategy missing");
}

TEST(Dp2Tp1Protocol, ReduceScatterMovesHalfTheAllReduceBytes) {
  GRID_OR_SKIP(g, 2, 1);
  const RunOptions o = qwen_options(2, 1, "muon");
  const CompareResult r = run_all(*g, load_model(o), o);
  if (g->world().rank() != 0) return;
  const StrategyResult& sc = result_of(r, Strategy::kSc);
  const StrategyResult& layerwise = result_of(r, Strategy::kLayerwise);
  const StrategyResult& lb = result_of(r, Strategy::kLbAsc);
  EXPECT_GT(sc.dp_bytes.all_reduce, 0);
  EXPECT_EQ(sc.dp_bytes.all_reduce, layerwise.dp_bytes.all_reduce);
  EXPECT_EQ(2 * lb.dp_bytes.reduce_scatter, sc.dp_bytes.all_reduce);
  EXPECT_EQ(lb.dp_bytes.all_gather, lb.dp_bytes.reduce_scatter);
  EXPECT_EQ(sc.dp_bytes.all_gather, 0);
  EXPECT_GT(layerwise.dp_bytes.all_gather, 0);  // updated params inside the step
  EXPECT_EQ(lb.tp_bytes.total(), 0);            // tp = 1: no all-to-all
  // Ownership halves the optimizer state.
  EXPECT_LT(lb.state_mb[0], 0.75 * sc.state_mb[0]);
}

TEST(Dp1Tp2Protocol, HostedTasksUseAllToAllAndRedundantOnesAllGather) {
  GRID_OR_SKIP(g, 1, 2);
  const RunOptions o = qwen_options(1, 2, "muon");
  const CompareResult r = run_all(*g, load_model(o), o);
  if (g->world().rank() != 0) return;
  const StrategyResult& sc = result_of(r, Strategy::kSc);
  const StrategyResult& lb = result_of(r, Strategy::kLbAsc);
  EXPECT_GT(sc.tp_bytes.all_gather, 0);
  EXPECT_EQ(sc.tp_bytes.all_to_all, 0);
  EXPECT_GT(lb.tp_bytes.all_to_all, 0);
  EXPECT_EQ(lb.tp_bytes.all_gather, 0);
  EXPECT_GT(lb.micro_groups, 0);
}

TEST(Dp2Tp2Pipeline, SequentialGroupsGiveTheSameBits) {
  GRID_OR_SKIP(g, 2, 2);
  RunOptions o = qwen_options(2, 2, "muon");
  o.cmax_mb = 0.1;  // many small micro groups
  o.pipeline = false;
  const CompareResult r = run_all(*g, load_model(o), o, {Strategy::kAsc, Strategy::kLbAsc});
  EXPECT_TRUE(r.verify.bitwise) << r.verify.first_mismatch;
  if (g->world().rank() == 0) {
    EXPECT_GT(result_of(r, Strategy::kLbAsc).micro_groups, 2);
  }
}

TEST(Dp2Tp2Native, NativeReductionStaysWithinTolerance) {
  std::unique_ptr<comm::Grid> g;
  try {
    g = comm::make_mpi_grid(2, 2, 1, comm::ReduceMode::kNative);
  } catch (const UsageError&) {
    GTEST_SKIP() << "needs 4 ranks";
  }
  RunOptions o = qwen_options(2, 2, "muon");
  o.reduce_mode = comm::ReduceMode::kNative;
  const CompareResult r = run_all(*g, load_model(o), o, {Strategy::kSc, Strategy::kLbAsc});
  EXPECT_TRUE(r.verify.passed) << r.verify.first_mismatch;
}

}  // namespace
}  // namespace canzona::runtime
