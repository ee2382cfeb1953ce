// Planning time (issue targets: qwen3-32b DP=32 TP=8 full plan under 5 ms; 100,000 tensors on
// 1024 ranks under 1 s). Run: make bench, or build/bench/plan/canzona_bench_plan.
#include <benchmark/benchmark.h>

#include <random>

#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace {

using namespace canzona;

void plan_preset(benchmark::State& state, const char* preset, int dp, int tp, plan::Strategy s,
                 plan::PlannerVariant v) {
  model::BuildOptions build;
  build.tp = tp;
  const auto m = model::build_transformer(model::preset(preset), build);
  plan::PlanOptions o;
  o.dp = dp;
  o.tp = tp;
  o.strategy = s;
  o.variant = v;
  o.cost.kind = cost::CostKind::kFlops;
  for (auto _ : state) benchmark::DoNotOptimize(plan::make_plan(m, o));
}

// A synthetic model of `count` tensors: transformer-like matrices of mixed sizes and norms.
model::ModelSpec synthetic(int count, int tp) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> side(1, 64);
  model::ModelSpec m;
  m.name = "synthetic";
  for (int i = 0; i < count; ++i) {
    model::ParamSpec p;
    p.name = std::to_string(i);
    p.name.insert(p.name.begin(), 't');
    if (i % 4 == 3) {
      p.shape = {64LL * side(rng)};
      p.optimizer = model::OptimizerClass::kElementwise;
    } else {
      p.shape = {64LL * side(rng) * tp, 64LL * side(rng)};
      p.tp_split_dim = 0;
      p.optimizer = model::OptimizerClass::kMatrix;
    }
    m.params.push_back(std::move(p));
  }
  return m;
}

void BM_Qwen3_32b_Dp32_Tp8_Canzona(benchmark::State& state) {
  plan_preset(state, "qwen3-32b", 32, 8, plan::Strategy::kLbAsc, plan::PlannerVariant::kCanzona);
}
void BM_Qwen3_32b_Dp32_Tp8_Paper(benchmark::State& state) {
  plan_preset(state, "qwen3-32b", 32, 8, plan::Strategy::kLbAsc, plan::PlannerVariant::kPaper);
}
void BM_Synthetic100k_1024Ranks(benchmark::State& state) {
  const int tp = 8;
  const auto m = synthetic(100'000, tp);
  plan::PlanOptions o;
  o.dp = 128;
  o.tp = tp;
  o.variant = state.range(0) ? plan::PlannerVariant::kCanzona : plan::PlannerVariant::kPaper;
  o.cost.kind = cost::CostKind::kFlops;
  for (auto _ : state) benchmark::DoNotOptimize(plan::make_plan(m, o));
  state.SetLabel(state.range(0) ? "canzona, dp 128 x tp 8" : "paper, dp 128 x tp 8");
}

}  // namespace

BENCHMARK(BM_Qwen3_32b_Dp32_Tp8_Canzona)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen3_32b_Dp32_Tp8_Paper)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Synthetic100k_1024Ranks)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
