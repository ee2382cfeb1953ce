// OpenBLAS kernel selection and threading.
//
// Debian's OpenBLAS 0.3.21 picks its kernels from CPUID when the library is loaded (before main).
// It can misdetect a CPU it does not know (AMD Zen 4 has been seen as "Prescott": SSE3 kernels at
// about a quarter of the fp32 peak), and some environments set OPENBLAS_CORETYPE on purpose
// because older builds compute wrong results or crash on such CPUs. The rule here:
//   * OPENBLAS_CORETYPE set by the user (or the machine's environment): respected, silently;
//   * nothing set and OpenBLAS picked a core of a lower capability class than the CPU supports:
//     the process re-executes itself once with OPENBLAS_CORETYPE=recommended_blas_core();
//   * otherwise OpenBLAS's own choice stands.
// Nothing is printed either way; the core in use and where it came from are reported where they
// matter (bench-kernels, the train header line, --json) through blas_core_report().
// Determinism needs one BLAS thread per process; ensure_blas_core sets that unless the user set
// OPENBLAS_NUM_THREADS.
#pragma once

#include <string>

namespace canzona::optim {

// The core name OpenBLAS runs (openblas_get_corename()), e.g. "Skylakex", "Haswell", "Prescott".
std::string blas_core_name();

// The OPENBLAS_CORETYPE that runs fastest on this CPU: "ZEN" on AMD family 19h (Zen 3 / Zen 4;
// Zen 4 splits 512-bit instructions into two 256-bit halves and its AVX2 kernels measure ~5%
// faster than the AVX-512 ones), "SKYLAKEX" on other CPUs with AVX-512 (F, BW, VL, DQ; Zen 5 runs
// 512-bit FMAs at full width), "ZEN" on other AMD CPUs with AVX2, "HASWELL" with AVX2 and FMA, or
// "" when the CPU has none of these.
std::string recommended_blas_core();

// Capability class of a core name (case-insensitive): 3 AVX-512 kernels (SkylakeX, Cooperlake,
// SapphireRapids), 2 AVX2/FMA (Haswell, Zen), 1 AVX (SandyBridge), 0 older or unknown.
int blas_core_class(const std::string& name);

// True when the running core is of a lower capability class than recommended_blas_core().
bool blas_core_weaker_than_cpu();

// Where the running core came from: "OPENBLAS_CORETYPE=<value>, set by the environment",
// "OPENBLAS_CORETYPE=<value>, set by canzona (OpenBLAS picked <core>)" after a re-exec, or
// "detected by OpenBLAS".
std::string blas_core_source();

// One line for reports: "<core> (<source>)", e.g. "Haswell (OPENBLAS_CORETYPE=Haswell, set by the
// environment)".
std::string blas_core_report();

// Sets OPENBLAS_CORETYPE=core (replacing any value) and a marker naming the detected core, then
// execv("/proc/self/exe", argv). Returns only if exec fails (the process then keeps its core).
void reexec_with_blas_core(const std::string& core, char** argv);

// Call first thing in main: applies the rule above. Prints nothing. Pins OpenBLAS to one thread
// unless OPENBLAS_NUM_THREADS is set.
void ensure_blas_core(int argc, char** argv);

// Number of threads OpenBLAS uses, and a setter (one thread per rank for bitwise results). Any
// program linking the optimizers starts with one thread unless OPENBLAS_NUM_THREADS is set.
int blas_threads();
void set_blas_threads(int threads);

}  // namespace canzona::optim
