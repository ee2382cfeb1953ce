// Muon: momentum orthogonalised by a Newton–Schulz iteration (docs/references.md "Muon").
//
// Terms. G is the gradient, B the momentum buffer (state), beta the momentum coefficient, U the
// matrix that is orthogonalised, X the Newton–Schulz iterate, s = min(rows, cols) and
// l = max(rows, cols). One step:
//   B <- lerp(B, G, 1 - beta) = B + (1 - beta) (G - B)
//   U <- lerp(G, B, beta) (Nesterov) or B
//   X <- NS(U): if rows > cols work on U^T; X = U / (||U||_F + eps); per iteration i with the
//        coefficient triple (a, b, c) = set[min(i, size - 1)]:  A = X X^T;  B' = b A + c A A;
//        X = a X + B' X. Undo the transpose.
//   W <- W (1 - lr wd) - lr scale X
// with scale = 0.2 sqrt(max(full_rows, full_cols)) (Moonlight/Canzona, of the *full* un-split
// shape) or sqrt(max(1, rows / cols)) (Keller Jordan).
//
// Two options change how NS runs, not what it approximates (docs/optimizers.md, "Newton–Schulz"):
//   * ns_dtype, the precision of the iteration's matrix products: fp32 (the default), or bf16,
//     where each product's operands are rounded to bf16 and summed in fp32, as torch's bf16
//     matmul does; the iterate between products, momentum, the update and the state stay fp32.
//   * ns_algorithm: standard (above), or gram (Dao-AILab's Gram Newton–Schulz): the iteration
//     runs on the s x s Gram matrix R = X X^T, accumulating the polynomial Q (s x s) with
//     X_t = Q_t X_0, and restarts (X <- Q X, R <- X X^T, Q <- I) at the iterations gram_restarts
//     names; the same polynomial of U in exact arithmetic, with s x s x l products only at the
//     start, at restarts and at the end. Used on a shape only where it saves FLOPs (uses_gram).
//
// Implementation. fp32 standard: every product an fp32 BLAS call on the wide orientation (s x l):
// A = X X^T by ssyrk (half the flops of a GEMM) mirrored to full, A A by ssyrk of the symmetric A,
// and a X + B' X as (a I + B') X by one sgemm. The other forms (src/optim/products.h): a product
// whose result is symmetric computes its upper triangle only (half the FLOPs); bf16 products run
// on oneDNN's bf16 matmul where this CPU has one (AMX or AVX512-BF16), else on OpenBLAS with the
// operands rounded to bf16 and widened: the same bf16 x bf16 products at the fp32 rate
// (bf16_products.h says which runs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canzona/optim/matrix.h"
#include "canzona/optim/optimizer.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

enum class NsCoefficients {
  kSimple,        // (3.4445, -4.7750, 2.0315) every iteration (Keller Jordan)
  kQuintic,       // 5 tuned triples, one per iteration
  kPolarExpress,  // 8 triples (Polar Express)
};

struct NsTriple {
  float a = 0.0f;
  float b = 0.0f;
  float c = 0.0f;
};

// The triples of a set (docs/references.md). Iteration i uses triple min(i, size - 1).
std::span<const NsTriple> ns_coefficients(NsCoefficients set);
// "simple" | "quintic" | "polar_express"; throws UsageError otherwise.
NsCoefficients parse_ns_coefficients(const std::string& name);
const char* to_string(NsCoefficients set);

// Precision of the iteration's products (JSON "ns_dtype").
enum class NsDtype {
  kF32,   // "fp32": fp32 operands. The default: the most accurate, the bits of every run made
          // before the option existed, and on a CPU without a bf16 matrix unit bf16 is no faster
  kBF16,  // "bf16": operands rounded to bf16 (nearest, ties to even), products summed in fp32
};
// "fp32" | "bf16"; throws UsageError otherwise.
NsDtype parse_ns_dtype(const std::string& name);
const char* to_string(NsDtype dtype);

// The iteration (JSON "ns_algorithm").
enum class NsAlgorithm {
  kStandard,  // "standard": products on X (s x l) every iteration (the default)
  kGram,      // "gram": on the Gram matrix X X^T with restarts, where uses_gram() says it gains
};
// "standard" | "gram"; throws UsageError otherwise.
NsAlgorithm parse_ns_algorithm(const std::string& name);
const char* to_string(NsAlgorithm algorithm);

struct NewtonSchulzOptions {
  NsCoefficients coefficients = NsCoefficients::kSimple;
  int steps = 5;      // iterations, >= 0 (0 returns the normalised input)
  double eps = 1e-7;  // added to ||U||_F before dividing
  NsDtype dtype = NsDtype::kF32;
  NsAlgorithm algorithm = NsAlgorithm::kStandard;
};

// The Gram iteration's restarts: the iterations i (1 <= i < steps) that begin with X <- Q X,
// R <- X X^T, Q <- I. Chosen as Dao-AILab's analysis prescribes (docs/optimizers.md): the scalar
// model of the iteration on one singular value x in [1e-10, 1] (2000 log-spaced points) whose
// Gram eigenvalue x^2 carries a spurious negative part -u (u the unit roundoff of the product
// operands: 2^-8 for bf16, 2^-24 for fp32) gives |Q| along the iteration; the fewest restarts (at
// least one from 3 iterations on) that keep u max |Q|, the rounding error Q carries into Q X, at
// most kGramMaxRoundingError, at the positions that minimise max |Q|. Empty when no such set
// exists (gram_stable() false). At fp16's u = 2^-11 the rule gives one restart, at iteration 2,
// for 5 simple or quintic iterations, and two (at 1 and 3) for bf16 (docs/optimizers.md compares
// it with the authors' own choice).
inline constexpr double kGramMaxRoundingError = 0.125;
std::vector<int> gram_restarts(const NewtonSchulzOptions& options);
// Whether the restart analysis found a stable set: false for more than kGramMaxSteps iterations
// (not searched), and for polar_express in bf16, whose first triple drives a perturbed
// eigenvalue past every restart set.
inline constexpr int kGramMaxSteps = 10;
bool gram_stable(const NewtonSchulzOptions& options);
// Whether newton_schulz runs the Gram iteration on a rows x cols matrix: algorithm gram, steps
// >= 1, gram_stable, and its executed FLOPs at most kGramMaxFlopRatio of the standard
// iteration's (at 5 simple iterations from about l >= 1.3 s on; square matrices stay standard).
inline constexpr double kGramMaxFlopRatio = 0.9;
bool uses_gram(std::int64_t rows, std::int64_t cols, const NewtonSchulzOptions& options);

