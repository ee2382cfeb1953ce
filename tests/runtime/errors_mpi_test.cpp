// Fatal-error paths raise the same exception on every rank before any data collective, so the
// caller can report once and no rank hangs (the CLI tests check the abort itself).
#include <gtest/gtest.h>
#include <mpi.h>

#include "canzona/comm/mpi.h"
#include "canzona/common/faults.h"
#include "canzona/runtime/session.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

using launch::PlanAgreementError;
using launch::validate_plan;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string message_of(auto&& run) {
  try {
    run();
  } catch (const PlanAgreementError& e) {
    return e.what();
  }
  return "";
}

TEST(Errors, PlanHashDisagreementThrowsOnEveryRank) {
  ASSERT_GE(world_size(), 2) << "needs 2 ranks (ctest runs it with -np 2)";
  auto grid = comm::make_mpi_grid({world_size(), 1, 1}, comm::ReduceMode::kDeterministic);
  RunOptions o;
  o.dims.dp = world_size();
  o.steps = 1;
  o.warmup = 0;
  const faults::Scoped perturb(faults::Fault::kPerturbPlan, {1});
  const std::string message = message_of(
      [&] { run_strategies(*grid, testing::toy_model(), o, {plan::Strategy::kLbAsc}, {}); });
  EXPECT_NE(message.find("ranks disagree on the lb-asc plan: rank 1 has plan hash"),
            std::string::npos)
      << message;
  // The grid still works: nobody is stuck in a collective.
  grid->world().barrier();
}

TEST(Errors, PlanForAnotherModelThrowsOnEveryRank) {
  auto grid = comm::make_mpi_grid({world_size(), 1, 1}, comm::ReduceMode::kDeterministic);
  RunOptions o;
  o.dims.dp = world_size();
  o.model = "qwen3-tiny";
  const model::ModelSpec tiny = load_model(o);
  const plan::Plan plan =
      plan::make_plan(testing::toy_model(), plan_options(o, plan::Strategy::kAsc));
  const std::string message = message_of([&] { validate_plan(tiny, plan, grid->dims()); });
  EXPECT_NE(message.find("plan does not match the model"), std::string::npos) << message;
  grid->world().barrier();
}

TEST(Errors, WorldSizeMismatchThrowsUsageErrorOnEveryRank) {
  EXPECT_THROW(comm::make_mpi_grid({world_size() + 1, 1, 1}, comm::ReduceMode::kDeterministic),
               UsageError);
}

}  // namespace
}  // namespace canzona::runtime
