// The calibrated cost model (src/cost/calibration.cpp, written with bench-kernels): the fit, its
// guards, and the JSON file round trip and errors.
#include "canzona/cost/calibration.h"

#include <gtest/gtest.h>

#include <fstream>

#include "canzona/common/error.h"

namespace canzona::cost {
namespace {

const std::pair<std::int64_t, std::int64_t> kShapes[] = {
    {512, 512}, {1024, 3072}, {2048, 2048}, {4096, 1024}};

std::vector<CalibrationSample> linear_samples(const std::string& kind, double intercept,
                                              double slope, const CostOptions& options) {
  std::vector<CalibrationSample> samples;
  for (auto [rows, cols] : kShapes)
    samples.push_back({rows, cols, intercept + slope * optimizer_flops(kind, rows, cols, options)});
  return samples;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Calibration, FitRecoversLinearModelForEveryOptimizer) {
  const CostOptions options;
  for (const char* kind : {"muon", "shampoo", "soap", "adamw"}) {
    SCOPED_TRACE(kind);
    Calibration c;
    c.fit(kind, linear_samples(kind, 2e-4, 8e-12, options), options);
    EXPECT_NEAR(c.fit_of(kind).intercept_s, 2e-4, 1e-9);
    EXPECT_NEAR(c.fit_of(kind).seconds_per_flop, 8e-12, 1e-17);
    const double expected = 2e-4 + 8e-12 * optimizer_flops(kind, 1536, 768, options);
    EXPECT_NEAR(c.seconds(kind, 1536, 768, options), expected, 1e-9 * expected);
  }
}

TEST(Calibration, NegativeInterceptIsClampedAndSlopeStaysPositive) {
  const CostOptions options;
  Calibration c;
  c.fit("muon", linear_samples("muon", -1e-3, 1e-11, options), options);
  EXPECT_EQ(c.fit_of("muon").intercept_s, 0.0);
  EXPECT_GT(c.fit_of("muon").seconds_per_flop, 0.0);
  // Noise that makes the big shape faster than the small one: still a positive slope.
  c.fit("adamw", {{100, 100, 2e-3}, {1000, 1000, 1e-3}}, options);
  EXPECT_GT(c.fit_of("adamw").seconds_per_flop, 0.0);
  EXPECT_GE(c.fit_of("adamw").intercept_s, 0.0);
}

TEST(Calibration, RejectsTooFewOrBadSamplesAndMissingFits) {
  const CostOptions options;
  Calibration c;
  EXPECT_THROW(c.fit("muon", {{64, 64, 1e-3}}, options), UsageError);
  EXPECT_THROW(c.fit("muon", {{64, 64, 1e-3}, {0, 64, 1e-3}}, options), UsageError);
  EXPECT_THROW(c.fit("muon", {{64, 64, 1e-3}, {128, 64, -1.0}}, options), UsageError);
  EXPECT_THROW(c.seconds("soap", 64, 64, options), UsageError);
}

TEST(Calibration, WriteThenReadRoundTripsExactly) {
  const CostOptions options;
  Calibration c;
  c.cpu = "AMD EPYC";
  c.blas_core = "SkylakeX";
  c.fit("muon", linear_samples("muon", 1e-4, 7e-12, options), options);
  c.fit("soap", linear_samples("soap", 3e-4, 9e-12, options), options);
  const std::string path = ::testing::TempDir() + "calibration_roundtrip.json";
  c.write(path);
  const Calibration back = Calibration::read(path);
  EXPECT_EQ(back.cpu, "AMD EPYC");
  EXPECT_EQ(back.blas_core, "SkylakeX");
  for (const char* kind : {"muon", "soap"}) {
    EXPECT_TRUE(back.fit_of(kind).present);
    EXPECT_EQ(back.fit_of(kind).intercept_s, c.fit_of(kind).intercept_s);
    EXPECT_EQ(back.fit_of(kind).seconds_per_flop, c.fit_of(kind).seconds_per_flop);
    ASSERT_EQ(back.fit_of(kind).samples.size(), 4u);
    EXPECT_EQ(back.fit_of(kind).samples[1].cols, 3072);
  }
  EXPECT_FALSE(back.fit_of("shampoo").present);
}

TEST(Calibration, ReadErrorsNameFileAndKey) {
  auto expect_error = [](const std::string& path, const std::string& fragment) {
    try {
      Calibration::read(path);
      ADD_FAILURE() << "expected UsageError for " << path;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error(temp_file("cal_missing.json",
                         R"({"version": 1, "optimizers": {"muon": {"intercept_s": 0}}})"),
               "optimizers.muon: key 'seconds_per_flop' missing");
  expect_error(temp_file("cal_unknown.json",
                         R"({"version": 1, "optimizers": {"lion": {"intercept_s": 0,
                             "seconds_per_flop": 1e-12}}})"),
               "optimizers.lion");
  expect_error(temp_file("cal_version.json", R"({"version": 2, "optimizers": {}})"), "version");
  expect_error(temp_file("cal_sample.json",
                         R"({"version": 1, "optimizers": {"muon": {"intercept_s": 0,
                             "seconds_per_flop": 1e-12, "samples": [{"rows": 4}]}}})"),
               "samples[0]: key 'cols' missing");
  expect_error(::testing::TempDir() + "no_such_calibration.json", "cannot read");
}

}  // namespace
}  // namespace canzona::cost
