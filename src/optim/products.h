// The matrix products of the Newton–Schulz iteration at a chosen precision (internal to the optim
// layer; newton_schulz.cpp and kernel_bench.cpp use it).
//
// Terms. A *path* is how a product runs: fp32 on OpenBLAS; bf16 on oneDNN (operands stored as
// bf16, oneDNN's bf16 matmul summing in fp32); bf16 *widened* (operands rounded to bf16 and kept
// as fp32 values, OpenBLAS summing in fp32: the same products as bf16 x bf16 with fp32 sums, at
// the fp32 rate, for CPUs without a bf16 matmul); and oneDNN on fp32 operands, which runs the
// oneDNN code path on any CPU (the tests use it where bf16 is not available). An *operand* is a
// matrix in its path's storage, made from an fp32 matrix by make_operand (rounded once, used by
// several products). Every output is fp32. A product whose result is symmetric (X X^T, A A of a
// symmetric A, and A B of commuting symmetric A and B) computes only its upper triangle, in row
// panels of kPanelRows (OpenBLAS's ssyrk where the product is X X^T): about half the FLOPs; the
// caller mirrors it. The same shapes give the same calls, hence the same bits, every time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "canzona/optim/matrix.h"
#include "canzona/optim/muon.h"

namespace canzona::optim::detail {

enum class ProductPath { kF32, kWidened, kOneDnn, kOneDnnF32 };

// The path of ns_dtype: kF32 for fp32; for bf16 kOneDnn where oneDNN has a bf16 matmul on this
// CPU, else kWidened.
ProductPath product_path(NsDtype dtype);
const char* to_string(ProductPath path);

// Row height of the panels of an upper-triangle product (a panel's columns start at its first
// row): 8 panels of a 1024 x 1024 result compute 56% of a full GEMM's FLOPs.
inline constexpr std::int64_t kPanelRows = 128;

// A rows x cols matrix in a path's storage: float (kF32, kWidened, kOneDnnF32) or canzona::bf16
// (kOneDnn), row-major with leading dimension ld.
struct Operand {
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;
};

// Bytes make_operand needs for a rows x cols operand: 0 where the operand is the fp32 matrix
// itself (kF32, kOneDnnF32), 4 rows cols (kWidened) or 2 rows cols (kOneDnn).
std::size_t operand_bytes(ProductPath path, std::int64_t rows, std::int64_t cols);
// `src` as an operand: a view of it (kF32, kOneDnnF32: src must outlive the operand and not
// change while it is used), or its values rounded to bf16 (nearest, ties to even) in `storage`
// (operand_bytes(path, ...) bytes, 64-byte aligned).
Operand make_operand(ProductPath path, ConstMatrixView src, void* storage);

// Rounds m in place to the path's operand precision (bf16 for kWidened and kOneDnn; nothing for
// the fp32 paths). The iterations round a matrix once this way before it enters a product and use
// the rounded values in every term, as torch's bf16 iteration does (a X + B' X with one X).
void round_in_place(ProductPath path, MatrixView m);
// Bytes rounded_operand needs: 2 rows cols on kOneDnn (the bf16 copy), 0 elsewhere (a view).
std::size_t rounded_operand_bytes(ProductPath path, std::int64_t rows, std::int64_t cols);
// An operand of m whose values round_in_place already rounded: a view (fp32 and widened paths) or
// its bf16 bits in `storage` (kOneDnn, operand_bytes bytes; the cast is exact).
Operand rounded_operand(ProductPath path, ConstMatrixView m, void* storage);

// Upper triangle (diagonal included) of X X^T into c (x.rows x x.rows). Below the diagonal only
// the diagonal blocks of the row panels may be written (garbage to the caller, who mirrors); the
// rest of the lower triangle is left as it was.
void gram_upper(ProductPath path, const Operand& x, MatrixView c);
// Upper triangle of A A for a square A that is exactly symmetric (A A = A A^T); below the
// diagonal as gram_upper.
void square_upper(ProductPath path, const Operand& a, MatrixView c);
// Upper triangle of A B, for symmetric A and B whose product is symmetric (they commute, as
// polynomials in one symmetric matrix do); below the diagonal as gram_upper.
void product_upper(ProductPath path, const Operand& a, const Operand& b, MatrixView c);
// C = A B (a.rows x b.cols). c must not overlap the operands' storage.
void product(ProductPath path, const Operand& a, const Operand& b, MatrixView c);

// newton_schulz (muon.h) on the products of `path` whatever options.dtype says (newton_schulz
// itself takes product_path(options.dtype)); the tests run the oneDNN code path through it on
// CPUs without a bf16 matmul.
void newton_schulz_on(ProductPath path, ConstMatrixView u, MatrixView out,
                      const NewtonSchulzOptions& options);

}  // namespace canzona::optim::detail
