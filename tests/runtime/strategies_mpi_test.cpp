// The four strategies on real ranks: every optimizer, every grid shape, bitwise equal to the
// single-process reference and to each other, final params and last reduced gradients alike
// (docs/design.md section 5). Suites are named for the grid they need (Dp2Tp1, Dp1Tp2, Dp2Tp2,
// Dp3Tp1, Dp3Tp2, Dp4Tp2); CMakeLists runs each at its world size with a filter, and a wrong world
// size fails the test. DP >= 3 matters: a sum of two floats has the same bits in either order, so
// rank-order bugs in the reductions only show from three summands on.
#include <gtest/gtest.h>

#include <memory>

#include "canzona/comm/mpi.h"
#include "canzona/common/faults.h"
#include "canzona/runtime/session.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

using plan::Strategy;

const std::vector<Strategy> kAll = {Strategy::kSc,  Strategy::kLayerwise, Strategy::kLayerwisePaper,
                                    Strategy::kAsc, Strategy::kLbAsc,     Strategy::kFsdpA2a};

// Small steps: 1 warmup + 2 timed, no simulated compute, several buckets.
RunOptions quick_options(int dp, int tp, const std::string& optimizer) {
  RunOptions o;
  o.dims.dp = dp;
  o.dims.tp = tp;
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

// The grid; a world of another size fails the test (ctest would count a skip as a pass).
std::unique_ptr<comm::Grid> make_grid(int dp, int tp,
                                      comm::ReduceMode mode = comm::ReduceMode::kDeterministic) {
  try {
    return comm::make_mpi_grid({dp, tp, 1}, mode);
  } catch (const UsageError& e) {
    ADD_FAILURE() << "needs " << dp * tp << " ranks: " << e.what();
    return nullptr;
  }
}

#define GRID_OR_FAIL(g, ...)       \
  auto g = make_grid(__VA_ARGS__); \
  if (!(g)) return

void expect_complete_and_bitwise(const CompareResult& r, const model::ModelSpec& model,
                                 comm::Grid& grid) {
  EXPECT_TRUE(r.verify.ran);
  EXPECT_TRUE(r.verify.bitwise) << r.verify.first_mismatch;
  EXPECT_TRUE(r.verify.passed) << r.verify.first_mismatch;
  if (grid.world().rank() != 0) return;
  // Every element of the model was compared, params and gradients.
  EXPECT_EQ(r.verify.elements, model.total_numel());
  EXPECT_EQ(r.verify.grad_elements, model.total_numel());
}

class GridTest : public ::testing::TestWithParam<std::string> {
 protected:
  void expect_bitwise(int dp, int tp) {
    GRID_OR_FAIL(g, dp, tp);
    const RunOptions qwen = qwen_options(dp, tp, GetParam());
    const model::ModelSpec qwen_model = load_model(qwen);
    const CompareResult a = run_all(*g, qwen_model, qwen);
    expect_complete_and_bitwise(a, qwen_model, *g);
    ASSERT_EQ(a.strategies.size(), 6u);
    EXPECT_GT(a.strategies[0].buckets, 1);

    RunOptions toy = quick_options(dp, tp, GetParam());
    toy.bucket_size = 2048;
    const CompareResult b = run_all(*g, testing::toy_model(), toy);
    expect_complete_and_bitwise(b, testing::toy_model(), *g);
    EXPECT_GT(b.strategies[0].buckets, 1);
  }
};

class Dp2Tp1 : public GridTest {};
class Dp1Tp2 : public GridTest {};
class Dp2Tp2 : public GridTest {};
class Dp3Tp1 : public GridTest {};
class Dp3Tp2 : public GridTest {};
class Dp4Tp2 : public GridTest {};

TEST_P(Dp2Tp1, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(2, 1);
}
TEST_P(Dp1Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(1, 2);
}
TEST_P(Dp2Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(2, 2);
}
TEST_P(Dp3Tp1, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(3, 1);
}
TEST_P(Dp3Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(3, 2);
}
TEST_P(Dp4Tp2, AllStrategiesMatchTheReferenceBitwise) {
  expect_bitwise(4, 2);
}

const auto kOptimizers = ::testing::Values("muon", "shampoo", "soap");
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp2Tp1, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp1Tp2, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp2Tp2, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp3Tp1, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp3Tp2, kOptimizers);
INSTANTIATE_TEST_SUITE_P(Optimizers, Dp4Tp2, kOptimizers);

