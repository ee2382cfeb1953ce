#include "canzona/optim/blas_env.h"

#include <cblas.h>
#include <cpuid.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

namespace canzona::optim {
namespace {

// Set by reexec_with_blas_core to the core OpenBLAS had picked: stops a second re-exec and tells
// blas_core_source() that canzona, not the user, set OPENBLAS_CORETYPE.
constexpr const char* kReexecMarker = "CANZONA_BLAS_REEXEC";

std::string lower(const std::string& name) {
  std::string out;
  for (char c : name) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The AMD family (base + extended), or 0 on other vendors.
unsigned amd_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return 0;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // AuthenticAMD
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  return ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
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
  // at 105-108 GFLOP/s with ZEN against 98-102 with SKYLAKEX/COOPERLAKE kernels. On Zen 5
  // (family 1Ah) the SKYLAKEX kernels run 1.7-1.9x faster than HASWELL and match a double loop
  // (docs/cli.md, "OpenBLAS kernel selection").
  if (avx2 && amd_family() == 0x19) return "ZEN";
  if (avx512) return "SKYLAKEX";
  if (avx2) return amd_family() != 0 ? "ZEN" : "HASWELL";
  return "";
}

int blas_core_class(const std::string& name) {
  const std::string n = lower(name);
  if (n == "skylakex" || n == "cooperlake" || n == "sapphirerapids") return 3;
  if (n == "haswell" || n == "zen") return 2;
  if (n == "sandybridge") return 1;
  return 0;
}

bool blas_core_weaker_than_cpu() {
  const std::string recommended = recommended_blas_core();
  return !recommended.empty() && blas_core_class(blas_core_name()) < blas_core_class(recommended);
}

std::string blas_core_source() {
  const std::string set = env_or_empty("OPENBLAS_CORETYPE");
  if (set.empty()) return "detected by OpenBLAS";
  const std::string picked = env_or_empty(kReexecMarker);
  if (!picked.empty())
    return "OPENBLAS_CORETYPE=" + set + ", set by canzona (OpenBLAS picked " + picked + ")";
  return "OPENBLAS_CORETYPE=" + set + ", set by the environment";
}

std::string blas_core_report() {
  return blas_core_name() + " (" + blas_core_source() + ")";
}

void reexec_with_blas_core(const std::string& core, char** argv) {
  const std::string picked = blas_core_name();
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  setenv(kReexecMarker, picked.empty() ? "?" : picked.c_str(), 1);
  execv("/proc/self/exe", argv);
  // Still here: exec failed. Keep the core OpenBLAS loaded with; undo the variables so reports
  // say so and children do not inherit a core this process does not run.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kReexecMarker);
}

void ensure_blas_core(int /*argc*/, char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) set_blas_threads(1);
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice, as it is
  if (std::getenv(kReexecMarker) != nullptr) return;        // already re-executed once
  if (blas_core_weaker_than_cpu()) reexec_with_blas_core(recommended_blas_core(), argv);
}

int blas_threads() {
  return openblas_get_num_threads();
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace canzona::optim
