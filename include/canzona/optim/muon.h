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
// Implementation. All products are fp32 BLAS calls on the wide orientation (s x l): A = X X^T by
// ssyrk (half the flops of a GEMM) mirrored to full, A A by sgemm, and a X + B' X as
// (a I + B') X by one sgemm, so the iteration runs at the GEMM rate with no per-step copies of X.
// FLOPs per iteration as usually counted: 4 s^2 l + 2 s^3 (ssyrk does s^2 l of the first 2 s^2 l).
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

struct NewtonSchulzOptions {
  NsCoefficients coefficients = NsCoefficients::kSimple;
  int steps = 5;      // iterations, >= 0 (0 returns the normalised input)
  double eps = 1e-7;  // added to ||U||_F before dividing
};

// out = NS(u) as in the file comment; u and out are rows x cols and may be the same memory.
// Scratch memory: 2 s l + 2 s^2 floats from the per-thread arena (kept for reuse). Throws
// UsageError on a shape mismatch or negative steps.
void newton_schulz(ConstMatrixView u, MatrixView out, const NewtonSchulzOptions& options);

// FLOPs of newton_schulz as usually counted: steps * (4 s^2 l + 2 s^3).
double newton_schulz_flops(std::int64_t rows, std::int64_t cols, int steps);
// FLOPs this implementation executes: steps * (3 s^2 l + s^3) (ssyrk computes one triangle of
// X X^T and of A A).
double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols, int steps);

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
  NewtonSchulzOptions ns;  // JSON keys: "ns_coefficients", "ns_steps", "eps"
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
// "polar_express"), ns_steps, eps, scale ("spectral" | "aspect"), weight_decay.
std::unique_ptr<Optimizer> make_muon(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective = nullptr);

// Registry entry, matrix kind. Cost formulas:
//   flops:       ns_steps (4 l s^2 + 2 s^3): the three GEMMs of each Newton-Schulz step as
//                usually counted (the paper's model drops the 2 s^3 of A A, which makes square
//                matrices look 1.5x cheaper than they run); no factorizations
//   state_bytes: the momentum buffer, 4 rows cols

}  // namespace canzona::optim
