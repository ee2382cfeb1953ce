// Child process for blas_env_test: OpenBLAS fixes its kernels when it loads, so every core the
// tests need gets a fresh process. Prints "core: <name>" and exits 0 on success.
//   blas_core_probe sgemm                  sgemm vs triple loop under whatever core loaded
//   blas_core_probe digest                 prints "digest: ..." of the optimizers' results
//   blas_core_probe ensure                 ensure_blas_core first thing, as canzona's main does
//   blas_core_probe ensure --unset-coretype  same, after clearing OPENBLAS_CORETYPE: with the
//                                          library loaded as PRESCOTT this is a misdetecting host
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "canzona/optim/blas_env.h"
#include "digest.h"
#include "sgemm_check.h"

int main(int argc, char** argv) {
  using namespace canzona::optim;
  const bool ensure = argc >= 2 && std::strcmp(argv[1], "ensure") == 0;
  if (ensure) {
    if (argc >= 3 && std::strcmp(argv[2], "--unset-coretype") == 0 &&
        std::getenv("CANZONA_BLAS_REEXEC") == nullptr)
      unsetenv("OPENBLAS_CORETYPE");
    ensure_blas_core(argc, argv);
  }
  std::printf("core: %s\n", blas_core_name().c_str());
  std::printf("reexecuted: %s\n", std::getenv("CANZONA_BLAS_REEXEC") ? "yes" : "no");
  std::printf("weaker: %s\n", blas_core_weaker_than_cpu() ? "yes" : "no");
  std::printf("source: %s\n", blas_core_source().c_str());
  std::printf("threads: %d\n", blas_threads());
  if (argc >= 2 && std::strcmp(argv[1], "digest") == 0)
    std::printf("digest: %s\n", test::optimizer_digest().c_str());
  if (argc >= 2 && std::strcmp(argv[1], "sgemm") == 0) {
    const std::string failure = test::check_sgemm_against_triple_loop();
    if (!failure.empty()) {
      std::printf("FAIL: %s\n", failure.c_str());
      return 1;
    }
    std::printf("sgemm matches the triple loop\n");
  }
  return 0;
}
