// oneDNN's matmul, the library the bf16 products run on where the CPU has a bf16 matrix unit
// (internal to the optim layer; products.h is its one client, bf16_products.h reports it).
//
// Terms. A *matmul* here is C = A B with A m x k and B k x n in fp32 or bf16 and C m x n in fp32
// (oneDNN accumulates in fp32), all row-major with leading dimensions, B possibly given as the
// transpose of a row-major n x k matrix. Each shape (types, dims, leading dimensions,
// transposition) gets one oneDNN primitive, made once per thread and kept: oneDNN chooses its
// kernel and blocking from the shape, the ISA and the thread count alone, so the same shape gives
// the same bits on every call, rank and run with the same ISA and threads. The thread count is
// OpenBLAS's (blas_threads(), 1 per rank unless OPENBLAS_NUM_THREADS says otherwise), set around
// each call and restored, so the process's own OpenMP setting (torch's, in Python) is untouched.
#pragma once

#include <cstdint>
#include <string>

namespace canzona::optim::detail {

enum class MatmulType { kF32, kBF16 };

// Whether oneDNN makes a matmul of this operand type on this CPU (bf16: AVX512-BF16 or AMX; the
// oneDNN of Debian 12, 2.6.3, has no bf16 matmul below AVX-512). Probed once per process.
bool onednn_matmul_available(MatmulType type);
// "2.6.3": the oneDNN the process loaded.
std::string onednn_version();
// The ISA oneDNN dispatches to, e.g. "avx512_core_amx", "avx512_core_bf16", "avx2".
std::string onednn_isa();

// C = A B (see the file comment). a, b point at float (kF32) or canzona::bf16 (kBF16); c must not
// overlap them. Throws Error naming the shape when oneDNN fails (e.g. the type is not available).
void onednn_matmul(MatmulType type, const void* a, std::int64_t m, std::int64_t k, std::int64_t lda,
                   const void* b, std::int64_t n, std::int64_t ldb, bool b_transposed, float* c,
                   std::int64_t ldc);

}  // namespace canzona::optim::detail
