// The optimizer interface and its registry.
//
// Terms. An *optimizer instance* holds the state of one parameter tensor (its `ParamInfo`): a
// matrix optimizer (Muon, Shampoo, SOAP) needs the full matrix with its full gradient; an
// element-wise one (AdamW) can hold any contiguous slice, seen as a 1 x numel matrix. `step`
// applies one update in place. Instances are independent: the runtime creates one per owned task
// and calls them in any order, on any rank, with the same bits as a single-process run
// (docs/design.md section 5).
//
// Errors. Shape mismatches throw UsageError; a gradient with NaN or Inf throws Error naming the
// parameter, its shape and the first bad element, and leaves param and state untouched (the
// caller decides to skip the step or stop).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "canzona/optim/matrix.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

// The tensor an optimizer instance updates.
struct ParamInfo {
  std::string name;  // for messages, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  // Shape of the tensor this one is a piece of (e.g. q out of a fused QKV), for update scales
  // defined on the full shape (Muon's 0.2 * sqrt(max)). 0 means "same as rows/cols".
  std::int64_t full_rows = 0;
  std::int64_t full_cols = 0;

  std::int64_t numel() const { return rows * cols; }
  std::int64_t effective_full_rows() const { return full_rows > 0 ? full_rows : rows; }
  std::int64_t effective_full_cols() const { return full_cols > 0 ? full_cols : cols; }
  // "name (rows x cols)".
  std::string describe() const;
};

// One named state tensor of an optimizer instance (a view of its live buffer: writes change the
// state). rows x cols elements, row-major; a tensor that is not allocated (e.g. a factor of a side
// above max_precond_dim) is listed with 0 x 0 elements so every instance of an optimizer lists
// the same names. `row_axes` says which of its two dims are indexed by the param's rows (bit 0:
// dim 0, bit 1: dim 1), and bit 2 that only its upper triangle is kept (a symmetric matrix whose
// strictly lower triangle is never read), so a checkpoint can reorder the param's rows together
// with its state (an unsplit fc1 whose task rows follow the TP degree): a momentum has 1, a left
// statistic L accumulated by syrk 7, a full symmetric L^(-1/4) 3, eigenvectors of L as columns 1,
// anything in a rotated basis or on the column side 0.
struct NamedState {
  const char* name = "";
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::span<float> values;
  int row_axes = 0;
};

class Optimizer {
 public:
  // Throws UsageError when the shape is negative.
  explicit Optimizer(ParamInfo param);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One step: `param` and `grad` are param().rows x param().cols (any leading dimensions; they
  // must not overlap). Validates shapes and that `grad` is finite, then updates `param` in place
  // and advances the state. See the file comment for errors.
  void step(MatrixView param, ConstMatrixView grad);

  const ParamInfo& param() const { return param_; }
  // Steps taken so far (0 before the first).
  std::int64_t step_count() const { return step_count_; }
  // Restores the step count of a checkpoint (with state()): the next step() is step steps + 1.
  // Throws UsageError when negative.
  void set_step_count(std::int64_t steps);
  // The learning-rate schedule: every update uses lr x lr_scale() (the options' lr is the base,
  // Megatron's max lr). 1 until set; throws UsageError unless finite and >= 0.
  double lr_scale() const { return lr_scale_; }
  void set_lr_scale(double scale);
  // Every state tensor in a fixed order, PyTorch's names where one exists (AdamW "exp_avg",
  // "exp_avg_sq"; Muon "momentum_buffer"). Default: none (a stateless optimizer).
  virtual std::vector<NamedState> state() { return {}; }
  // Registry name, e.g. "muon".
  virtual const char* name() const = 0;
  // Bytes of optimizer state held (fp32 buffers and statistics).
  virtual std::size_t state_bytes() const = 0;

 protected:
  // The update proper; `step` is the 1-based number of this step. Shapes and finiteness are
  // already checked.
  virtual void update(MatrixView param, ConstMatrixView grad, std::int64_t step) = 0;
  // `options` with its lr multiplied by lr_scale() (every options struct has a double lr).
  template <class Options>
  Options scaled_lr(Options options) const {
    options.lr *= lr_scale_;
    return options;
  }

 private:
  ParamInfo param_;
  std::int64_t step_count_ = 0;
  double lr_scale_ = 1.0;
};

// Builds an optimizer for `param` from JSON options (an object whose keys are the fields of the
// optimizer's options struct, e.g. {"lr": 0.02, "ns_steps": 5}; missing keys keep the documented
// defaults). Throws UsageError for an unknown name (listing the known ones) or an unknown or
// mistyped option key.
// When `effective` is not null it receives every option with its final value (given or default).
using OptimizerFactory = std::unique_ptr<Optimizer> (*)(const ParamInfo& param,
                                                        const nlohmann::json& options,
                                                        nlohmann::json* effective);

// Registry lookup (registry.h): "muon", "shampoo", "soap", "adamw" and any registered at run time.
std::unique_ptr<Optimizer> create_optimizer(
    const std::string& name, const ParamInfo& param,
    const nlohmann::json& options = nlohmann::json::object());
// effective_options(name, options) and optimizer_names() are in optimizer_spec.h.

}  // namespace canzona::optim
