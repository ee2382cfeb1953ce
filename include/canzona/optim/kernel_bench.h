// Timing of the optimizer kernels, shared by `canzona bench-kernels` and bench/optim.
//
// Terms. A *shape* is rows x cols of a weight matrix; s = min(rows, cols), l = max. The *sgemm at
// a shape* is the GEMM Newton–Schulz spends most of its time in, in the wide orientation NS works
// on (it transposes tall matrices): C (s x l) = A (s x s) B (s x l), 2 s^2 l FLOPs. Times are
// medians of `repeats` timed runs after one untimed warm-up run, on one thread (whatever OpenBLAS
// is set to; ensure_blas_core sets 1).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "canzona/optim/muon.h"

namespace canzona::optim {

struct Timing {
  double median_s = 0.0;
  double min_s = 0.0;
  int runs = 0;
};

// Calls fn once untimed, then `repeats` (>= 1) times timed with a steady clock.
Timing time_runs(const std::function<void()>& fn, int repeats);

// 2 s^2 l = 2 * rows * cols * min(rows, cols).
double sgemm_flops(std::int64_t rows, std::int64_t cols);
Timing time_sgemm(std::int64_t rows, std::int64_t cols, int repeats);
// The same product (s x s) (s x l) in bf16 on this CPU's bf16 backend (bf16_products.h): the
// library's plain bf16 GEMM, operands rounded before the timing; 2 s^2 l FLOPs.
Timing time_bf16_gemm(std::int64_t rows, std::int64_t cols, int repeats);
Timing time_newton_schulz(std::int64_t rows, std::int64_t cols, const NewtonSchulzOptions& options,
                          int repeats);

// Step times of one optimizer from the registry on a rows x cols parameter with random data.
// steady_s: median of steps that do not refresh a preconditioner; refresh_s: a step that does
// (Shampoo's eigendecompositions, SOAP's power iteration + QR; equal to steady_s for Muon and
// AdamW); amortised_s = ((f - 1) steady_s + refresh_s) / f with f = `frequency`.
struct StepTiming {
  double steady_s = 0.0;
  double refresh_s = 0.0;
  double amortised_s = 0.0;
  int frequency = 1;
};
// `options` are the registry's JSON options; for "shampoo" and "soap" precondition_frequency is
// set by this function (one instance refreshes right after its timed steady steps). Refresh steps
// are timed min(repeats, 3) times, once when l >= 2048 (an eigendecomposition of that size takes
// seconds).
StepTiming time_optimizer_step(const std::string& name, std::int64_t rows, std::int64_t cols,
                               nlohmann::json options, int frequency, int repeats);

// Single-core fp32 FMA throughput of a register-only loop (AVX-512 or AVX2 FMA, about 0.2 s):
// the attainable peak at the clock the core runs now. 0 when the CPU has neither.
double measure_fma_peak_gflops();

// sgemm through the backend seam (whatever OpenBLAS core is loaded) against a double-precision
// triple loop, C (m x n) = A (m x k) B (k x n) for 256 x 384 x 512 with random data: the largest
// |c - ref| / (k u sum_p |a_ip b_pj|) over the elements (u = 2^-24), the standard fp32 dot-product
// error bound. A correct kernel stays far below 1; a core that computes wrong results (an OpenBLAS
// build on a CPU it does not know) goes far above.
double sgemm_error_bound_fraction();

// "model name" from /proc/cpuinfo ("" when unavailable).
std::string cpu_model_name();

// What the CPU reports about its fp32 vector throughput: the widest FMA vector (16 fp32 lanes
// with AVX-512F, 8 with AVX2 + FMA, 0 without FMA) and the clock /proc/cpuinfo gives ("cpu MHz"
// of the first CPU, 0 when absent; a VM often reports the base clock, not the boost clock the
// core runs at). The number of FMA pipes per core is not reported by CPUID, so a nominal peak
// from these alone is not known; bench-kernels takes the measured FMA loop as the peak instead.
struct CpuVectorInfo {
  int fp32_lanes = 0;
  double reported_mhz = 0.0;
};
CpuVectorInfo cpu_vector_info();

}  // namespace canzona::optim
