// Planning time (issue targets: qwen3-32b DP=32 TP=8 full plan under 5 ms; 100,000 tensors on
// 1024 ranks under 1 s; a 10,240-head model split per head on DP=8 TP=8 under 1 s). Run:
// make bench, or build/bench/plan/canzona_bench_plan.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

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
  o.dims.dp = dp;
  o.dims.tp = tp;
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
  o.dims.dp = 128;
  o.dims.tp = tp;
  o.variant = state.range(0) ? plan::PlannerVariant::kCanzona : plan::PlannerVariant::kPaper;
  o.cost.kind = cost::CostKind::kFlops;
  for (auto _ : state) benchmark::DoNotOptimize(plan::make_plan(m, o));
  state.SetLabel(state.range(0) ? "canzona, dp 128 x tp 8" : "paper, dp 128 x tp 8");
}

// Many heads split per head: 10,240 query heads in 8 query groups, head dim 128, on a 4096-wide
// 2-layer model, so each layer's QKV is 10,256 tasks of 128 x 4096 (2 MiB each). Second arg 1:
// C_max of 10^6 MiB, so each DP rank's tasks form one micro group (the paper planner's
// rollback used to re-solve that whole group for every added task).
void BM_PerHead10k_Dp8_Tp8(benchmark::State& state) {
  model::TransformerConfig c;
  c.name = "per-head-10k";
  c.hidden = 4096;
  c.ffn_hidden = 11008;
  c.num_layers = 2;
  c.num_heads = 10240;
  c.num_query_groups = 8;
  c.head_dim = 128;
  c.vocab_size = 32000;
  model::BuildOptions build;
  build.tp = 8;
  build.qkv_split = model::QkvSplit::kPerHead;
  const auto m = model::build_transformer(c, build);
  plan::PlanOptions o;
  o.dims.dp = 8;
  o.dims.tp = 8;
  o.variant = state.range(0) ? plan::PlannerVariant::kCanzona : plan::PlannerVariant::kPaper;
  if (state.range(1)) o.cmax_mb = 1e6;
  for (auto _ : state) benchmark::DoNotOptimize(plan::make_plan(m, o));
  state.SetLabel(std::string(state.range(0) ? "canzona" : "paper") +
                 (state.range(1) ? ", one group" : ""));
}

}  // namespace

BENCHMARK(BM_PerHead10k_Dp8_Tp8)
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_Qwen3_32b_Dp32_Tp8_Canzona)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen3_32b_Dp32_Tp8_Paper)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Synthetic100k_1024Ranks)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
