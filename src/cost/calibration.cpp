// Calibrated cost model (calibration.h): least-squares fit of measured optimizer step times
// against cost::optimizer_flops, and its JSON file.
#include "canzona/cost/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::cost {
namespace {

constexpr int kFormatVersion = 1;

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  CANZONA_REQUIRE(j.is_object(), where, ": expected a JSON object");
  CANZONA_REQUIRE(j.contains(key), where, ": key '", key, "' missing");
  return j.at(key);
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = member(j, key, where);
  CANZONA_REQUIRE(v.is_number(), where, ": key '", key, "' must be a number, got ", v.dump());
  return v.get<double>();
}

std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = member(j, key, where);
  CANZONA_REQUIRE(v.is_number_integer(), where, ": key '", key, "' must be an integer, got ",
                  v.dump());
  CANZONA_REQUIRE(!v.is_number_unsigned() ||
                      v.get<std::uint64_t>() <=
                          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                  where, ": key '", key, "' = ", v.dump(), " exceeds the 64-bit integer range");
  return v.get<std::int64_t>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return "";
  CANZONA_REQUIRE(j.at(key).is_string(), where, ": key '", key, "' must be a string");
  return j.at(key).get<std::string>();
}

void check_sample(const CalibrationSample& s, const std::string& where) {
  CANZONA_REQUIRE(
      s.rows >= 1 && s.cols >= 1 && s.rows <= kMaxCalibrationSide && s.cols <= kMaxCalibrationSide,
      where, ": sample shape ", s.rows, "x", s.cols, " must lie in [1, ", kMaxCalibrationSide,
      "] per side (kMaxCalibrationSide)");
  CANZONA_REQUIRE(std::isfinite(s.seconds) && s.seconds > 0.0 && s.seconds <= kMaxSampleSeconds,
                  where, ": sample ", s.rows, "x", s.cols, " has seconds ", s.seconds,
                  " (must be finite, > 0 and <= ", kMaxSampleSeconds, ", kMaxSampleSeconds)");
}

// Throws UsageError "<where>: key '<key>' = x must lie in [..] (<limit>)" unless the fitted or
// read line is finite and inside the limits of calibration.h.
void check_line(double intercept_s, double seconds_per_flop, const std::string& where) {
  CANZONA_REQUIRE(
      std::isfinite(intercept_s) && intercept_s >= 0.0 && intercept_s <= kMaxInterceptSeconds,
      where, ": key 'intercept_s' = ", intercept_s, " must lie in [0, ", kMaxInterceptSeconds,
      "] (kMaxInterceptSeconds)");
  CANZONA_REQUIRE(std::isfinite(seconds_per_flop) && seconds_per_flop >= kMinSecondsPerFlop &&
                      seconds_per_flop <= kMaxSecondsPerFlop,
                  where, ": key 'seconds_per_flop' = ", seconds_per_flop, " must lie in [",
                  kMinSecondsPerFlop, ", ", kMaxSecondsPerFlop,
                  "] (kMinSecondsPerFlop, kMaxSecondsPerFlop)");
}

}  // namespace

// Ordinary least squares of y = seconds on x = flops. Two guards keep the model physical: a
// negative intercept is clamped to 0 and the slope refitted through the origin, and a slope that
// comes out <= 0 (timing noise on samples of nearly equal flops) is replaced by the
// through-the-origin fit, so predictions grow with work and stay positive.
void Calibration::fit(const std::string& optimizer, std::vector<CalibrationSample> samples,
                      const CostOptions& options) {
  const std::string where = str("calibration of ", optimizer);
  CANZONA_REQUIRE(samples.size() >= 2, where, " needs at least 2 samples (got ", samples.size(),
                  ")");
  CANZONA_REQUIRE(samples.size() <= kMaxCalibrationSamples, where, " has ", samples.size(),
                  " samples, more than ", kMaxCalibrationSamples, " (kMaxCalibrationSamples)");
  optimizer_flops(optimizer, 1, 1, options);  // unknown optimizer or invalid options
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(samples.size());
  for (const CalibrationSample& s : samples) {
    check_sample(s, where);
    const double x = optimizer_flops(optimizer, s.rows, s.cols, options);
    CANZONA_REQUIRE(std::isfinite(x) && x > 0.0, where, ": optimizer_flops of ", s.rows, "x",
                    s.cols, " is ", x);
    sx += x;
    sy += s.seconds;
    sxx += x * x;
    sxy += x * s.seconds;
  }
  CalibrationFit& f = fits_[optimizer];
  const double denominator = n * sxx - sx * sx;
  double slope = denominator > 0.0 ? (n * sxy - sx * sy) / denominator : 0.0;
  double intercept = (sy - slope * sx) / n;
  if (slope <= 0.0 || intercept < 0.0) {
    intercept = 0.0;
    slope = sxy / sxx;
  }
  check_line(intercept, slope, where);
  f.present = true;
  f.intercept_s = intercept;
  f.seconds_per_flop = slope;
  f.samples = std::move(samples);
}

