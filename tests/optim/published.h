// Published coefficients and defaults of the optimizers, written by hand from their sources
// (docs/references.md and the papers / reference code it names), never read from the code under
// test. Tests compare the library's tables and option structs with these, and the plain-loop
// references run on them, so a changed constant in src/ or include/ fails a test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>

#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"

namespace canzona::optim::published {

// A Newton–Schulz step X <- a X + (b A + c A A) X with A = X X^T, in double.
struct Triple {
  double a, b, c;
};

// Keller Jordan's Muon (zeropower_via_newtonschulz5): one triple for every iteration.
inline constexpr Triple kSimple[] = {{3.4445, -4.7750, 2.0315}};

// The per-step tuned quintic set of docs/references.md "Muon": triple i for iteration i of five.
inline constexpr Triple kQuintic[] = {{4.0848, -6.8946, 2.9270},
                                      {3.9505, -6.3029, 2.6377},
                                      {3.7418, -5.5913, 2.3037},
                                      {2.8769, -3.1427, 1.2046},
                                      {2.8366, -3.0525, 1.2012}};

// Polar Express (Amsel et al. 2025), the 8-step table of docs/references.md "Muon".
inline constexpr Triple kPolarExpress[] = {{8.2051, -22.9019, 16.4607}, {4.0664, -2.8612, 0.5184},
                                           {3.9096, -2.8234, 0.5250},   {3.2856, -2.4153, 0.4853},
                                           {2.2779, -1.6198, 0.3985},   {1.8726, -1.2307, 0.3585},
                                           {1.8564, -1.2132, 0.3568},   {1.8750, -1.2500, 0.3750}};

inline std::span<const Triple> table(NsCoefficients set) {
  switch (set) {
    case NsCoefficients::kSimple:
      return kSimple;
    case NsCoefficients::kQuintic:
      return kQuintic;
    case NsCoefficients::kPolarExpress:
      return kPolarExpress;
  }
  return {};
}

// "Past the end of a set, repeat its last triple" (docs/references.md "Muon").
inline const Triple& triple(std::span<const Triple> set, int iteration) {
  const std::size_t i = static_cast<std::size_t>(iteration);
  return set[i < set.size() ? i : set.size() - 1];
}

// Muon (Keller Jordan's reference code: lr 0.02, momentum 0.95, Nesterov on, 5 Newton–Schulz
// steps of the simple triple, eps 1e-7 in the normalisation, no weight decay) with the
// Moonlight/Canzona update scale 0.2 sqrt(max(rows, cols)) of the full shape (docs/references.md).
inline constexpr double kMuonLr = 0.02;
inline constexpr double kMuonMomentum = 0.95;
inline constexpr bool kMuonNesterov = true;
inline constexpr NsCoefficients kMuonCoefficients = NsCoefficients::kSimple;
inline constexpr int kMuonNsSteps = 5;
inline constexpr double kMuonEps = 1e-7;
inline constexpr MuonScale kMuonScale = MuonScale::kSpectral;
inline constexpr double kMuonWeightDecay = 0.0;

// Every field set here, none left to the struct's defaults.
inline MuonOptions muon_options() {
  MuonOptions o;
  o.lr = kMuonLr;
  o.momentum = kMuonMomentum;
  o.nesterov = kMuonNesterov;
  o.ns.coefficients = kMuonCoefficients;
  o.ns.steps = kMuonNsSteps;
  o.ns.eps = kMuonEps;
  o.scale = kMuonScale;
  o.weight_decay = kMuonWeightDecay;
  return o;
}

// AdamW: PyTorch's torch.optim.AdamW defaults (Loshchilov & Hutter): lr 1e-3, betas (0.9, 0.999),
// eps 1e-8, weight_decay 1e-2.
inline AdamWOptions adamw_options() {
  AdamWOptions o;
  o.lr = 1e-3;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  o.weight_decay = 0.01;
  return o;
}

// Shampoo: docs/references.md fixes the algorithm (statistics GG^T / G^T G, roots L^(-1/4) and
// R^(-1/4), grafting to Adam or SGD, identity above max_precond_dim), not numbers; these are
// the values shampoo.h documents: Adam's betas (0.9, 0.999) and grafting Adam (eps 1e-8),
// eps 1e-12 on the eigenvalues (Distributed Shampoo's epsilon), and the SOAP settings of
// docs/references.md for the frequency (10) and max_precond_dim (10000).
inline ShampooOptions shampoo_options() {
  ShampooOptions o;
  o.lr = 1e-3;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-12;
  o.precondition_frequency = 10;
  o.max_precond_dim = 10000;
  o.weight_decay = 0.0;
  o.grafting = Grafting::kAdam;
  o.graft_beta2 = 0.999;
  o.graft_eps = 1e-8;
  return o;
}

// SOAP (Vyas et al. 2024, reference code soap.py): lr 3e-3, betas (0.95, 0.95), shampoo_beta
// = beta2 (0.95), eps 1e-8, weight_decay 0.01, precondition_frequency 10, max_precond_dim
// 10000, correct_bias on. docs/references.md "SOAP": eps 1e-8, frequency 10, max_precond_dim 10000.
inline SoapOptions soap_options() {
  SoapOptions o;
  o.lr = 3e-3;
  o.beta1 = 0.95;
  o.beta2 = 0.95;
  o.shampoo_beta = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.01;
  o.precondition_frequency = 10;
  o.max_precond_dim = 10000;
  o.correct_bias = true;
  return o;
}

// Field-by-field equality, one EXPECT per field so a failure names the field.
inline void expect_same(const MuonOptions& got, const MuonOptions& want) {
  EXPECT_EQ(got.lr, want.lr);
  EXPECT_EQ(got.momentum, want.momentum);
  EXPECT_EQ(got.nesterov, want.nesterov);
  EXPECT_EQ(got.ns.coefficients, want.ns.coefficients);
  EXPECT_EQ(got.ns.steps, want.ns.steps);
  EXPECT_EQ(got.ns.eps, want.ns.eps);
  EXPECT_EQ(got.scale, want.scale);
  EXPECT_EQ(got.weight_decay, want.weight_decay);
}

inline void expect_same(const AdamWOptions& got, const AdamWOptions& want) {
  EXPECT_EQ(got.lr, want.lr);
  EXPECT_EQ(got.beta1, want.beta1);
  EXPECT_EQ(got.beta2, want.beta2);
  EXPECT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.weight_decay, want.weight_decay);
}

