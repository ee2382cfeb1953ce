#include "canzona/optim/blas_env.h"

#include <cblas.h>
#include <cpuid.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace canzona::optim {
namespace {

constexpr const char* kReexecMarker = "CANZONA_BLAS_REEXEC";

std::string lower(const std::string& name) {
  std::string out;
  for (char c : name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Capability class of a core name: 3 AVX-512 kernels, 2 AVX2/FMA, 1 AVX, 0 older or unknown.
int core_rank(const std::string& name) {
  const std::string n = lower(name);
  if (n == "skylakex" || n == "cooperlake" || n == "sapphirerapids") return 3;
  if (n == "haswell" || n == "zen") return 2;
  if (n == "sandybridge") return 1;
  return 0;
}

// AMD family 0x19 (Zen 3 / Zen 4). Zen 4 executes 512-bit instructions as two 256-bit halves, so
// the AVX-512 kernels gain nothing over the AVX2 ones.
bool amd_family_19h() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // AuthenticAMD
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
  return family == 0x19;
}

}  // namespace

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? std::string(name) : std::string();
}

std::string recommended_blas_core() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  // Measured on AMD EPYC Zen 4, one thread, OpenBLAS 0.3.21: sgemm 1024x3072 / 2048^2 / 4096x1024
  // at 105-108 GFLOP/s with ZEN against 98-102 with SKYLAKEX/COOPERLAKE kernels.
  if (avx2 && amd_family_19h()) return "ZEN";
  if (avx512) return "SKYLAKEX";
  if (avx2) return __builtin_cpu_is("amd") ? "ZEN" : "HASWELL";
  return "";
}

bool blas_core_misdetected() {
  const std::string recommended = recommended_blas_core();
  return !recommended.empty() && lower(blas_core_name()) != lower(recommended);
}

void reexec_with_blas_core(const std::string& core, char** argv) {
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  setenv(kReexecMarker, "1", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "canzona: warning: re-exec with OPENBLAS_CORETYPE=%s failed: %s\n",
               core.c_str(), std::strerror(errno));
}

void ensure_blas_core(int /*argc*/, char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) set_blas_threads(1);
  if (!blas_core_misdetected()) return;
  const std::string recommended = recommended_blas_core();
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && std::getenv(kReexecMarker) == nullptr)
    reexec_with_blas_core(recommended, argv);
  // Still here: the user chose the core (respected), or the re-exec did not take. Only a core of
  // a lower capability class is worth a warning.
  if (core_rank(blas_core_name()) < core_rank(recommended))
    std::fprintf(stderr,
                 "canzona: warning: OpenBLAS runs the '%s' kernels on a CPU that supports '%s' "
                 "(up to 4x slower); run with OPENBLAS_CORETYPE=%s\n",
                 blas_core_name().c_str(), recommended.c_str(), recommended.c_str());
}

int blas_threads() {
  return openblas_get_num_threads();
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace canzona::optim
