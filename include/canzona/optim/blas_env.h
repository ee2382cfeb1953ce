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

// The OPENBLAS_CORETYPE that runs fastest on this CPU: "ZEN" on AMD family 19h (Zen 4 splits
// 512-bit instructions into two 256-bit halves; its AVX2 kernels measure ~5% faster than the
// AVX-512 ones) and on other AMD CPUs with AVX2, "SKYLAKEX" on other CPUs with AVX-512 (F, BW, VL,
// DQ), "HASWELL" with AVX2 and FMA, or "" when the CPU has none of these.
std::string recommended_blas_core();

// True when OpenBLAS runs another core than recommended_blas_core() (compared case-insensitively
// with openblas_get_corename(): "Zen", "SkylakeX", ...).
bool blas_core_misdetected();

// Sets OPENBLAS_CORETYPE=core (replacing any value) and a marker that stops a second re-exec,
// then execv("/proc/self/exe", argv). Returns only if exec fails (a warning is printed).
void reexec_with_blas_core(const std::string& core, char** argv);

// Call first thing in main. When the core is not the recommended one and OPENBLAS_CORETYPE is
// unset (and this process is not already a re-exec), re-executes with
// OPENBLAS_CORETYPE=recommended_blas_core() via reexec_with_blas_core. A core the user set is
// respected; when it (or the result of a failed re-exec) is of a lower capability class than the
// recommended one (e.g. Prescott's SSE3 on an AVX2 CPU), prints one warning line naming the fix.
// Pins OpenBLAS to one thread unless OPENBLAS_NUM_THREADS is set.
void ensure_blas_core(int argc, char** argv);

// Number of threads OpenBLAS uses, and a setter (one thread per rank for bitwise results). Any
// program linking the optimizers starts with one thread unless OPENBLAS_NUM_THREADS is set.
int blas_threads();
void set_blas_threads(int threads);

}  // namespace canzona::optim
