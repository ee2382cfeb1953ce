// lr schedules (schedule.h) against hand-computed values.
#include "canzona/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

constexpr double kEps = 1e-12;

ScheduleOptions options(Schedule schedule, std::int64_t warmup, std::int64_t total,
                        double min_ratio) {
  ScheduleOptions o;
  o.schedule = schedule;
  o.warmup = warmup;
  o.total = total;
  o.min_ratio = min_ratio;
  return o;
}

// The message of the UsageError that `f` throws, or "" (and a test failure) when it does not.
template <typename F>
std::string usage_error_message(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

TEST(ScheduleWarmup, RampsLinearlyFromOneOverWarmupToOne) {
  for (Schedule s : {Schedule::kConstant, Schedule::kLinear, Schedule::kCosine}) {
    const auto o = options(s, 4, 20, 0.1);
    EXPECT_NEAR(lr_factor(o, 1), 0.25, kEps) << to_string(s);
    EXPECT_NEAR(lr_factor(o, 2), 0.5, kEps) << to_string(s);
    EXPECT_NEAR(lr_factor(o, 3), 0.75, kEps) << to_string(s);
    EXPECT_NEAR(lr_factor(o, 4), 1.0, kEps) << to_string(s);
  }
}

TEST(ScheduleWarmup, WarmupEqualToTotalIsAPureRamp) {
  for (Schedule s : {Schedule::kConstant, Schedule::kLinear, Schedule::kCosine}) {
    const auto o = options(s, 5, 5, 0.0);
    for (std::int64_t step = 1; step <= 5; ++step) {
      EXPECT_NEAR(lr_factor(o, step), static_cast<double>(step) / 5.0, kEps)
          << to_string(s) << " step " << step;
    }
    EXPECT_NEAR(lr_factor(o, 6), 1.0, kEps) << to_string(s);
  }
}

TEST(ScheduleCosine, HitsOneHalfwayAndMinRatioAtProgressZeroHalfOne) {
  // warmup 10, total 110: q = (step - 10) / 100.
  const double min_ratio = 0.2;
  const auto o = options(Schedule::kCosine, 10, 110, min_ratio);
  EXPECT_NEAR(lr_factor(o, 10), 1.0, kEps);                      // q = 0 (end of warmup)
  EXPECT_NEAR(lr_factor(o, 60), (1.0 + min_ratio) / 2.0, kEps);  // q = 0.5
  EXPECT_NEAR(lr_factor(o, 110), min_ratio, kEps);               // q = 1
  const double q = 0.25;                                         // step 35
  EXPECT_NEAR(lr_factor(o, 35),
              min_ratio + (1.0 - min_ratio) * (1.0 + std::cos(std::numbers::pi * q)) / 2.0, kEps);
}

TEST(ScheduleCosine, WithoutWarmupStartsJustBelowOne) {
  // warmup 0, total 4: q = step / 4, so step 1 is already a quarter into the decay.
  const auto o = options(Schedule::kCosine, 0, 4, 0.0);
  EXPECT_NEAR(lr_factor(o, 1), (1.0 + std::cos(std::numbers::pi / 4)) / 2.0, kEps);
  EXPECT_NEAR(lr_factor(o, 2), 0.5, kEps);
  EXPECT_NEAR(lr_factor(o, 4), 0.0, kEps);
}

TEST(ScheduleLinear, MidpointsAreHandValues) {
  // warmup 0, total 10, min 0.1: factor = 0.1 + 0.9 * (1 - step / 10).
  const auto o = options(Schedule::kLinear, 0, 10, 0.1);
  EXPECT_NEAR(lr_factor(o, 5), 0.55, kEps);
  EXPECT_NEAR(lr_factor(o, 10), 0.1, kEps);
  EXPECT_NEAR(lr_factor(o, 1), 0.1 + 0.9 * 0.9, kEps);
  // warmup 2, total 6, min 0.5: q = (step - 2) / 4.
  const auto w = options(Schedule::kLinear, 2, 6, 0.5);
  EXPECT_NEAR(lr_factor(w, 3), 0.5 + 0.5 * 0.75, kEps);
  EXPECT_NEAR(lr_factor(w, 4), 0.75, kEps);
  EXPECT_NEAR(lr_factor(w, 6), 0.5, kEps);
}

TEST(ScheduleLinear, DecreasesMonotonicallyAfterWarmup) {
  const auto o = options(Schedule::kLinear, 3, 50, 0.05);
  for (std::int64_t step = 4; step < 50; ++step) {
    EXPECT_GT(lr_factor(o, step), lr_factor(o, step + 1)) << "step " << step;
  }
}

TEST(ScheduleConstant, IsOneAfterWarmupRegardlessOfMinRatio) {
  const auto o = options(Schedule::kConstant, 2, 10, 0.3);
  for (std::int64_t step = 2; step <= 10; ++step) EXPECT_EQ(lr_factor(o, step), 1.0) << step;
}

TEST(ScheduleClamp, StepsOutsideOneToTotalAreClamped) {
  const auto o = options(Schedule::kCosine, 4, 20, 0.1);
  EXPECT_EQ(lr_factor(o, 0), lr_factor(o, 1));
  EXPECT_EQ(lr_factor(o, -7), lr_factor(o, 1));
  EXPECT_EQ(lr_factor(o, 21), lr_factor(o, 20));
  EXPECT_EQ(lr_factor(o, std::numeric_limits<std::int64_t>::max()), lr_factor(o, 20));
  EXPECT_NEAR(lr_factor(o, 1000), 0.1, kEps);
  const auto l = options(Schedule::kLinear, 0, 10, 0.0);
  EXPECT_NEAR(lr_factor(l, 0), 0.9, kEps);
  EXPECT_NEAR(lr_factor(l, 11), 0.0, kEps);
}

TEST(ScheduleRange, FactorStaysInMinRatioToOneAfterWarmup) {
  for (Schedule s : {Schedule::kConstant, Schedule::kLinear, Schedule::kCosine}) {
    const auto o = options(s, 7, 37, 0.25);
    for (std::int64_t step = 7; step <= 37; ++step) {
      const double f = lr_factor(o, step);
      EXPECT_GE(f, 0.25 - kEps) << to_string(s) << " step " << step;
      EXPECT_LE(f, 1.0 + kEps) << to_string(s) << " step " << step;
    }
  }
}

TEST(ScheduleValidate, AcceptsBoundaryValues) {
  EXPECT_NO_THROW(validate(options(Schedule::kCosine, 0, 1, 0.0)));
  EXPECT_NO_THROW(validate(options(Schedule::kCosine, 1, 1, 1.0)));
  EXPECT_NO_THROW(validate(options(Schedule::kLinear, 100, 100, 0.5)));
  EXPECT_NO_THROW(validate(ScheduleOptions{}));
}

TEST(ScheduleValidate, ErrorsNameTheFlag) {
  struct Case {
    ScheduleOptions o;
    const char* flag;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Case cases[] = {
      {options(Schedule::kCosine, 0, 0, 0.1), "--steps"},
      {options(Schedule::kCosine, 0, -5, 0.1), "--steps"},
      {options(Schedule::kCosine, -1, 10, 0.1), "--warmup"},
      {options(Schedule::kCosine, 11, 10, 0.1), "--warmup"},
      {options(Schedule::kCosine, 0, 10, -0.01), "--min-lr-ratio"},
      {options(Schedule::kCosine, 0, 10, 1.5), "--min-lr-ratio"},
      {options(Schedule::kCosine, 0, 10, nan), "--min-lr-ratio"},
      {options(Schedule::kCosine, 0, 10, std::numeric_limits<double>::infinity()),
       "--min-lr-ratio"},
  };
  for (const Case& c : cases) {
    const std::string message = usage_error_message([&] { validate(c.o); });
    EXPECT_NE(message.find(c.flag), std::string::npos)
        << "expected '" << c.flag << "' in: " << message;
  }
}

TEST(ScheduleParse, RoundTripsEveryName) {
  for (Schedule s : {Schedule::kConstant, Schedule::kLinear, Schedule::kCosine}) {
    EXPECT_EQ(parse_schedule(to_string(s)), s);
  }
  EXPECT_STREQ(to_string(Schedule::kConstant), "constant");
  EXPECT_STREQ(to_string(Schedule::kLinear), "linear");
  EXPECT_STREQ(to_string(Schedule::kCosine), "cosine");
}

TEST(ScheduleParse, UnknownNamesNameTheFlag) {
  for (const char* name : {"", "Cosine", "exp", "cosine ", "wsd"}) {
    const std::string message = usage_error_message([&] { parse_schedule(name); });
    EXPECT_NE(message.find("--schedule"), std::string::npos) << "for '" << name << "': " << message;
  }
}

}  // namespace
}  // namespace canzona::train
