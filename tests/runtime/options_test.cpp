// `canzona run/compare` defaults pinned literally from their sources (never read from the code):
// alpha = 1.0 and C_max = 512 MiB (the paper: optimizer time falls monotonically as alpha -> 1;
// the C_max sweep plateaus near 512 MB), Megatron's bucket size (0 = its default), Muon as the
// matrix optimizer, the bitwise reduction mode, the TP pipeline on; and plan_options carrying them.
#include "canzona/runtime/options.h"

#include <gtest/gtest.h>

#include "canzona/common/faults.h"

namespace canzona::runtime {
namespace {

TEST(RunOptions, DefaultsAreThePapersAndMegatrons) {
  const RunOptions o;
  EXPECT_EQ(o.alpha, 1.0);
  EXPECT_EQ(o.cmax_mb, 512.0);
  EXPECT_EQ(o.bucket_size, 0);
  EXPECT_EQ(o.optimizer, "muon");
  EXPECT_EQ(o.planner, plan::PlannerVariant::kCanzona);
  EXPECT_EQ(o.reduce_mode, comm::ReduceMode::kDeterministic);
  EXPECT_TRUE(o.pipeline);
  EXPECT_EQ(o.dims.dp, 1);
  EXPECT_EQ(o.dims.tp, 1);
  EXPECT_EQ(o.dims.pp, 1);
  EXPECT_EQ(faults::site(faults::Fault::kPerturbPlan).rank, -1);  // no fault armed by default
  EXPECT_EQ(faults::site(faults::Fault::kCorruptParams).rank, -1);
}

TEST(RunOptions, PlanOptionsCarryTheGridAndPlannerKnobs) {
  RunOptions o;
  o.dims.dp = 3;
  o.dims.tp = 2;
  o.alpha = 0.25;
  o.cmax_mb = 7.5;
  o.bucket_size = 12345;
  const plan::PlanOptions p = plan_options(o, plan::Strategy::kAsc);
  EXPECT_EQ(p.strategy, plan::Strategy::kAsc);
  EXPECT_EQ(p.dims.dp, 3);
  EXPECT_EQ(p.dims.tp, 2);
  EXPECT_EQ(p.dims.pp, 1);
  EXPECT_EQ(p.alpha, 0.25);
  EXPECT_EQ(p.cmax_mb, 7.5);
  EXPECT_EQ(p.layout.bucket_size, 12345);
}

}  // namespace
}  // namespace canzona::runtime
