#include "canzona/optim/blas_env.h"

#include <cblas.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace canzona::optim {
namespace {

constexpr const char* kReexecMarker = "CANZONA_BLAS_REEXEC";

// Rank of a core name in capability order; unknown names rank lowest.
int core_rank(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "skylakex" || lower == "cooperlake" || lower == "sapphirerapids") return 3;
  if (lower == "haswell" || lower == "zen") return 2;
  if (lower == "sandybridge") return 1;
  return 0;
}

}  // namespace

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? std::string(name) : std::string();
}

std::string recommended_blas_core() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SKYLAKEX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
  return "";
}

bool blas_core_misdetected() {
  const std::string recommended = recommended_blas_core();
  if (recommended.empty()) return false;
  return core_rank(blas_core_name()) < core_rank(recommended);
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
  std::fprintf(stderr,
               "canzona: warning: OpenBLAS runs the '%s' kernels on a CPU that supports '%s' "
               "(about 4x slower); run with OPENBLAS_CORETYPE=%s\n",
               blas_core_name().c_str(), recommended.c_str(), recommended.c_str());
}

int blas_threads() {
  return openblas_get_num_threads();
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace canzona::optim
