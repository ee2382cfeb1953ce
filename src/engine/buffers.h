// The engine's fp32 param and gradient buffers: layout.numel elements each in the Megatron layout
// of the stage's TP-local shapes (layout.h), with each param's place in them. Both are page
// buffers (page_buffer.h), so ZeRO-3 can give back a bucket's pages between uses and keep the
// addresses the model's tensors view.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "canzona/layout/layout.h"
#include "canzona/model/spec.h"
#include "page_buffer.h"

namespace canzona::engine {

// Where a param lives in the buffers (TP-local elements); bucket -1 when not in the stage.
struct ParamPlace {
  int bucket = -1;
  std::int64_t offset = 0;       // first element in the buffer
  std::int64_t slot_offset = 0;  // first element relative to its bucket
  std::int64_t numel = 0;
};

class ParamBuffers {
 public:
  ParamBuffers(const model::ModelSpec& model, const layout::Layout& layout);

  const layout::Layout& layout() const { return layout_; }
  const ParamPlace& place(int param) const { return place_.at(param); }
  int num_params() const { return static_cast<int>(place_.size()); }

  // A param's first element in the param buffer and in the gradient buffer.
  float* param(int p) { return params_.data() + place_[p].offset; }
  const float* param(int p) const { return params_.data() + place_[p].offset; }
  float* grad(int p) { return grads_.data() + place_[p].offset; }
  const float* grad(int p) const { return grads_.data() + place_[p].offset; }

  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<const float> grads() const { return grads_; }
  // Bucket b's span of each buffer.
  std::span<float> bucket_params(int b);
  std::span<float> bucket_grads(int b);

  // FNV-1a of the params in model param order, padding excluded (Engine::params_fnv).
  std::uint64_t params_fnv() const;
  // Folds param p's values into a running FNV-1a (params_fnv, one param at a time).
  void mix_param(std::uint64_t& h, int p) const;

  // Gives back bucket b's param elements outside [keep_begin, keep_end) (bucket-relative); they
  // read as zeros until written again. Returns the bytes given back.
  std::int64_t release_params(int b, std::int64_t keep_begin, std::int64_t keep_end);
  // Gives back bucket b's gradients (they read as zeros: the next step's zeroed gradient).
  std::int64_t release_grads(int b);
  // Resident bytes of each buffer now (PageBuffer::resident_bytes).
  std::int64_t resident_param_bytes() const { return params_.resident_bytes(); }
  std::int64_t resident_grad_bytes() const { return grads_.resident_bytes(); }
  // Zeroes the whole gradient buffer: in place, or by giving its pages back.
  void zero_grads(bool give_back);

 private:
  const layout::Layout& layout_;
  std::vector<ParamPlace> place_;  // [model param]
  PageBuffer params_;              // (layout.numel)
  PageBuffer grads_;               // (layout.numel)
};

}  // namespace canzona::engine
