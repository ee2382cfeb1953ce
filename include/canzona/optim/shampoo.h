// Shampoo (Gupta et al. 2018) with Adam grafting (docs/references.md "Shampoo").
//
// Terms. G gradient (m x n), L (m x m) and R (n x n) the left and right statistics, beta2 their
// decay, f the preconditioning frequency, M the momentum of G, t the 1-based step. A side whose
// size exceeds max_precond_dim keeps no statistic and uses the identity. One step:
//   L <- beta2 L + (1 - beta2) G G^T;   R <- beta2 R + (1 - beta2) G^T G
//   M <- beta1 M + (1 - beta1) G
//   every f steps, starting at t = 1: L4 = (L + eps I)^(-1/4), R4 = (R + eps I)^(-1/4)
//   P = L4 M R4
//   grafting kAdam: V <- beta2_graft V + (1 - beta2_graft) G^2,
//                   A = (M / (1 - beta1^t)) / (sqrt(V / (1 - beta2_graft^t)) + graft_eps),
//                   D = P ||A||_F / ||P||_F     (Adam's step size, Shampoo's direction)
//   grafting kSgd:  D = P ||M||_F / ||P||_F;  kNone: D = P.   (D = 0 when ||P||_F = 0.)
//   W <- W (1 - lr wd) - lr D
//
// Precision. Statistics, momentum and the products are fp32 (ssyrk / sgemm). The inverse roots
// are computed in double (dsyevd + dsyrk) and rounded to fp32: the -1/4 power amplifies relative
// errors of small eigenvalues, which fp32 eigensolvers get wrong by ~n * 1e-7 * ||L||; the
// eigendecomposition runs once per f steps, so its cost is amortised. Negative eigenvalues
// (rounding noise of a PSD matrix) are clamped to 0 before eps is added.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canzona/optim/optimizer.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

enum class Grafting { kAdam, kSgd, kNone };
// "adam" | "sgd" | "none"; throws UsageError otherwise.
Grafting parse_grafting(const std::string& name);
const char* to_string(Grafting grafting);

struct ShampooOptions {
  double lr = 1e-3;                      // in Adam units when grafting to Adam
  double beta1 = 0.9;                    // momentum of G
  double beta2 = 0.999;                  // decay of the statistics L and R
  double eps = 1e-12;                    // added to the eigenvalues before the -1/4 power
  int precondition_frequency = 10;       // recompute the roots every f steps (f >= 1)
  std::int64_t max_precond_dim = 10000;  // sides above this use the identity
  double weight_decay = 0.0;             // decoupled
  Grafting grafting = Grafting::kAdam;
  double graft_beta2 = 0.999;  // Adam grafting's second-moment decay
  double graft_eps = 1e-8;     // Adam grafting's epsilon
};

class Shampoo : public Optimizer {
 public:
  // Throws UsageError for options out of range (betas outside [0, 1), eps <= 0, f < 1).
  Shampoo(ParamInfo param, ShampooOptions options);

  const char* name() const override { return "shampoo"; }
  std::size_t state_bytes() const override;
  std::vector<NamedState> state() override;
  const ShampooOptions& options() const { return options_; }
  bool left_preconditioned() const { return left_; }
  bool right_preconditioned() const { return right_; }

 protected:
  void update(MatrixView param, ConstMatrixView grad, std::int64_t step) override;

 private:
  ShampooOptions options_;
  bool left_ = false;      // rows <= max_precond_dim
  bool right_ = false;     // cols <= max_precond_dim
  std::vector<float> m_;   // M, (rows, cols)
  std::vector<float> v_;   // V, (rows, cols); empty unless grafting == kAdam
  std::vector<float> l_;   // L, (rows, rows), upper triangle valid
  std::vector<float> r_;   // R, (cols, cols), upper triangle valid
  std::vector<float> l4_;  // L^(-1/4), (rows, rows)
  std::vector<float> r4_;  // R^(-1/4), (cols, cols)
};

// Registry factory: JSON keys lr, beta1, beta2, eps, precondition_frequency, max_precond_dim,
// weight_decay, grafting ("adam" | "sgd" | "none"), graft_beta2, graft_eps.
std::unique_ptr<Optimizer> make_shampoo(const ParamInfo& param, const nlohmann::json& options,
                                        nlohmann::json* effective = nullptr);

// Registry entry, matrix kind. Cost formulas, per side s <= max_precond_dim (other side o,
// f = precondition_frequency):
//   flops:               12 rows cols (grafting Adam) + 4 s^2 o (statistic, applying the root)
//                        + 11 s^3 / f (eigh ~9 s^3 and forming the root ~2 s^3, amortised)
//   factorization_flops: 9 s^3 / f (the eigh share)
//   state_bytes:         8 rows cols (momentum, Adam v) + 8 s^2 (statistic and root)

}  // namespace canzona::optim
