// SOAP: Adam in Shampoo's eigenbasis (Vyas et al. 2024; docs/references.md "SOAP"), following the
// authors' reference implementation.
//
// Terms. G gradient (m x n); L (m x m), R (n x n) the statistics with decay shampoo_beta; Q_L, Q_R
// their eigenbases (identity for a side above max_precond_dim); M the first moment (original
// space); V the second moment (rotated space); s the Adam step number; f the preconditioning
// frequency. X' = Q_L^T X Q_R rotates into the eigenbasis, Q_L X Q_R^T rotates back.
//   Step 1 (s = 0): L, R <- (1 - shampoo_beta) G G^T, G^T G; Q_L, Q_R <- eigenvectors of L, R
//                   (eigh, descending eigenvalues). The parameter is not updated, so the
//                   projection never uses the gradient it projects (as the reference code).
//   Step t >= 2 (s = t - 1):
//     M <- beta1 M + (1 - beta1) G;    V <- beta2 V + (1 - beta2) (G')^2
//     N = Q_L (M' / (sqrt(V) + eps)) Q_R^T
//     alpha = lr sqrt(1 - beta2^s) / (1 - beta1^s)   (alpha = lr without bias correction)
//     W <- W (1 - lr wd) - alpha N
//     L, R <- shampoo_beta L + (1 - shampoo_beta) G G^T, G^T G
//     if s % f == 0, per side: sort Q's columns by the estimated eigenvalues diag(Q^T L Q)
//       (descending), permute V's rows (left) / columns (right) alike, then one power iteration
//       and QR: Q <- orth(L Q).
// Precision: fp32 state and BLAS products; eigh in double (rounded to fp32); QR in fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "canzona/optim/optimizer.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

struct SoapOptions {
  double lr = 3e-3;
  double beta1 = 0.95;
  double beta2 = 0.95;
  double shampoo_beta = 0.95;  // decay of L and R
  double eps = 1e-8;
  double weight_decay = 0.01;            // decoupled
  int precondition_frequency = 10;       // QR refresh of the eigenbases every f Adam steps
  std::int64_t max_precond_dim = 10000;  // sides above this use the identity
  bool correct_bias = true;
};

class Soap : public Optimizer {
 public:
  // Throws UsageError for options out of range (betas outside [0, 1), eps < 0, f < 1).
  Soap(ParamInfo param, SoapOptions options);

  const char* name() const override { return "soap"; }
  std::size_t state_bytes() const override;
  std::vector<NamedState> state() override;
  const SoapOptions& options() const { return options_; }

 protected:
  void update(MatrixView param, ConstMatrixView grad, std::int64_t step) override;

 private:
  void accumulate_statistics(ConstMatrixView grad, float decay);
  void refresh_basis(MatrixView stat, MatrixView q, bool left);

  SoapOptions options_;
  bool left_ = false;      // rows <= max_precond_dim
  bool right_ = false;     // cols <= max_precond_dim
  std::vector<float> m_;   // M, (rows, cols)
  std::vector<float> v_;   // V, (rows, cols), rotated space
  std::vector<float> l_;   // L, (rows, rows), upper triangle valid
  std::vector<float> r_;   // R, (cols, cols), upper triangle valid
  std::vector<float> ql_;  // Q_L, (rows, rows), eigenvectors as columns
  std::vector<float> qr_;  // Q_R, (cols, cols)
};

// Registry factory: JSON keys lr, beta1, beta2, shampoo_beta, eps, weight_decay,
// precondition_frequency, max_precond_dim, correct_bias.
std::unique_ptr<Optimizer> make_soap(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective = nullptr);

// Registry entry, matrix kind. Cost formulas, per side s <= max_precond_dim (other side o,
// f = precondition_frequency):
//   flops:               12 rows cols (Adam in the rotated space) + 8 s^2 o (statistic, three
//                        rotations) + (2 + 4/3) s^3 / f (power iteration and QR, amortised)
//   factorization_flops: 4/3 s^3 / f (the QR share)
//   state_bytes:         8 rows cols (Adam m, v) + 8 s^2 (statistic and eigenbasis)

}  // namespace canzona::optim
