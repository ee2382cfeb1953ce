// Strategy comparisons and parameter sweeps (sweep.h).
#include "canzona/sim/sweep.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/cost/cost.h"

namespace canzona::sim {

SweepKind parse_sweep_kind(const std::string& name) {
  if (name == "model") return SweepKind::kModel;
  if (name == "dp") return SweepKind::kDp;
  if (name == "tp") return SweepKind::kTp;
  if (name == "alpha") return SweepKind::kAlpha;
  if (name == "cmax") return SweepKind::kCmax;
  throw UsageError(str("unknown sweep '", name, "' (expected model, dp, tp, alpha or cmax)"));
}

const char* to_string(SweepKind kind) {
  switch (kind) {
    case SweepKind::kModel:
      return "model";
    case SweepKind::kDp:
      return "dp";
    case SweepKind::kTp:
      return "tp";
    case SweepKind::kAlpha:
      return "alpha";
    case SweepKind::kCmax:
      return "cmax";
  }
  return "?";
}

std::vector<std::string> default_sweep_values(SweepKind kind) {
  switch (kind) {
    case SweepKind::kModel:
      return {"qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b"};
    case SweepKind::kDp:
      return {"16", "32", "64", "128"};
    case SweepKind::kTp:
      return {"2", "4", "8"};
    case SweepKind::kAlpha:
      return {"0", "0.25", "0.5", "0.75", "1"};
    case SweepKind::kCmax:
      return {"1", "64", "128", "256", "512", "1024", "2048"};
  }
  return {};
}

namespace {

double parse_number(SweepKind kind, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(value.c_str(), &end);
  CANZONA_REQUIRE(
      !value.empty() && end != nullptr && *end == '\0' && errno == 0 && std::isfinite(x),
      "--sweep ", to_string(kind), ": value '", value, "' is not a finite number");
  return x;
}

int parse_int(SweepKind kind, const std::string& value) {
  const double x = parse_number(kind, value);
  CANZONA_REQUIRE(x == std::floor(x), "--sweep ", to_string(kind), ": value '", value,
                  "' is not an integer");
  CANZONA_REQUIRE(x >= 1.0 && x <= static_cast<double>(kMaxGridRanks), "--sweep ", to_string(kind),
                  ": value '", value, "' must lie in [1, ", kMaxGridRanks, "] (kMaxGridRanks)");
  return static_cast<int>(x);
}

}  // namespace

Scenario with_value(Scenario scenario, SweepKind kind, const std::string& value) {
  switch (kind) {
    case SweepKind::kModel:
      scenario.model = value;
      break;
    case SweepKind::kDp:
      scenario.plan.dims.dp = parse_int(kind, value);
      break;
    case SweepKind::kTp:
      scenario.plan.dims.tp = parse_int(kind, value);
      break;
    case SweepKind::kAlpha:
      scenario.plan.alpha = parse_number(kind, value);
      break;
    case SweepKind::kCmax:
      scenario.plan.cmax_mb = parse_number(kind, value);
      break;
  }
  return scenario;
}

void check_scenario(const Scenario& scenario) {
  const plan::PlanOptions& p = scenario.plan;
  ParallelDims dims = p.dims;
  if (scenario.gpus != 0) {
    // --gpus fixes dp x tp x pp: tp and pp first, then dp from them (checked with the rest).
    require_in_range(dims.tp, 1, kMaxGridRanks, "--tp", "kMaxGridRanks");
    require_in_range(dims.pp, 1, kMaxGridRanks, "--pp", "kMaxGridRanks");
    const std::int64_t per_replica = std::int64_t{dims.tp} * dims.pp;  // < 2^40
    require_in_range(per_replica, 1, kMaxGridRanks, "tp x pp", "kMaxGridRanks");
    require_in_range(scenario.gpus, 1, kMaxGridRanks, "--gpus", "kMaxGridRanks");
    CANZONA_REQUIRE(scenario.gpus % per_replica == 0, "--gpus ", scenario.gpus,
                    " is not a multiple of tp * pp = ", per_replica);
    dims.dp = static_cast<int>(scenario.gpus / per_replica);
  }
  dims.check();
  check_workload(scenario.workload);
  cost::check_options(p.cost);
}

std::vector<Breakdown> run_strategies(const Scenario& scenario, const Cluster& cluster,
                                      const std::vector<plan::Strategy>& strategies) {
  check_scenario(scenario);
  plan::PlanOptions base = scenario.plan;
  if (scenario.gpus > 0) base.dims.dp = scenario.gpus / (base.dims.tp * base.dims.pp);
  model::BuildOptions build = scenario.build;
  build.tp = base.dims.tp;
  const model::ModelSpec model = model::load_model(scenario.model, build);
  std::vector<Breakdown> results;
  for (plan::Strategy strategy : strategies) {
    plan::PlanOptions options = base;
    options.strategy = strategy;
    const plan::Plan plan = plan::make_plan(model, options);
    results.push_back(simulate(model, plan, cluster, scenario.workload));
  }
  return results;
}

std::vector<ResultGroup> run_sweep(const Scenario& scenario, const Cluster& cluster,
                                   const std::vector<plan::Strategy>& strategies, SweepKind kind,
                                   const std::vector<std::string>& values) {
  CANZONA_REQUIRE(!values.empty(), "--sweep-values: no values given");
  CANZONA_REQUIRE(values.size() <= kMaxSweepValues, "--sweep-values: ", values.size(),
                  " values, more than ", kMaxSweepValues, " (kMaxSweepValues)");
  std::vector<Scenario> points;
  for (const auto& value : values) {
    points.push_back(with_value(scenario, kind, value));
    check_scenario(points.back());
  }
  std::vector<ResultGroup> groups;
  for (std::size_t i = 0; i < values.size(); ++i) {
    groups.push_back({values[i], run_strategies(points[i], cluster, strategies)});
  }
  return groups;
}

}  // namespace canzona::sim