// out = NS(u) as in the file comment; u and out are rows x cols and may be the same memory.
// Scratch memory from the per-thread arena (kept for reuse): 2 s l + 2 s^2 floats for the
// standard iteration, 2 s l + 5 s^2 for Gram, and on oneDNN also the bf16 operands (at most
// s l / 2 + 2 s^2 floats' worth) and a 128 x s result block. Throws UsageError on a shape mismatch
// or negative steps. The same inputs and options give the same bits on every call, rank and run
// with the same BLAS core, thread count and bf16 backend (docs/optimizers.md, "Determinism").
void newton_schulz(ConstMatrixView u, MatrixView out, const NewtonSchulzOptions& options);

// NS of several matrices of one shape: out[k] = NS(u[k]), each with the bits newton_schulz gives
// it alone, so how a rank groups its matrices never changes a result. One call per shape group;
// inside, each matrix runs the single-matrix code on the thread's scratch arena and, on oneDNN,
// the shape's kept primitives (oneDNN's batched matmul is not used: its blocking may depend on
// the batch count; docs/optimizers.md). u[k] and out[k] may be the same memory. Throws UsageError
// when the spans differ in length or a matrix differs in shape from the first.
void newton_schulz_batch(std::span<const ConstMatrixView> u, std::span<const MatrixView> out,
                         const NewtonSchulzOptions& options);

// FLOPs of the standard iteration as usually counted: steps * (4 s^2 l + 2 s^3).
double newton_schulz_flops(std::int64_t rows, std::int64_t cols, int steps);
// FLOPs the standard implementation executes: steps * (3 s^2 l + s^3) (one triangle of the
// symmetric X X^T and A A).
double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols, int steps);
// The same two for the iteration `options` runs on this shape (uses_gram). Gram: X X^T at the
// start and at each restart, Q X at each restart and at the end (s^2 l executed for X X^T, one
// triangle, 2 s^2 l for Q X; 2 s^2 l each as usually counted), and per iteration R R, Q Z (not
// right after a start), R Z and Z (R Z) (not before the last iteration or a restart): s^3 each
// executed (symmetric results, one triangle), 2 s^3 counted.
double newton_schulz_flops(std::int64_t rows, std::int64_t cols,
                           const NewtonSchulzOptions& options);
double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols,
                                    const NewtonSchulzOptions& options);

enum class MuonScale {
  kSpectral,  // 0.2 * sqrt(max(full_rows, full_cols)) (Moonlight; matches AdamW's RMS)
  kAspect,    // sqrt(max(1, rows / cols)) (Keller Jordan)
};
// "spectral" | "aspect"; throws UsageError otherwise.
MuonScale parse_muon_scale(const std::string& name);
const char* to_string(MuonScale scale);

struct MuonOptions {
  double lr = 0.02;        // learning rate
  double momentum = 0.95;  // beta
  bool nesterov = true;    // U = lerp(G, B, beta) when true, else U = B
  // JSON keys: "ns_coefficients", "ns_steps", "eps", "ns_dtype", "ns_algorithm"
  NewtonSchulzOptions ns;
  MuonScale scale = MuonScale::kSpectral;
  double weight_decay = 0.0;  // decoupled: W *= 1 - lr * weight_decay
};

class Muon : public Optimizer {
 public:
  // State: the momentum buffer, rows x cols, zero-initialised. Throws UsageError for options
  // out of range (momentum outside [0, 1), negative ns steps or eps).
  Muon(ParamInfo param, MuonOptions options);

  const char* name() const override { return "muon"; }
  std::size_t state_bytes() const override;
  std::vector<NamedState> state() override;
  const MuonOptions& options() const { return options_; }
  // The update scale this instance applies (see MuonScale).
  double update_scale() const;

 protected:
  void update(MatrixView param, ConstMatrixView grad, std::int64_t step) override;

 private:
  MuonOptions options_;
  std::vector<float> momentum_;  // B, (rows, cols) contiguous
};

// Registry factory: JSON keys lr, momentum, nesterov, ns_coefficients ("simple" | "quintic" |
// "polar_express"), ns_steps, eps, ns_dtype ("fp32" | "bf16"), ns_algorithm ("standard" |
// "gram"), scale ("spectral" | "aspect"), weight_decay.
std::unique_ptr<Optimizer> make_muon(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective = nullptr);

// Registry entry, matrix kind. Cost formulas:
//   flops:       newton_schulz_flops(rows, cols, ns): standard, ns_steps (4 l s^2 + 2 s^3), the
//                three GEMMs of each Newton-Schulz step as usually counted (the paper's model
//                drops the 2 s^3 of A A, which makes square matrices look 1.5x cheaper than they
//                run), or Gram's where uses_gram; the same at either ns_dtype; no factorizations
//   state_bytes: the momentum buffer, 4 rows cols

}  // namespace canzona::optim
