// A new optimizer from one file (tests/optim/toy_sign_sgd.cpp, registered at run time): the
// registry lists it, the runtime accepts it as --optimizer, the planner prices its tasks with its
// own formulas, and the single-process reference runs it with the bits of a plain loop.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/optim/registry.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/reference.h"
#include "toy_sign_sgd.h"

namespace canzona::optim {
namespace {

// Two matrices (one split into pieces) and a norm vector; no TP.
model::ModelSpec small_model() {
  model::ModelSpec m;
  m.name = "toy";
  auto add = [&m](std::string name, std::vector<std::int64_t> shape,
                  model::OptimizerClass optimizer, std::vector<model::Piece> pieces = {}) {
    model::ParamSpec p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.optimizer = optimizer;
    p.pieces = std::move(pieces);
    m.params.push_back(std::move(p));
  };
  add("layer.qkv.weight", {48, 16}, model::OptimizerClass::kMatrix,
      {{"q", {{0, 16}}}, {"kv", {{16, 48}}}});
  add("layer.fc.weight", {64, 32}, model::OptimizerClass::kMatrix);
  add("layer.norm.weight", {32}, model::OptimizerClass::kElementwise);
  return m;
}

TEST(ToyOptimizer, RegistersOnceAsAMatrixOptimizer) {
  toy::register_sign_sgd();
  toy::register_sign_sgd();  // idempotent
  const std::vector<std::string> matrix = optimizer_names(OptimizerShape::kMatrix);
  EXPECT_EQ(matrix, (std::vector<std::string>{"muon", "shampoo", "soap", "sign_sgd"}));
  EXPECT_EQ(optimizer_names(OptimizerShape::kElementwise), std::vector<std::string>{"adamw"});
  EXPECT_EQ(effective_options(toy::kSignSgd, nlohmann::json::object()),
            (nlohmann::json{{"lr", 0.01}}));
  EXPECT_THROW(register_optimizer(find_optimizer(toy::kSignSgd)), UsageError);
  OptimizerDescriptor nameless = find_optimizer(toy::kSignSgd);
  nameless.name = "";
  EXPECT_THROW(register_optimizer(nameless), UsageError);
  OptimizerDescriptor no_formula = find_optimizer(toy::kSignSgd);
  no_formula.name = "no_formula";
  no_formula.flops = nullptr;
  EXPECT_THROW(register_optimizer(no_formula), UsageError);
}

TEST(ToyOptimizer, RuntimeAcceptsItAsTheMatrixOptimizer) {
  toy::register_sign_sgd();
  runtime::RunOptions o;
  o.optimizer = toy::kSignSgd;
  o.optimizer_options = {{"lr", 0.5}};
  EXPECT_NO_THROW(runtime::validate(o));
  const plan::PlanOptions p = launch::plan_options(o, plan::Strategy::kLbAsc);
  EXPECT_EQ(p.cost.matrix_optimizer, "sign_sgd");
  EXPECT_EQ(p.cost.optimizer_options, (nlohmann::json{{"lr", 0.5}}));
  o.optimizer_options = {{"momentum", 0.9}};  // not a sign_sgd option
  EXPECT_THROW(runtime::validate(o), UsageError);
  o.optimizer = "adamw";
  o.optimizer_options = nlohmann::json::object();
  EXPECT_THROW(runtime::validate(o), UsageError);
}

// Each task's FLOPs, state and (flops) cost come from the toy's descriptor: rows x cols, 0, and
// rows x cols. By hand: q 16 x 16 = 256, kv 32 x 16 = 512, fc 64 x 32 = 2048.
TEST(ToyOptimizer, PlannerPricesTasksWithItsFormulas) {
  toy::register_sign_sgd();
  plan::PlanOptions o;
  o.strategy = plan::Strategy::kLbAsc;
  o.dims.dp = 2;
  o.cost.kind = cost::CostKind::kFlops;
  o.cost.matrix_optimizer = toy::kSignSgd;
  const plan::Plan p = plan::make_plan(small_model(), o);
  ASSERT_EQ(p.stages.size(), 1u);
  const std::vector<plan::Task>& tasks = p.stages[0].tasks;
  ASSERT_EQ(tasks.size(), 3u);
  const double expected_flops[] = {256.0, 512.0, 2048.0};
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(tasks[k].flops, expected_flops[k]);
    EXPECT_EQ(tasks[k].cost, expected_flops[k]);
    EXPECT_EQ(tasks[k].state_bytes, 0.0);
  }
  o.cost.kind = cost::CostKind::kMemory;
  const plan::Plan by_memory = plan::make_plan(small_model(), o);  // outlives the loop
  for (const plan::Task& t : by_memory.stages[0].tasks) EXPECT_EQ(t.cost, 0.0);
}

// The single-process reference steps the toy on every matrix task; a plain loop over the
// reference's reduced gradients, w <- w - lr if g > 0, w + lr if g < 0, w if g == 0 (lr * 1 and
// lr * -1 are exact in fp32), gives the same bits after every step.
TEST(ToyOptimizer, ReferenceStepsMatchAPlainLoopBitwise) {
  toy::register_sign_sgd();
  const model::ModelSpec model = small_model();
  runtime::RunOptions o;
  o.dims.dp = 2;
  o.optimizer = toy::kSignSgd;
  o.optimizer_options = {{"lr", 0.125}};
  const float lr = 0.125f;
  runtime::Reference reference(model, o);
  std::vector<std::vector<float>> expected = reference.params();  // the synthetic init
  for (int step = 1; step <= 3; ++step) {
    reference.run_until(step);
    for (std::size_t p = 0; p < model.params.size(); ++p) {
      if (!model.params[p].is_matrix()) continue;
      const std::vector<float>& g = reference.grads()[p];
      ASSERT_EQ(g.size(), expected[p].size());
      std::int64_t moved = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        if (g[i] > 0.0f) expected[p][i] -= lr;
        if (g[i] < 0.0f) expected[p][i] += lr;
        moved += g[i] != 0.0f;
      }
      EXPECT_GT(moved, 0);
      const std::vector<float>& got = reference.params()[p];
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]),
                  std::bit_cast<std::uint32_t>(expected[p][i]))
            << model.params[p].name << " element " << i << " step " << step;
    }
  }
}

}  // namespace
}  // namespace canzona::optim
