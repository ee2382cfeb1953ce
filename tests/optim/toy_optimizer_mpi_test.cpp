// The runtime on real ranks with the one-file toy optimizer (toy_sign_sgd.cpp, registered at run
// time): every strategy bitwise equal to the single-process reference, which
// toy_optimizer_test.cpp checks against a plain loop. Run under mpirun -np 2 (Dp2Tp1, Dp1Tp2).
#include <gtest/gtest.h>

#include <memory>

#include "canzona/comm/mpi.h"
#include "canzona/runtime/session.h"
#include "toy_sign_sgd.h"

namespace canzona::runtime {
namespace {

model::ModelSpec small_model() {
  model::ModelSpec m;
  m.name = "toy";
  auto add = [&m](std::string name, std::vector<std::int64_t> shape, int split,
                  model::OptimizerClass optimizer, std::vector<model::Piece> pieces = {}) {
    model::ParamSpec p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.tp_split_dim = split;
    p.optimizer = optimizer;
    p.pieces = std::move(pieces);
    m.params.push_back(std::move(p));
  };
  add("embedding.word_embeddings.weight", {96, 32}, 0, model::OptimizerClass::kElementwise);
  add("layer.qkv.weight", {96, 32}, 0, model::OptimizerClass::kMatrix,
      {{"q", {{0, 16}, {48, 64}}}, {"k", {{16, 32}, {64, 80}}}, {"v", {{32, 48}, {80, 96}}}});
  add("layer.proj.weight", {32, 48}, 1, model::OptimizerClass::kMatrix);
  add("layer.router.weight", {8, 32}, -1, model::OptimizerClass::kMatrix);
  add("layer.fc.weight", {64, 32}, 0, model::OptimizerClass::kMatrix);
  add("final.norm.weight", {32}, -1, model::OptimizerClass::kElementwise);
  return m;
}

void expect_bitwise(int dp, int tp) {
  optim::toy::register_sign_sgd();
  std::unique_ptr<comm::Grid> grid;
  try {
    grid = comm::make_mpi_grid(dp, tp, 1, comm::ReduceMode::kDeterministic);
  } catch (const UsageError& e) {
    FAIL() << "needs " << dp * tp << " ranks: " << e.what();
  }
  RunOptions o;
  o.dp = dp;
  o.tp = tp;
  o.optimizer = optim::toy::kSignSgd;
  o.optimizer_options = {{"lr", 0.125}};
  o.steps = 2;
  o.warmup = 1;
  o.compute_scale = 0.0;
  validate(o);
  const model::ModelSpec model = small_model();
  SessionOptions session;
  session.verify = true;
  const CompareResult r = run_strategies(*grid, model, o,
                                         {plan::Strategy::kSc, plan::Strategy::kLayerwise,
                                          plan::Strategy::kAsc, plan::Strategy::kLbAsc},
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
