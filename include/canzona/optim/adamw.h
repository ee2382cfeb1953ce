// AdamW (Loshchilov & Hutter), element-wise, valid on any contiguous slice of a tensor.
//
// Terms. g gradient, m and v the first and second moments (state, one per element), t the 1-based
// step number, beta1/beta2 the moment coefficients. Per element:
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   w <- w (1 - lr wd) - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// (the PyTorch AdamW arithmetic). Every element's result depends only on its own g, m, v, w and
// on t, so updating a tensor in any number of slices gives the same bits as updating it whole:
// a divided ZeRO shard runs AdamW on its slice alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "canzona/optim/optimizer.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled
};

// One AdamW step on a slice: param, grad, m and v have the same length; `step` is the 1-based
// step number t (the same for every slice of a tensor). No allocation. Throws UsageError on a
// length mismatch or step < 1. Does not check finiteness (AdamW::step_slice does).
void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m,
                  std::span<float> v, std::int64_t step, const AdamWOptions& options);

class AdamW : public Optimizer {
 public:
  // State m, v for param.numel() elements (a slice is a 1 x n ParamInfo). Throws UsageError for
  // betas outside [0, 1) or eps < 0.
  AdamW(ParamInfo param, AdamWOptions options);

  // Updates a flat slice of param().numel() elements with the caller's step number (1-based), so
  // shards of one tensor stay in lockstep without sharing a counter. Throws Error naming the
  // param on a non-finite gradient (nothing changed), UsageError on a length mismatch.
  void step_slice(std::span<float> param, std::span<const float> grad, std::int64_t step);

  const char* name() const override { return "adamw"; }
  std::size_t state_bytes() const override;
  std::vector<NamedState> state() override;
  const AdamWOptions& options() const { return options_; }

 protected:
  void update(MatrixView param, ConstMatrixView grad, std::int64_t step) override;

 private:
  AdamWOptions options_;
  std::vector<float> m_;  // (numel)
  std::vector<float> v_;  // (numel)
};

// Registry factory: JSON keys lr, beta1, beta2, eps, weight_decay.
std::unique_ptr<Optimizer> make_adamw(const ParamInfo& param, const nlohmann::json& options,
                                      nlohmann::json* effective = nullptr);

// FLOPs of one AdamW element update as the cost model counts them: m and v lerps, bias
// correction, sqrt, divide, weight decay. Shampoo's grafting and SOAP's rotated Adam reuse it.
inline constexpr double kAdamFlopsPerElement = 12.0;

// Registry entry, element-wise kind. Cost formulas for n = rows cols elements:
//   flops: kAdamFlopsPerElement n;  state_bytes: m and v, 8 n;  no factorizations.

}  // namespace canzona::optim