const StrategyResult& result_of(const CompareResult& r, Strategy s) {
  for (const StrategyResult& x : r.strategies)
    if (x.strategy == s) return x;
  throw Error("strategy missing");
}

// Bytes per step by phase, derived by hand for DP = 2 (P = 2, B = the layout's bytes): an
// All-Reduce hands MPI B/2 (phase 1, the other rank's half) + B/2 (phase 2, its own half) per rank,
// so 2B summed over ranks; a Reduce-Scatter hands the other rank's block, B summed over ranks, and
// the All-Gather the same again in the parameter sync: the DP totals are equal. layerwise-paper
// adds an All-Gather-v of the owned params (B minus padding) on top of its All-Reduce. layerwise
// (Megatron today) does a Reduce-Scatter and an All-Gather of its own padded layout (B_lw), each
// B_lw summed over ranks.
TEST(Dp2Tp1Protocol, DpTotalsCountGradientAndParameterSync) {
  GRID_OR_FAIL(g, 2, 1);
  const RunOptions o = qwen_options(2, 1, "muon");
  const CompareResult r = run_all(*g, load_model(o), o);
  if (g->world().rank() != 0) return;
  const StrategyResult& sc = result_of(r, Strategy::kSc);
  const StrategyResult& layerwise = result_of(r, Strategy::kLayerwisePaper);
  const StrategyResult& megatron = result_of(r, Strategy::kLayerwise);
  const StrategyResult& lb = result_of(r, Strategy::kLbAsc);
  const StrategyResult& fsdp = result_of(r, Strategy::kFsdpA2a);
  const plan::Plan plan = plan::make_plan(load_model(o), plan_options(o, Strategy::kLbAsc));
  const std::int64_t layout_bytes = 4 * plan.stages[0].layout.numel;
  EXPECT_EQ(sc.dp_phase_bytes.grad_sync, 2 * layout_bytes);
  EXPECT_EQ(sc.dp_phase_bytes.param_sync, 0);
  EXPECT_EQ(lb.dp_phase_bytes.grad_sync, layout_bytes);
  EXPECT_EQ(lb.dp_phase_bytes.param_sync, layout_bytes);
  EXPECT_EQ(lb.dp_phase_bytes.total(), sc.dp_phase_bytes.total());
  EXPECT_EQ(layerwise.dp_phase_bytes.grad_sync, sc.dp_phase_bytes.grad_sync);
  EXPECT_GT(layerwise.dp_phase_bytes.param_sync, 0);
  EXPECT_LE(layerwise.dp_phase_bytes.param_sync, layout_bytes);
  const plan::Plan padded = plan::make_plan(load_model(o), plan_options(o, Strategy::kLayerwise));
  const std::int64_t padded_bytes = 4 * padded.stages[0].layout.numel;
  EXPECT_GE(padded_bytes, layout_bytes);
  EXPECT_EQ(megatron.dp_phase_bytes.grad_sync, padded_bytes);
  EXPECT_EQ(megatron.dp_phase_bytes.param_sync, padded_bytes);
  // fsdp-a2a: equal shards of Megatron's layout both ways, and in the optimizer phase every
  // matrix element outside its owner's shard travels to the owner and back (4 bytes each way).
  const plan::Plan equal = plan::make_plan(load_model(o), plan_options(o, Strategy::kFsdpA2a));
  const plan::StagePlan& stage = equal.stages[0];
  EXPECT_EQ(fsdp.dp_phase_bytes.grad_sync, 4 * stage.layout.numel);
  EXPECT_EQ(fsdp.dp_phase_bytes.param_sync, 4 * stage.layout.numel);
  std::int64_t away = 0;
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b)
    for (const layout::Slot& slot : stage.layout.buckets[b].slots) {
      const int owner = stage.owner[slot.param];
      if (owner < 0) continue;  // element-wise: updated where it lies
      const std::int64_t lo = std::max(slot.offset, stage.cuts[b][owner]);
      const std::int64_t hi = std::min(slot.end(), stage.cuts[b][owner + 1]);
      away += slot.numel - std::max<std::int64_t>(0, hi - lo);
    }
  EXPECT_GT(away, 0);
  EXPECT_EQ(fsdp.dp_phase_bytes.optimizer, 2 * 4 * away);
  for (const StrategyResult& s : r.strategies) {
    if (s.strategy != Strategy::kFsdpA2a) {
      EXPECT_EQ(s.dp_phase_bytes.optimizer, 0) << plan::to_string(s.strategy);
    }
    EXPECT_EQ(s.tp_phase_bytes.total(), 0) << plan::to_string(s.strategy);  // tp = 1
    // The by-kind counters and the by-phase ones count the same bytes.
    EXPECT_EQ(s.dp_bytes.total(), s.dp_phase_bytes.total()) << plan::to_string(s.strategy);
  }
  // Ownership halves the optimizer state.
  EXPECT_LT(lb.state_mb[0], 0.75 * sc.state_mb[0]);
}

