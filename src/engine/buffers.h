// The engine's param and gradient buffers: layout.numel elements each in the Megatron layout of
// the stage's TP-local shapes (layout.h), with each param's place in them. Like Megatron's
// _ParamAndGradBuffer they are keyed by (param dtype, grad dtype): fp32 and fp32, bf16 and bf16,
// or bf16 params with fp32 gradients (grad_reduce_in_fp32). Both are page buffers
// (page_buffer.h), so ZeRO-3 can give back a bucket's pages between uses and keep the addresses
// the model's tensors view.
#pragma once

#include <algorithm>
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

// Space for `size` elements viewed as either dtype a use needs (a collective's send or receive
// buffer that moves params at one time and gradients at another): sized for the widest dtype it
// will hold.
class ExchangeBuffer {
 public:
  void assign(std::int64_t size, std::int64_t widest_bytes) {
    size_ = size;
    bytes_.assign(static_cast<std::size_t>(size * widest_bytes), std::byte{0});
  }
  std::int64_t size() const { return size_; }
  TypedSpan as(DType dtype) {
    check(dtype);
    return {bytes_.data(), size_, dtype};
  }
  ConstTypedSpan as(DType dtype) const {
    check(dtype);
    return {bytes_.data(), size_, dtype};
  }

 private:
  void check(DType dtype) const;
  std::int64_t size_ = 0;
  std::vector<std::byte> bytes_;
};

// A growable buffer of elements of one dtype, chosen at each assign.
class TypedVector {
 public:
  void assign(std::int64_t size, DType dtype) {
    size_ = size;
    dtype_ = dtype;
    bytes_.assign(static_cast<std::size_t>(size * dtype_bytes(dtype)), std::byte{0});
  }
  void release() {
    std::vector<std::byte>().swap(bytes_);
    size_ = 0;
  }
  DType dtype() const { return dtype_; }
  TypedSpan span() { return {bytes_.data(), size_, dtype_}; }
  ConstTypedSpan span() const { return {bytes_.data(), size_, dtype_}; }
  TypedPtr ptr() { return span().ptr(); }
  ConstTypedPtr ptr() const { return span().ptr(); }

 private:
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
  std::vector<std::byte> bytes_;
};

class ParamBuffers {
 public:
  ParamBuffers(const model::ModelSpec& model, const layout::Layout& layout, DType param_dtype,
               DType grad_dtype);

  const layout::Layout& layout() const { return layout_; }
  const ParamPlace& place(int param) const { return place_.at(param); }
  int num_params() const { return static_cast<int>(place_.size()); }

  DType param_dtype() const { return params_.dtype(); }
  DType grad_dtype() const { return grads_.dtype(); }
  // Bytes per element of the wider of the two.
  std::int64_t widest_bytes() const {
    return std::max(dtype_bytes(param_dtype()), dtype_bytes(grad_dtype()));
  }

  // A param's elements in the param buffer and in the gradient buffer.
  TypedSpan param(int p) { return params_.span().subspan(place_[p].offset, place_[p].numel); }
  ConstTypedSpan param(int p) const {
    return params_.span().subspan(place_[p].offset, place_[p].numel);
  }
  TypedSpan grad(int p) { return grads_.span().subspan(place_[p].offset, place_[p].numel); }
  ConstTypedSpan grad(int p) const {
    return grads_.span().subspan(place_[p].offset, place_[p].numel);
  }

  TypedSpan params() { return params_.span(); }
  ConstTypedSpan params() const { return params_.span(); }
  ConstTypedSpan grads() const { return grads_.span(); }
  // Bucket b's span of each buffer.
  TypedSpan bucket_params(int b);
  TypedSpan bucket_grads(int b);

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
  PageBuffer params_;              // (layout.numel) of the param dtype
  PageBuffer grads_;               // (layout.numel) of the grad dtype
};

}  // namespace canzona::engine
