// Google Benchmark runs of the optimizer kernels on Qwen3-like shapes, one BLAS thread.
// Counters (shown as rates): GFLOP=x/s is nominal FLOPs per second; peak_GFLOP=y/s is that rate
// as a fraction of 147.2 GFLOP/s, a fixed nominal fp32 peak per core kept so runs on different
// days compare (`canzona bench-kernels` measures the peak of the core it runs on). Example:
// canzona_bench_optim --benchmark_filter=NewtonSchulz
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "canzona/optim/blas_env.h"
#include "canzona/optim/linalg.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer.h"

namespace {

using namespace canzona::optim;

constexpr double kPeakGflops = 147.2;

std::vector<float> random_matrix(std::int64_t n, std::uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

void set_rate(benchmark::State& state, double flops) {
  state.counters["GFLOP"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_GFLOP"] =
      benchmark::Counter(flops / 1e9 / kPeakGflops, benchmark::Counter::kIsIterationInvariantRate);
}

// C (s x l) = A (s x s) B (s x l), s = min(rows, cols), l = max: Newton–Schulz's update GEMM.
void BM_Sgemm(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const std::int64_t s = std::min(rows, cols), l = std::max(rows, cols);
  const std::vector<float> a = random_matrix(s * s, 1, 1.0f), b = random_matrix(s * l, 2, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(s * l));
  for (auto _ : state)
    gemm(Trans::kNo, Trans::kNo, 1.0f, matrix_view(a.data(), s, s), matrix_view(b.data(), s, l),
         0.0f, matrix_view(c.data(), s, l));
  set_rate(state, 2.0 * s * s * l);
}

void BM_NewtonSchulz(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const std::vector<float> u = random_matrix(rows * cols, 3, 0.01f);
  std::vector<float> out(u.size());
  const NewtonSchulzOptions options;
  for (auto _ : state)
    newton_schulz(matrix_view(u.data(), rows, cols), matrix_view(out.data(), rows, cols), options);
  set_rate(state, newton_schulz_flops(rows, cols, options.steps));
}

// Steady-state optimizer steps (Shampoo/SOAP refresh only at the first, untimed, step).
void optimizer_step(benchmark::State& state, const char* name) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  nlohmann::json options = nlohmann::json::object();
  if (std::string(name) == "shampoo" || std::string(name) == "soap")
    options["precondition_frequency"] = 1 << 30;
  auto opt = create_optimizer(name, ParamInfo{"bench", rows, cols}, options);
  std::vector<float> w = random_matrix(rows * cols, 4, 0.02f);
  const std::vector<float> g = random_matrix(rows * cols, 5, 1e-3f);
  opt->step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
  for (auto _ : state)
    opt->step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
}

void BM_MuonStep(benchmark::State& state) {
  optimizer_step(state, "muon");
}
void BM_ShampooStep(benchmark::State& state) {
  optimizer_step(state, "shampoo");
}
void BM_SoapStep(benchmark::State& state) {
  optimizer_step(state, "soap");
}
void BM_AdamWStep(benchmark::State& state) {
  optimizer_step(state, "adamw");
}

void qwen_shapes(benchmark::internal::Benchmark* b) {
  for (auto [r, c] : {std::pair{1024, 3072}, {2048, 2048}, {4096, 1024}, {512, 512}})
    b->Args({r, c});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Sgemm)->Apply(qwen_shapes);
BENCHMARK(BM_NewtonSchulz)->Apply(qwen_shapes);
BENCHMARK(BM_MuonStep)->Apply(qwen_shapes);
BENCHMARK(BM_ShampooStep)->Args({512, 512})->Args({1024, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoapStep)->Args({512, 512})->Args({1024, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamWStep)->Args({1024, 3072})->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  ensure_blas_core(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_core", blas_core_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
