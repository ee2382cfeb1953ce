// The runtime on real ranks with the one-file toy optimizer (toy_sign_sgd.cpp, registered at run
// time): every strategy bitwise equal to the single-process reference, which
// toy_optimizer_test.cpp checks against a plain loop. Run under mpirun -np 2 (Dp2Tp1, Dp1Tp2).
#include <gtest/gtest.h>

#include <memory>

#include "canzona/comm/mpi.h"
#include "canzona/runtime/session.h"
#include "toy_model.h"
#include "toy_sign_sgd.h"

namespace canzona::runtime {
namespace {

void expect_bitwise(int dp, int tp) {
  optim::toy::register_sign_sgd();
  std::unique_ptr<comm::Grid> grid;
  try {
    grid = comm::make_mpi_grid({dp, tp, 1}, comm::ReduceMode::kDeterministic);
  } catch (const UsageError& e) {
    FAIL() << "needs " << dp * tp << " ranks: " << e.what();
  }
  RunOptions o;
  o.dims.dp = dp;
  o.dims.tp = tp;
  o.optimizer = optim::toy::kSignSgd;
  o.optimizer_options = {{"lr", 0.125}};
  o.steps = 2;
  o.warmup = 1;
  o.compute_scale = 0.0;
  validate(o);
  const model::ModelSpec model = testing::toy_model();  // tests/runtime/toy_model.h
  SessionOptions session;
  session.verify = true;
  const CompareResult r = run_strategies(
      *grid, model, o,
      {plan::Strategy::kSc, plan::Strategy::kLayerwise, plan::Strategy::kLayerwisePaper,
       plan::Strategy::kAsc, plan::Strategy::kLbAsc, plan::Strategy::kFsdpA2a},
      session);
  EXPECT_TRUE(r.verify.ran);
  EXPECT_TRUE(r.verify.bitwise) << r.verify.first_mismatch;
  EXPECT_TRUE(r.verify.passed) << r.verify.first_mismatch;
  if (grid->world().rank() == 0) {
    EXPECT_EQ(r.verify.elements, model.total_numel());
  }
}

TEST(ToyOptimizerDp2Tp1, EveryStrategyBitwiseEqualToTheReference) {
  expect_bitwise(2, 1);
}
TEST(ToyOptimizerDp1Tp2, EveryStrategyBitwiseEqualToTheReference) {
  expect_bitwise(1, 2);
}

}  // namespace
}  // namespace canzona::runtime
