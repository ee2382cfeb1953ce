#include "canzona/optim/kernel_bench.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/optim/linalg.h"
#include "canzona/optim/optimizer.h"
#include "products.h"

namespace canzona::optim {
namespace {

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                                 float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (float& x : v) x = dist(gen);
  return v;
}

constexpr int kFmaChains = 12;  // independent accumulators: > latency x FMA ports
constexpr long kFmaIterations = 40'000'000;

__attribute__((target("avx512f"))) double fma_loop_avx512(long iterations) {
  __m512 acc[kFmaChains];
  for (auto& a : acc) a = _mm512_set1_ps(0.0f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long k = 0; k < iterations; ++k)
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_fmadd_ps(x, acc[i], y);
  float lanes[16], sum = 0.0f;
  for (auto& a : acc) {
    _mm512_storeu_ps(lanes, a);
    for (float v : lanes) sum += v;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(long iterations) {
  __m256 acc[kFmaChains];
  for (auto& a : acc) a = _mm256_set1_ps(0.0f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (long k = 0; k < iterations; ++k)
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_fmadd_ps(x, acc[i], y);
  float lanes[8], sum = 0.0f;
  for (auto& a : acc) {
    _mm256_storeu_ps(lanes, a);
    for (float v : lanes) sum += v;
  }
  return sum;
}

}  // namespace

Timing time_runs(const std::function<void()>& fn, int repeats) {
  CANZONA_REQUIRE(repeats >= 1, "time_runs: repeats must be >= 1, got ", repeats);
  fn();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  const double median = n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  return Timing{median, seconds.front(), repeats};
}

double sgemm_flops(std::int64_t rows, std::int64_t cols) {
  return 2.0 * static_cast<double>(rows) * static_cast<double>(cols) *
         static_cast<double>(std::min(rows, cols));
}

Timing time_sgemm(std::int64_t rows, std::int64_t cols, int repeats) {
  const std::int64_t s = std::min(rows, cols), l = std::max(rows, cols);
  const std::vector<float> a = random_matrix(s, s, 1, 1.0f), b = random_matrix(s, l, 2, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(s * l));
  return time_runs(
      [&] {
        gemm(Trans::kNo, Trans::kNo, 1.0f, matrix_view(a.data(), s, s), matrix_view(b.data(), s, l),
             0.0f, matrix_view(c.data(), s, l));
      },
      repeats);
}

Timing time_bf16_gemm(std::int64_t rows, std::int64_t cols, int repeats) {
  const std::int64_t s = std::min(rows, cols), l = std::max(rows, cols);
  const std::vector<float> a = random_matrix(s, s, 1, 1.0f), b = random_matrix(s, l, 2, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(s * l));
  const detail::ProductPath path = detail::product_path(NsDtype::kBF16);
  std::vector<float> a_store(detail::operand_bytes(path, s, s) / sizeof(float) + 1);
  std::vector<float> b_store(detail::operand_bytes(path, s, l) / sizeof(float) + 1);
  const detail::Operand ao =
      detail::make_operand(path, matrix_view(a.data(), s, s), a_store.data());
  const detail::Operand bo =
      detail::make_operand(path, matrix_view(b.data(), s, l), b_store.data());
  return time_runs([&] { detail::product(path, ao, bo, matrix_view(c.data(), s, l)); }, repeats);
}

Timing time_newton_schulz(std::int64_t rows, std::int64_t cols, const NewtonSchulzOptions& options,
                          int repeats) {
  const std::vector<float> u = random_matrix(rows, cols, 3, 0.01f);
  std::vector<float> out(u.size());
  return time_runs(
      [&] {
        newton_schulz(matrix_view(u.data(), rows, cols), matrix_view(out.data(), rows, cols),
                      options);
      },
      repeats);
}

StepTiming time_optimizer_step(const std::string& name, std::int64_t rows, std::int64_t cols,
                               nlohmann::json options, int frequency, int repeats) {
  CANZONA_REQUIRE(frequency >= 1, "time_optimizer_step: frequency must be >= 1");
  CANZONA_REQUIRE(repeats >= 1, "time_optimizer_step: repeats must be >= 1");
  const bool preconditioned = name == "shampoo" || name == "soap";
  std::vector<float> w = random_matrix(rows, cols, 4, 0.02f);
  const std::vector<float> g = random_matrix(rows, cols, 5, 1e-3f);
  // One instance refreshing every `cycle` steps: step 1 (untimed) builds the preconditioner,
  // steps 2 .. cycle are steady, step cycle + 1 refreshes (Shampoo: (t - 1) % f == 0; SOAP:
  // (t - 1) % f == 0 for its Adam step t - 1), and so on.
  const int cycle = repeats + 1;
  if (preconditioned) options["precondition_frequency"] = cycle;
  std::unique_ptr<Optimizer> opt = create_optimizer(name, ParamInfo{"bench", rows, cols}, options);
  auto run_step = [&] {
    opt->step(matrix_view(w.data(), rows, cols), matrix_view(g.data(), rows, cols));
  };

  StepTiming t;
  t.frequency = preconditioned ? frequency : 1;
  t.steady_s = time_runs(run_step, repeats).median_s;  // warm-up = step 1, then steady steps
  if (!preconditioned) {
    t.refresh_s = t.amortised_s = t.steady_s;
    return t;
  }
  const int refresh_repeats = std::max(rows, cols) >= 2048 ? 1 : std::min(repeats, 3);
  std::vector<double> refresh;
  for (int r = 0; r < refresh_repeats; ++r) {
    if (r > 0)
      for (int k = 0; k < cycle - 1; ++k) run_step();
    const auto start = std::chrono::steady_clock::now();
    run_step();
    refresh.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(refresh.begin(), refresh.end());
  t.refresh_s = refresh[refresh.size() / 2];
  t.amortised_s = ((frequency - 1) * t.steady_s + t.refresh_s) / frequency;
  return t;
}

double measure_fma_peak_gflops() {
  __builtin_cpu_init();
  int lanes = 0;
  double (*loop)(long) = nullptr;
  if (__builtin_cpu_supports("avx512f")) {
    lanes = 16;
    loop = fma_loop_avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    lanes = 8;
    loop = fma_loop_avx2;
  } else {
    return 0.0;
  }
  loop(kFmaIterations / 10);
  double best = 0.0;
  for (int r = 0; r < 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    volatile double sink = loop(kFmaIterations);
    (void)sink;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * lanes * kFmaChains * static_cast<double>(kFmaIterations) / s);
  }
  return best / 1e9;
}

double sgemm_error_bound_fraction() {
  constexpr std::int64_t m = 256, n = 384, k = 512;
  const std::vector<float> a = random_matrix(m, k, 11, 1.0f), b = random_matrix(k, n, 12, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  gemm(Trans::kNo, Trans::kNo, 1.0f, matrix_view(a.data(), m, k), matrix_view(b.data(), k, n), 0.0f,
       matrix_view(c.data(), m, n));
  const double u = std::ldexp(1.0, -24);
  double worst = 0.0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0.0, magnitude = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double term = static_cast<double>(a[i * k + p]) * b[p * n + j];
        ref += term;
        magnitude += std::abs(term);
      }
      const double err = std::abs(static_cast<double>(c[i * n + j]) - ref);
      const double bound = static_cast<double>(k) * u * magnitude;
      const double fraction = bound > 0 ? err / bound : (err > 0 ? HUGE_VAL : 0.0);
      if (!(fraction <= worst)) worst = std::isnan(fraction) ? HUGE_VAL : fraction;
    }
  }
  return worst;
}

CpuVectorInfo cpu_vector_info() {
  __builtin_cpu_init();
  CpuVectorInfo info;
  if (__builtin_cpu_supports("avx512f"))
    info.fp32_lanes = 16;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    info.fp32_lanes = 8;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    try {
      info.reported_mhz = std::stod(line.substr(colon + 1));
    } catch (const std::exception&) {
      info.reported_mhz = 0.0;
    }
    if (!std::isfinite(info.reported_mhz) || info.reported_mhz < 0) info.reported_mhz = 0.0;
    break;
  }
  return info;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

}  // namespace canzona::optim
