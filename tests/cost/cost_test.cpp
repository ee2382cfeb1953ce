// Cost models against hand-computed values (the calibrated model is tested in tests/optim), and
// the defaults pinned to the published settings (docs/references.md: 5 Newton–Schulz steps, SOAP's
// precondition_frequency 10 and max_precond_dim 10000, the paper's numel cost), and the CLI's
// cost flags feeding the optimizer's options.
#include "canzona/cost/cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "canzona/common/error.h"
#include "canzona/cost/calibration.h"

namespace canzona::cost {
namespace {

TEST(Cost, MuonFlopsCountTheThreeNewtonSchulzGemms) {
  CostOptions o;
  const double per_step = 4.0 * 2048 * 512.0 * 512 + 2.0 * 512.0 * 512 * 512;
  EXPECT_DOUBLE_EQ(optimizer_flops("muon", 512, 2048, o), 5.0 * per_step);
  EXPECT_DOUBLE_EQ(optimizer_flops("muon", 2048, 512, o), 5.0 * per_step);
  o.optimizer_options = {{"ns_steps", 8}};
  EXPECT_DOUBLE_EQ(optimizer_flops("muon", 4, 4, o), 8.0 * (4 * 64 + 2 * 64));
}

// The options the cost model prices by default are the optimizers' own defaults, which are the
// published ones (docs/references.md): 5 Newton-Schulz steps, frequency 10, max_precond_dim 10000.
TEST(Cost, DefaultsAreThePublishedOnes) {
  const CostOptions o;
  EXPECT_EQ(o.kind, CostKind::kNumel);
  EXPECT_EQ(o.matrix_optimizer, "muon");
  EXPECT_EQ(o.optimizer_options, nlohmann::json::object());
  EXPECT_EQ(o.calibration, nullptr);
  EXPECT_EQ(default_option("muon", "ns_steps"), "5");
  for (const char* name : {"shampoo", "soap"}) {
    EXPECT_EQ(default_option(name, "precondition_frequency"), "10");
    EXPECT_EQ(default_option(name, "max_precond_dim"), "10000");
  }
  EXPECT_EQ(default_option("muon", "max_precond_dim"), "");
}

// cost.h's Muon formula, ns_steps (4 max min^2 + 2 min^3), as literal numbers worked by hand.
// Qwen3-32B's fc2 [5120, 25600], 5 steps: 4 * 25600 * 5120^2 = 2,684,354,560,000 and
// 2 * 5120^3 = 268,435,456,000, so 5 * 2,952,790,016,000 = 14,763,950,080,000. The paper's
// model without the 2 min^3 term would give 13,421,772,800,000.
TEST(Cost, MuonFlopsPinnedByHandForQwen3_32bFc2) {
  const CostOptions o;
  EXPECT_EQ(optimizer_flops("muon", 5120, 25600, o), 14'763'950'080'000.0);
  EXPECT_EQ(optimizer_flops("muon", 25600, 5120, o), 14'763'950'080'000.0);
  EXPECT_NE(optimizer_flops("muon", 5120, 25600, o), 13'421'772'800'000.0);
  // 512 x 2048: 5 (2,147,483,648 + 268,435,456).
  EXPECT_EQ(optimizer_flops("muon", 512, 2048, o), 12'079'595'520.0);
}

// ZeRO-3's memory model: what a rank keeps of a task also counts its fp32 param and gradient
// (4 + 4 bytes per element) and, for a matrix task, the fp32 main copy the optimizer steps (4).
// Muon's state is its fp32 momentum (4 bytes per element), AdamW's exp_avg and exp_avg_sq (8).
TEST(Cost, ZeroStageThreeCountsParamsGradientsAndMainWithTheState) {
  CostOptions one, three;
  three.zero_stage = ZeroStage::kThree;
  EXPECT_EQ(state_bytes("muon", 10, 20, one), 4.0 * 200);
  EXPECT_EQ(state_bytes("muon", 10, 20, three), (4.0 + 12.0) * 200);
  EXPECT_EQ(state_bytes("adamw", 1, 300, one), 8.0 * 300);
  EXPECT_EQ(state_bytes("adamw", 1, 300, three), (8.0 + 8.0) * 300);
}

// The same per dtype (docs/precision.md), by hand. bf16: the param and gradient 2 + 2 bytes, every
// task's fp32 main copy 4 (an element-wise one too: an fp32 param is its own main copy, a bf16 one
// is not), so ZeRO-1 adds AdamW's main copy; with fp32 gradients 2 + 4.
TEST(Cost, MemoryCountsEachBufferAtItsDtype) {
  CostOptions one, three;
  three.zero_stage = ZeroStage::kThree;
  for (CostOptions* o : {&one, &three}) o->precision = DType::kBF16;
  EXPECT_EQ(state_bytes("muon", 10, 20, one), 4.0 * 200);
  EXPECT_EQ(state_bytes("muon", 10, 20, three), (4.0 + 2.0 + 2.0 + 4.0) * 200);
  EXPECT_EQ(state_bytes("adamw", 1, 300, one), (8.0 + 4.0) * 300);
  EXPECT_EQ(state_bytes("adamw", 1, 300, three), (8.0 + 2.0 + 2.0 + 4.0) * 300);
  three.grad_reduce_in_fp32 = true;
  EXPECT_EQ(state_bytes("muon", 10, 20, three), (4.0 + 2.0 + 4.0 + 4.0) * 200);
  EXPECT_EQ(state_bytes("adamw", 1, 300, three), (8.0 + 2.0 + 4.0 + 4.0) * 300);
}

TEST(Cost, AdamWCountsTwelveFlopsPerElement) {
  const CostOptions o;
  EXPECT_EQ(optimizer_flops("adamw", 10, 20, o), 2400.0);
  EXPECT_EQ(optimizer_flops("adamw", 1, 5120, o), 61440.0);
}

// The rates metrics price element-wise slices with: 12 FLOPs and 8 bytes (m and v in fp32) per
// element by hand (adamw.h), and n times them is bit for bit what pricing n elements gives.
TEST(Cost, ElementwiseRatesArePerElementAndScaleExactly) {
  CostOptions o;
  o.matrix_optimizer = "shampoo";
  o.optimizer_options = {{"precondition_frequency", 3}};  // the matrix optimizer's, not AdamW's
  const ElementwiseRates r = elementwise_rates(o);
  EXPECT_EQ(r.flops, 12.0);
  EXPECT_EQ(r.state_bytes, 8.0);
  for (std::int64_t n :
       {std::int64_t{1}, std::int64_t{7}, std::int64_t{155'582'464}, std::int64_t{1} << 40}) {
    EXPECT_EQ(r.flops * static_cast<double>(n), optimizer_flops("adamw", n, 1, o)) << n;
    EXPECT_EQ(r.state_bytes * static_cast<double>(n), state_bytes("adamw", n, 1, o)) << n;
  }
}

TEST(Cost, ShampooAmortisesEighAndSkipsLargeSides) {
  CostOptions o;
  o.matrix_optimizer = "shampoo";
  o.optimizer_options = {{"precondition_frequency", 10}};
  const double m = 8, n = 4;
  const double expected =
      12 * m * n + (4 * m * m * n + 11 * m * m * m / 10) + (4 * n * n * m + 11 * n * n * n / 10);
  EXPECT_DOUBLE_EQ(optimizer_flops("shampoo", 8, 4, o), expected);
  o.optimizer_options["max_precond_dim"] = 4;  // the 8-side is identity
  EXPECT_DOUBLE_EQ(optimizer_flops("shampoo", 8, 4, o),
                   12 * m * n + 4 * n * n * m + 11 * n * n * n / 10);
}

// Factorizations alone (what the simulator runs at the factorization rate): 1000 x 20000 with
// max_precond_dim 10000 and f = 10 preconditions only the 1000-side: Shampoo's eigh
// 9 * 1000^3 / 10 = 9e8, SOAP's QR 4/3 * 1000^3 / 10; Muon and AdamW have none.
TEST(Cost, FactorizationFlopsAreTheEighOrQrShare) {
  const CostOptions o;
  EXPECT_DOUBLE_EQ(factorization_flops("shampoo", 1000, 20000, o), 9e8);
  EXPECT_DOUBLE_EQ(factorization_flops("soap", 1000, 20000, o), 4.0 / 3.0 * 1e9 / 10.0);
  EXPECT_EQ(factorization_flops("muon", 1000, 1000, o), 0.0);
  EXPECT_EQ(factorization_flops("adamw", 1000, 1000, o), 0.0);
}

TEST(Cost, StateBytesPerOptimizer) {
  CostOptions o;
  EXPECT_DOUBLE_EQ(state_bytes("muon", 10, 20, o), 800);
  EXPECT_DOUBLE_EQ(state_bytes("adamw", 10, 20, o), 1600);
  EXPECT_DOUBLE_EQ(state_bytes("soap", 10, 20, o), 1600 + 8 * 100 + 8 * 400);
  EXPECT_DOUBLE_EQ(state_bytes("shampoo", 10, 20, o), 1600 + 8 * 100 + 8 * 400);
}

TEST(Cost, TaskCostFollowsTheKind) {
  CostOptions o;
  o.kind = CostKind::kNumel;
  EXPECT_DOUBLE_EQ(task_cost("muon", 10, 20, o), 200);
  o.kind = CostKind::kMemory;
  EXPECT_DOUBLE_EQ(task_cost("muon", 10, 20, o), 800);
  o.kind = CostKind::kCalibrated;
  EXPECT_THROW(task_cost("muon", 10, 20, o), UsageError);
}

TEST(Cost, ParsingRejectsUnknownNames) {
  EXPECT_EQ(parse_cost_kind("flops"), CostKind::kFlops);
  EXPECT_THROW(parse_cost_kind("time"), UsageError);
  const CostOptions o;
  try {
    optimizer_flops("lion", 2, 2, o);
    ADD_FAILURE() << "accepted lion";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown optimizer 'lion' (known: muon, shampoo, soap"),
              std::string::npos)
        << e.what();
  }
}

// The matrix optimizer's options price matrix tasks only; the element-wise optimizer keeps its
// defaults (a Muon key would be unknown to AdamW).
TEST(Cost, OptionsApplyToTheMatrixOptimizerOnly) {
  CostOptions o;
  o.optimizer_options = {{"ns_steps", 8}};
  EXPECT_EQ(task_cost(kElementwiseOptimizer, 1, 10, o), 10.0);
  o.kind = CostKind::kFlops;
  EXPECT_EQ(task_cost(kElementwiseOptimizer, 1, 10, o), 120.0);
  EXPECT_EQ(task_cost("muon", 4, 4, o), 8.0 * (4 * 64 + 2 * 64));
}

TEST(Cost, CheckOptionsWantsARegisteredMatrixOptimizer) {
  CostOptions o;
  EXPECT_NO_THROW(check_options(o));
  o.matrix_optimizer = "adamw";
  try {
    check_options(o);
    ADD_FAILURE() << "accepted adamw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("must be a matrix optimizer (muon, shampoo, soap"),
              std::string::npos)
        << e.what();
  }
  o.matrix_optimizer = "muon";
  o.optimizer_options = {{"max_precond_dim", 4}};  // not a Muon option
  EXPECT_THROW(check_options(o), UsageError);
}

// The CLI flags feed the keys the optimizer has, and only when given.
TEST(Cost, FlagsBecomeTheOptimizersOptions) {
  CostOptions o;
  set_matrix_optimizer(o, "shampoo", OptimizerFlags{});
  EXPECT_EQ(o.matrix_optimizer, "shampoo");
  EXPECT_EQ(o.optimizer_options, nlohmann::json::object());
  const OptimizerFlags flags{8, 7, 4000};
  set_matrix_optimizer(o, "shampoo", flags);
  EXPECT_EQ(o.optimizer_options,
            (nlohmann::json{{"precondition_frequency", 7}, {"max_precond_dim", 4000}}));
  set_matrix_optimizer(o, "muon", flags);
  EXPECT_EQ(o.optimizer_options, (nlohmann::json{{"ns_steps", 8}}));
  EXPECT_THROW(set_matrix_optimizer(o, "lion", flags), UsageError);
}

// Hostile flags: rejected by flag name and limit before the optimizer sees them; in
// range for the flag but not for the optimizer, the optimizer's own message names its key.
TEST(Cost, FlagsOutOfRangeAreUsageErrors) {
  struct Case {
    OptimizerFlags flags;
    const char* message;
  };
  const Case cases[] = {
      {{0, {}, {}}, "--ns-steps = 0 must lie in [1, 1000] (kMaxNsSteps)"},
      {{kMaxNsSteps + 1, {}, {}}, "--ns-steps"},
      {{{}, 0, {}}, "--precondition-frequency = 0 must lie in [1, 1000000]"},
      {{{}, -7, {}}, "--precondition-frequency"},
      {{{}, {}, -5}, "--max-precond-dim = -5 must lie in [0, 2147483648] (kMaxPrecondDim)"},
      {{{}, {}, kMaxPrecondDim + 1}, "--max-precond-dim"},
      {{{}, {}, 100000}, "shampoo option 'max_precond_dim' = 100000 must lie in [1, 65536]"}};
  for (const Case& c : cases) {
    CostOptions o;
    try {
      set_matrix_optimizer(o, "shampoo", c.flags);
      ADD_FAILURE() << "accepted " << c.message;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  CostOptions o;
  o.matrix_optimizer = "soap";
  o.optimizer_options = {{"precondition_frequency", 0}};
  for (CostKind kind : {CostKind::kNumel, CostKind::kFlops, CostKind::kMemory}) {
    o.kind = kind;
    EXPECT_THROW(task_cost("soap", 8, 8, o), UsageError);
  }
  EXPECT_THROW(optimizer_flops("soap", 8, 8, o), UsageError);
  EXPECT_THROW(state_bytes("soap", 8, 8, o), UsageError);
}

// A calibration fit whose line leaves the limits (a sample of absurd seconds) is refused, and so
// are samples outside the shape and seconds limits.
TEST(Calibration, FitAndSamplesStayInsideTheLimits) {
  Calibration c;
  const CostOptions o;
  EXPECT_THROW(c.fit("muon", {{2, 2, 1e5}, {2, 3, 1e5}}, o), UsageError);
  EXPECT_THROW(c.fit("muon", {{1, 1, 1e-3}, {kMaxCalibrationSide + 1, 2, 1.0}}, o), UsageError);
  EXPECT_THROW(c.fit("muon", {{64, 64, 1e-3}, {128, 128, kMaxSampleSeconds * 2}}, o), UsageError);
  EXPECT_THROW(
      c.fit("muon", {{64, 64, std::numeric_limits<double>::infinity()}, {128, 128, 1.0}}, o),
      UsageError);
  CostOptions bad;
  bad.optimizer_options = {{"ns_steps", -1}};
  EXPECT_THROW(c.fit("muon", {{64, 64, 1e-4}, {128, 128, 8e-4}}, bad), UsageError);
  c.fit("muon", {{1024, 1024, 1e-3}, {2048, 2048, 8e-3}}, o);
  const double s = c.seconds("muon", 1 << 24, 1 << 24, o);
  EXPECT_TRUE(std::isfinite(s) && s > 0.0);
}

}  // namespace
}  // namespace canzona::cost
