// make_plan on hostile inputs: options out of range or not finite (each a UsageError naming the
// flag and, for upper bounds, the limit), shapes whose elements or gradient bytes overflow int64
// (a UsageError, never a wrapped plan), and the C_max rule at the largest shapes the model layer
// allows (every host's bytes in a micro group within capacity unless the task is alone there).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

model::ModelSpec tiny(int tp) {
  model::BuildOptions build;
  build.tp = tp;
  return model::build_transformer(model::preset("qwen3-tiny"), build);
}

// The UsageError's message, or "" when make_plan succeeded or threw something else.
std::string usage_error(const model::ModelSpec& m, const PlanOptions& o) {
  try {
    make_plan(m, o);
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a UsageError: ") + e.what();
  }
  return "";
}

struct BadOptions {
  const char* name;
  std::function<void(PlanOptions&)> set;
  std::vector<const char*> words;  // all must appear in the message
};

TEST(PlanHostile, OptionsOutOfRangeOrNotFiniteNameTheFlagAndLimit) {
  const int big = std::numeric_limits<int>::max();
  const std::vector<BadOptions> cases{
      {"dp 0", [](PlanOptions& o) { o.dims.dp = 0; }, {"--dp", "positive"}},
      {"tp negative", [](PlanOptions& o) { o.dims.tp = -8; }, {"--tp", "positive"}},
      {"pp INT_MIN", [](PlanOptions& o) { o.dims.pp = std::numeric_limits<int>::min(); }, {"--pp"}},
      {"dp over limit", [](PlanOptions& o) { o.dims.dp = (1 << 20) + 1; }, {"--dp", "kMaxRanks"}},
      {"grid over limit",
       [](PlanOptions& o) {
         o.dims.dp = 1 << 11;
         o.dims.tp = 1 << 10;
         o.dims.pp = 2;
       },
       {"--dp x --tp x --pp", "kMaxRanks"}},
      {"grid would overflow int64",
       [big](PlanOptions& o) { o.dims.dp = o.dims.tp = o.dims.pp = big; },
       {"--dp", "kMaxRanks"}},
      {"alpha nan", [](PlanOptions& o) { o.alpha = kNan; }, {"--alpha", "finite"}},
      {"alpha inf", [](PlanOptions& o) { o.alpha = kInf; }, {"--alpha", "[0, 1]"}},
      {"alpha above 1", [](PlanOptions& o) { o.alpha = 1.5; }, {"--alpha", "[0, 1]"}},
      {"cmax nan", [](PlanOptions& o) { o.cmax_mb = kNan; }, {"--cmax-mb"}},
      {"cmax -inf", [](PlanOptions& o) { o.cmax_mb = -kInf; }, {"--cmax-mb", "positive"}},
      {"cmax 0", [](PlanOptions& o) { o.cmax_mb = 0.0; }, {"--cmax-mb", "positive"}},
      {"cmax inf", [](PlanOptions& o) { o.cmax_mb = kInf; }, {"--cmax-mb", "kMaxCmaxMb"}},
      {"cmax 1e300 (bytes overflow int64)",
       [](PlanOptions& o) { o.cmax_mb = 1e300; },
       {"--cmax-mb", "kMaxCmaxMb"}},
      {"cmax under a byte", [](PlanOptions& o) { o.cmax_mb = 1e-9; }, {"--cmax-mb", "one byte"}},
  };
  const model::ModelSpec m = tiny(2);
  for (const BadOptions& c : cases) {
    PlanOptions o;
    o.dims.dp = 2;
    o.dims.tp = 2;
    c.set(o);
    const std::string message = usage_error(m, o);
    ASSERT_FALSE(message.empty()) << c.name << ": accepted";
    EXPECT_EQ(message.find('\n'), std::string::npos) << c.name << ": " << message;
    for (const char* word : c.words)
      EXPECT_NE(message.find(word), std::string::npos) << c.name << ": " << message;
  }
}

TEST(PlanHostile, LimitsThemselvesAreAccepted) {
  PlanOptions o;
  o.alpha = 0.0;
  o.cmax_mb = kMaxCmaxMb;
  EXPECT_EQ(usage_error(tiny(1), o), "");
  o.alpha = 1.0;
  o.cmax_mb = 1.0 / (1024.0 * 1024.0);  // one byte
  o.dims.tp = 2;
  EXPECT_EQ(usage_error(tiny(2), o), "");
}

