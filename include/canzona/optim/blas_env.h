// OpenBLAS kernel selection and threading (design.md sections 5 and 6).
//
// Debian's OpenBLAS 0.3.21 picks its kernels from CPUID when the library is loaded (before main)
// and can misdetect a CPU (AMD Zen 4 has been seen as "Prescott", SSE3 kernels at ~1/4 of the
// fp32 peak). The only fix is to set OPENBLAS_CORETYPE before the library loads, so
// ensure_blas_core re-executes the process with it set. Determinism needs one BLAS thread per
// process; ensure_blas_core sets that too unless the user asked otherwise.
#pragma once

#include <string>

namespace canzona::optim {

// The core name OpenBLAS runs (openblas_get_corename()), e.g. "Skylakex", "Haswell", "Prescott".
std::string blas_core_name();

// The OPENBLAS_CORETYPE this CPU should use ("SKYLAKEX" with AVX-512, "HASWELL" with AVX2 and
// FMA), or "" when the CPU has neither.
std::string recommended_blas_core();

// True when OpenBLAS runs a kernel older than recommended_blas_core() allows.
bool blas_core_misdetected();

// Sets OPENBLAS_CORETYPE=core (replacing any value) and a marker that stops a second re-exec,
// then execv("/proc/self/exe", argv). Returns only if exec fails (a warning is printed).
void reexec_with_blas_core(const std::string& core, char** argv);

// Call first thing in main. When the core is misdetected and OPENBLAS_CORETYPE is unset (and this
// process is not already a re-exec), re-executes with OPENBLAS_CORETYPE=recommended_blas_core()
// via reexec_with_blas_core. When it is still misdetected after that, or the user set
// OPENBLAS_CORETYPE to a weaker core (respected), prints one warning line naming the fix. Pins
// OpenBLAS to one thread unless OPENBLAS_NUM_THREADS is set.
void ensure_blas_core(int argc, char** argv);

// Number of threads OpenBLAS uses, and a setter (one thread per rank for bitwise results).
int blas_threads();
void set_blas_threads(int threads);

}  // namespace canzona::optim
