// OpenBLAS kernel selection (design.md section 6). Debian's OpenBLAS 0.3.21 detects AMD Zen 4 as
// "Prescott" and runs SSE3 kernels at ~1/4 of the machine's fp32 peak. OpenBLAS chooses its
// kernels when the library is loaded (before main), so the fix is to re-execute the process with
// OPENBLAS_CORETYPE set to the core the CPU can run.
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

// Call first thing in main. When the core is misdetected and OPENBLAS_CORETYPE is unset, sets it
// and re-executes /proc/self/exe with the same argv (returns only if exec fails). When it is still
// misdetected after that (or OPENBLAS_CORETYPE was set to a weaker core by the user), prints one
// warning line naming the fix. Also pins OpenBLAS to one thread unless OPENBLAS_NUM_THREADS is set.
void ensure_blas_core(int argc, char** argv);

}  // namespace canzona::optim