// kMaxCutPoints = 2^22 bounds (dp + 1) x buckets for asc / lb-asc: 16 one-param buckets allow
// dp = 2^18 - 1 exactly and refuse 2^18 with a message naming the limit; sc keeps no cuts, so the
// same grid is accepted there.
TEST(PlanHostile, CutPointsAreBoundedPerStage) {
  model::ModelSpec m;
  m.name = "16 buckets";
  for (int k = 0; k < 16; ++k) {
    model::ParamSpec p;
    p.name = std::string("p").append(std::to_string(k));
    p.shape = {64};
    m.params.push_back(p);
  }
  PlanOptions o;
  o.layout.bucket_size = 1;  // every param closes its bucket
  o.dims.dp = (1 << 18) - 1;
  const Plan plan = make_plan(m, o);
  ASSERT_EQ(plan.stages[0].layout.buckets.size(), 16u);
  ASSERT_EQ(plan.stages[0].cuts.size(), 16u);
  EXPECT_EQ(plan.stages[0].cuts[0].size(), std::size_t{1} << 18);
  o.dims.dp = 1 << 18;
  const std::string message = usage_error(m, o);
  EXPECT_NE(message.find("kMaxCutPoints"), std::string::npos) << message;
  EXPECT_NE(message.find("16 buckets x (--dp 262144 + 1) = 4194320"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  o.strategy = Strategy::kSc;
  EXPECT_EQ(usage_error(m, o), "");
}

model::ParamSpec matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
  model::ParamSpec p;
  p.name = name;
  p.shape = {rows, cols};
  p.tp_split_dim = 0;
  p.optimizer = model::OptimizerClass::kMatrix;
  return p;
}

TEST(PlanHostile, ShapesWhoseCountsOverflowAreUsageErrors) {
  const std::int64_t half = std::int64_t{1} << 32;
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::vector<model::ParamSpec>> models{
      {matrix("w", half, half)},                                    // 2^64 elements
      {matrix("w", max - 1, 2)},                                    // elements overflow
      {matrix("w", std::int64_t{1} << 31, std::int64_t{1} << 31)},  // 2^62 elements, 2^64 bytes
      {matrix("a", std::int64_t{1} << 30, std::int64_t{1} << 31),   // 2^61 elements each:
       matrix("b", std::int64_t{1} << 30, std::int64_t{1} << 31)},  // bytes sum past int64
  };
  for (std::size_t k = 0; k < models.size(); ++k) {
    model::ModelSpec m;
    m.name = "hostile";
    m.params = models[k];
    for (PlannerVariant v : {PlannerVariant::kPaper, PlannerVariant::kCanzona}) {
      PlanOptions o;
      o.dims.dp = 2;
      o.dims.tp = 2;
      o.variant = v;
      const std::string message = usage_error(m, o);
      EXPECT_FALSE(message.empty()) << "model " << k << ": a plan was made";
      EXPECT_EQ(message.find("not a UsageError"), std::string::npos) << message;
    }
  }
}

// Matrices at the model layer's per-param limit (2^40 elements, 2^42 gradient bytes) with a
// one-MiB C_max: every group keeps each host within capacity unless its task is alone there.
TEST(PlanHostile, CapacityRuleHoldsAtTheLargestShapes) {
  model::ModelSpec m;
  m.name = "huge";
  const std::int64_t side = std::int64_t{1} << 20;
  for (int k = 0; k < 3; ++k) m.params.push_back(matrix("big" + std::to_string(k), side, side));
  for (int k = 0; k < 6; ++k) m.params.push_back(matrix("small" + std::to_string(k), 256, 256));
  for (PlannerVariant v : {PlannerVariant::kPaper, PlannerVariant::kCanzona}) {
    PlanOptions o;
    o.dims.dp = 1;
    o.dims.tp = 2;
    o.cmax_mb = 1.0;
    o.variant = v;
    const Plan plan = make_plan(m, o);
    const std::int64_t capacity = 1 << 20;
    for (const StagePlan& stage : plan.stages)
      for (const auto& groups : stage.groups)
        for (const MicroGroup& g : groups) {
          std::vector<std::int64_t> bytes(o.dims.tp, 0);
          std::vector<int> count(o.dims.tp, 0);
          for (int t : g.tasks) {
            const Task& task = stage.tasks[t];
            EXPECT_EQ(task.gather_bytes, task.rows * task.cols * 4);
            bytes[task.host] += task.gather_bytes;
            ++count[task.host];
          }
          for (int h = 0; h < o.dims.tp; ++h)
            EXPECT_TRUE(bytes[h] <= capacity || count[h] == 1)
                << to_string(v) << ": host " << h << " has " << bytes[h] << " bytes in " << count[h]
                << " tasks";
        }
  }
}

}  // namespace
}  // namespace canzona::plan