double Calibration::seconds(const std::string& optimizer, std::int64_t rows, std::int64_t cols,
                            const CostOptions& options) const {
  const CalibrationFit& f = fit_of(optimizer);
  CANZONA_REQUIRE(f.present, "the calibration has no fit for optimizer '", optimizer,
                  "'; rerun `canzona bench-kernels --calibration FILE`");
  return f.intercept_s + f.seconds_per_flop * optimizer_flops(optimizer, rows, cols, options);
}

const CalibrationFit& Calibration::fit_of(const std::string& optimizer) const {
  static const CalibrationFit kAbsent;
  const auto it = fits_.find(optimizer);
  return it == fits_.end() ? kAbsent : it->second;
}

Calibration Calibration::read(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  CANZONA_REQUIRE(j.is_object(), path, ": expected a JSON object");
  const std::int64_t version = integer(j, "version", path);
  CANZONA_REQUIRE(version == kFormatVersion, path, ": key 'version' is ", version,
                  ", this build reads version ", kFormatVersion);
  const nlohmann::json& optimizers = member(j, "optimizers", path);
  CANZONA_REQUIRE(optimizers.is_object(), path, ": key 'optimizers' must be an object");
  Calibration c;
  c.cpu = text(j, "cpu", path);
  c.blas_core = text(j, "blas_core", path);
  for (const auto& [name, value] : optimizers.items()) {
    const std::string where = path + ": optimizers." + name;
    try {
      optim::find_optimizer_spec(name);
    } catch (const UsageError& e) {
      throw UsageError(str(where, ": ", e.what()));
    }
    CalibrationFit& f = c.fits_[name];
    f.present = true;
    f.intercept_s = number(value, "intercept_s", where);
    f.seconds_per_flop = number(value, "seconds_per_flop", where);
    check_line(f.intercept_s, f.seconds_per_flop, where);
    if (!value.contains("samples")) continue;
    CANZONA_REQUIRE(value.at("samples").is_array(), where, ": key 'samples' must be an array");
    CANZONA_REQUIRE(value.at("samples").size() <= kMaxCalibrationSamples, where,
                    ": key 'samples' has ", value.at("samples").size(), " entries, more than ",
                    kMaxCalibrationSamples, " (kMaxCalibrationSamples)");
    for (const nlohmann::json& s : value.at("samples")) {
      const std::string at = where + ".samples[" + std::to_string(f.samples.size()) + "]";
      CalibrationSample sample{integer(s, "rows", at), integer(s, "cols", at),
                               number(s, "seconds", at)};
      check_sample(sample, at);
      f.samples.push_back(sample);
    }
  }
  return c;
}

void Calibration::write(const std::string& path) const {
  nlohmann::json j;
  j["version"] = kFormatVersion;
  j["cpu"] = cpu;
  j["blas_core"] = blas_core;
  j["optimizers"] = nlohmann::json::object();
  for (const auto& [name, f] : fits_) {
    if (!f.present) continue;
    nlohmann::json samples = nlohmann::json::array();
    for (const CalibrationSample& s : f.samples)
      samples.push_back({{"rows", s.rows}, {"cols", s.cols}, {"seconds", s.seconds}});
    j["optimizers"][name] = {{"intercept_s", f.intercept_s},
                             {"seconds_per_flop", f.seconds_per_flop},
                             {"samples", samples}};
  }
  write_json_file(path, j);
}

}  // namespace canzona::cost