TEST(Dp1Tp2Protocol, HostedTasksUseAllToAllAndRedundantOnesAllGather) {
  GRID_OR_FAIL(g, 1, 2);
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
  GRID_OR_FAIL(g, 2, 2);
  RunOptions o = qwen_options(2, 2, "muon");
  o.cmax_mb = 0.1;  // many small micro groups
  o.pipeline = false;
  const CompareResult r = run_all(*g, load_model(o), o, {Strategy::kAsc, Strategy::kLbAsc});
  EXPECT_TRUE(r.verify.bitwise) << r.verify.first_mismatch;
  if (g->world().rank() == 0) {
    EXPECT_GT(result_of(r, Strategy::kLbAsc).micro_groups, 2);
  }
}

// Native reduction: the reduced gradients must lie within 2 gamma(P-1) sum|x| of the
// deterministic reference (verify.h), at DP = 2 and DP = 3 (where MPI's order can differ from
// rank order), every element compared.
void expect_native_within_bounds(int dp, int tp) {
  GRID_OR_FAIL(g, dp, tp, comm::ReduceMode::kNative);
  RunOptions o = qwen_options(dp, tp, "muon");
  o.reduce_mode = comm::ReduceMode::kNative;
  const model::ModelSpec model = load_model(o);
  const CompareResult r = run_all(*g, model, o, {Strategy::kSc, Strategy::kLbAsc});
  EXPECT_TRUE(r.verify.passed) << r.verify.first_mismatch;
  if (g->world().rank() != 0) return;
  EXPECT_EQ(r.verify.grad_elements, model.total_numel());
  EXPECT_EQ(r.verify.elements, model.total_numel());
}

TEST(Dp2Tp2Native, NativeReductionStaysWithinTheSummationBound) {
  expect_native_within_bounds(2, 2);
}
TEST(Dp3Tp1Native, NativeReductionStaysWithinTheSummationBound) {
  expect_native_within_bounds(3, 1);
}

// A one-bit corruption of one element on the last rank must be found, named and fail --verify.
void expect_corruption_found(int dp, int tp) {
  GRID_OR_FAIL(g, dp, tp);
  RunOptions o = qwen_options(dp, tp, "muon");
  const int corrupt_rank = g->world().size() - 1;
  const faults::Scoped corrupt(faults::Fault::kCorruptParams, {corrupt_rank});
  const CompareResult r = run_all(*g, load_model(o), o, {Strategy::kLbAsc});
  EXPECT_FALSE(r.verify.bitwise);
  EXPECT_FALSE(r.verify.passed);
  if (g->world().rank() != 0) return;
  const int replica = g->dims().coord(corrupt_rank).dp;
  EXPECT_NE(r.verify.first_mismatch.find(
                str("lb-asc, DP replica ", replica, " vs the single-process reference: param '")),
            std::string::npos)
      << r.verify.first_mismatch;
}

TEST(Dp3Tp2Verify, OneFlippedBitOnOneRankIsFound) {
  expect_corruption_found(3, 2);
}

}  // namespace
}  // namespace canzona::runtime