inline void expect_same(const ShampooOptions& got, const ShampooOptions& want) {
  EXPECT_EQ(got.lr, want.lr);
  EXPECT_EQ(got.beta1, want.beta1);
  EXPECT_EQ(got.beta2, want.beta2);
  EXPECT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.precondition_frequency, want.precondition_frequency);
  EXPECT_EQ(got.max_precond_dim, want.max_precond_dim);
  EXPECT_EQ(got.weight_decay, want.weight_decay);
  EXPECT_EQ(got.grafting, want.grafting);
  EXPECT_EQ(got.graft_beta2, want.graft_beta2);
  EXPECT_EQ(got.graft_eps, want.graft_eps);
}

inline void expect_same(const SoapOptions& got, const SoapOptions& want) {
  EXPECT_EQ(got.lr, want.lr);
  EXPECT_EQ(got.beta1, want.beta1);
  EXPECT_EQ(got.beta2, want.beta2);
  EXPECT_EQ(got.shampoo_beta, want.shampoo_beta);
  EXPECT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.weight_decay, want.weight_decay);
  EXPECT_EQ(got.precondition_frequency, want.precondition_frequency);
  EXPECT_EQ(got.max_precond_dim, want.max_precond_dim);
  EXPECT_EQ(got.correct_bias, want.correct_bias);
}

}  // namespace canzona::optim::published
