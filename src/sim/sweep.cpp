// Strategy comparisons and parameter sweeps (sweep.h).
#include "canzona/sim/sweep.h"

#include <cstdlib>

#include "canzona/common/error.h"

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
  double x = std::strtod(value.c_str(), &end);
  CANZONA_REQUIRE(!value.empty() && end != nullptr && *end == '\0', "--sweep ", to_string(kind),
                  ": value '", value, "' is not a number");
  return x;
}

int parse_int(SweepKind kind, const std::string& value) {
  double x = parse_number(kind, value);
  CANZONA_REQUIRE(x == static_cast<int>(x), "--sweep ", to_string(kind), ": value '", value,
                  "' is not an integer");
  return static_cast<int>(x);
}

}  // namespace

Scenario with_value(Scenario scenario, SweepKind kind, const std::string& value) {
  switch (kind) {
    case SweepKind::kModel:
      scenario.model = value;
      break;
    case SweepKind::kDp:
      scenario.plan.dp = parse_int(kind, value);
      break;
    case SweepKind::kTp:
      scenario.plan.tp = parse_int(kind, value);
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

std::vector<Breakdown> run_strategies(const Scenario& scenario, const Cluster& cluster,
                                      const std::vector<plan::Strategy>& strategies) {
  plan::PlanOptions base = scenario.plan;
  if (scenario.gpus > 0) {
    const int per_replica = base.tp * base.pp;
    CANZONA_REQUIRE(per_replica > 0 && scenario.gpus % per_replica == 0, "--gpus ", scenario.gpus,
                    " is not a multiple of tp * pp = ", per_replica);
    base.dp = scenario.gpus / per_replica;
  }
  model::BuildOptions build = scenario.build;
  build.tp = base.tp;
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
  std::vector<ResultGroup> groups;
  for (const auto& value : values) {
    groups.push_back(
        {value, run_strategies(with_value(scenario, kind, value), cluster, strategies)});
  }
  return groups;
}

}  // namespace canzona::sim
