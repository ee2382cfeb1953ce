// bench/optim/bf16-candidates.sh's measuring program: C (M x N, fp32) = A (M x K) B (K x N), bf16
// operands, row-major, one thread, through the library chosen at compile time (USE_DNNL: oneDNN's
// matmul, USE_MKL: cblas_gemm_bf16bf16f32; neither: OpenBLAS sgemm on fp32 operands ("sgemm") or
// on the bf16 operands widened ("widen")). Prints the median time, the rate and the largest error
// of 64 entries against an fp64 sum of the same bf16 products, relative to the sum of |a b|; a
// library without a bf16 matmul on this CPU says so and exits 0.
//   bf16_candidates sgemm|widen|dnnl|mkl M N K [repeats]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#ifndef USE_MKL
#include <cblas.h>
#endif
#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif
#ifdef USE_MKL
#include <mkl.h>
#endif

namespace {

std::uint16_t to_bf16(float f) {  // nearest, ties to even (finite inputs)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class F>
double median_s(F f, int repeats) {
  f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: bf16_candidates sgemm|widen|dnnl|mkl M N K [repeats]\n");
    return 2;
  }
  const std::string which = argv[1];
  const long m = std::atol(argv[2]), n = std::atol(argv[3]), k = std::atol(argv[4]);
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 5;
  std::mt19937 gen(1);
  std::normal_distribution<float> dist;
  std::vector<float> af(m * k), bf(k * n), c(m * n);
  for (float& x : af) x = dist(gen);
  for (float& x : bf) x = dist(gen);
  std::vector<std::uint16_t> a(m * k), b(k * n);
  for (long i = 0; i < m * k; ++i) a[i] = to_bf16(af[i]);
  for (long i = 0; i < k * n; ++i) b[i] = to_bf16(bf[i]);
  double t = 0.0;
  std::string note;
  if (which == "sgemm") {
#ifndef USE_MKL
    t = median_s(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, af.data(), k,
                      bf.data(), n, 0.f, c.data(), n);
        },
        repeats);
#endif
  } else if (which == "widen") {
#ifndef USE_MKL
    std::vector<float> aw(m * k), bw(k * n);
    t = median_s(
        [&] {
          for (long i = 0; i < m * k; ++i) aw[i] = from_bf16(a[i]);
          for (long i = 0; i < k * n; ++i) bw[i] = from_bf16(b[i]);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, aw.data(), k,
                      bw.data(), n, 0.f, c.data(), n);
        },
        repeats);
#endif
  }
#ifdef USE_DNNL
  else if (which == "dnnl") {
    using namespace dnnl;
    try {
      engine eng(engine::kind::cpu, 0);
      stream s(eng);
      const memory::desc amd({m, k}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc bmd({k, n}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc cmd({m, n}, memory::data_type::f32, memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
      matmul::primitive_desc pd(eng, amd, bmd, cmd);
#else
      matmul::primitive_desc pd(matmul::desc(amd, bmd, cmd), eng);
#endif
      const dnnl_version_t* v = dnnl_version();
      note = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
             std::to_string(v->patch) + " " + pd.impl_info_str();
      matmul p(pd);
      memory am(amd, eng, a.data()), bm(bmd, eng, b.data()), cm(cmd, eng, c.data());
      t = median_s(
          [&] {
            p.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
            s.wait();
          },
          repeats);
    } catch (const dnnl::error& e) {
      std::printf("%-6s %5ldx%5ldx%5ld  no bf16 matmul on this CPU: %s\n", which.c_str(), m, n, k,
                  e.what());
      return 0;
    }
  }
#endif
#ifdef USE_MKL
  else if (which == "mkl") {
    t = median_s(
        [&] {
          cblas_gemm_bf16bf16f32(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f,
                                 reinterpret_cast<const MKL_BF16*>(a.data()), k,
                                 reinterpret_cast<const MKL_BF16*>(b.data()), n, 0.f, c.data(), n);
        },
        repeats);
    note = "MKL cblas_gemm_bf16bf16f32";
  }
#endif
  if (t == 0.0) {
    std::fprintf(stderr, "bf16_candidates: '%s' is not built into this binary\n", which.c_str());
    return 2;
  }
  double worst = 0.0;
  for (int s = 0; s < 64; ++s) {
    const long i = (s * 7919L) % m, j = (s * 104729L) % n;
    double sum = 0.0, abs_sum = 0.0;
    for (long p = 0; p < k; ++p) {
      const double x = which == "sgemm" ? double{af[i * k + p]} * bf[p * n + j]
                                        : double{from_bf16(a[i * k + p])} * from_bf16(b[p * n + j]);
      sum += x;
      abs_sum += std::fabs(x);
    }
    worst = std::max(worst, std::fabs(c[i * n + j] - sum) / abs_sum);
  }
  std::printf("%-6s %5ldx%5ldx%5ld  %8.2f ms  %7.1f GFLOP/s  error/sum|ab| %.1e  %s\n",
              which.c_str(), m, n, k, t * 1e3, 2.0 * m * n * k / t / 1e9, worst, note.c_str());
  return 0;
}
