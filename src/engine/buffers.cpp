#include "buffers.h"

#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/common/fnv.h"

namespace canzona::engine {

void ExchangeBuffer::check(DType dtype) const {
  CANZONA_CHECK(static_cast<std::int64_t>(bytes_.size()) >= size_ * dtype_bytes(dtype),
                "exchange buffer of ", bytes_.size(), " bytes viewed as ", size_, " ",
                to_string(dtype), " elements");
}

ParamBuffers::ParamBuffers(const model::ModelSpec& model, const layout::Layout& layout,
                           DType param_dtype, DType grad_dtype)
    : layout_(layout),
      place_(model.params.size()),
      params_(layout.numel, param_dtype),
      grads_(layout.numel, grad_dtype) {
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = layout.buckets[b];
    for (const layout::Slot& slot : bucket.slots)
      place_[slot.param] = {static_cast<int>(b), bucket.offset + slot.offset, slot.offset,
                            slot.numel};
  }
}

TypedSpan ParamBuffers::bucket_params(int b) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return params_.span().subspan(bucket.offset, bucket.numel);
}

TypedSpan ParamBuffers::bucket_grads(int b) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return grads_.span().subspan(bucket.offset, bucket.numel);
}

std::uint64_t ParamBuffers::params_fnv() const {
  std::uint64_t h = kFnvOffset;
  for (int p = 0; p < num_params(); ++p) mix_param(h, p);
  return h;
}

void ParamBuffers::mix_param(std::uint64_t& h, int p) const {
  const ParamPlace& at = place_[p];
  if (at.bucket >= 0 && at.numel > 0) {
    const ConstTypedSpan values = param(p);
    fnv1a_mix(h, values.data(), static_cast<std::size_t>(values.size_bytes()));
  }
}

std::int64_t ParamBuffers::release_params(int b, std::int64_t keep_begin, std::int64_t keep_end) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return params_.release(bucket.offset, bucket.offset + keep_begin) +
         params_.release(bucket.offset + keep_end, bucket.offset + bucket.numel);
}

std::int64_t ParamBuffers::release_grads(int b) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return grads_.release(bucket.offset, bucket.offset + bucket.numel);
}

void ParamBuffers::zero_grads(bool give_back) {
  if (give_back) {
    grads_.release(0, grads_.size());
    return;
  }
  const TypedSpan all = grads_.span();
  std::fill(all.data(), all.data() + all.size_bytes(), std::byte{0});
}

}  // namespace canzona::engine
