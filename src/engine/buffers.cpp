#include "buffers.h"

#include <algorithm>

#include "canzona/common/fnv.h"

namespace canzona::engine {

ParamBuffers::ParamBuffers(const model::ModelSpec& model, const layout::Layout& layout)
    : layout_(layout), place_(model.params.size()), params_(layout.numel), grads_(layout.numel) {
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = layout.buckets[b];
    for (const layout::Slot& slot : bucket.slots)
      place_[slot.param] = {static_cast<int>(b), bucket.offset + slot.offset, slot.offset,
                            slot.numel};
  }
}

std::span<float> ParamBuffers::bucket_params(int b) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return {params_.data() + bucket.offset, static_cast<std::size_t>(bucket.numel)};
}

std::span<float> ParamBuffers::bucket_grads(int b) {
  const layout::Bucket& bucket = layout_.buckets[b];
  return {grads_.data() + bucket.offset, static_cast<std::size_t>(bucket.numel)};
}

std::uint64_t ParamBuffers::params_fnv() const {
  std::uint64_t h = kFnvOffset;
  for (int p = 0; p < num_params(); ++p) mix_param(h, p);
  return h;
}

void ParamBuffers::mix_param(std::uint64_t& h, int p) const {
  const ParamPlace& at = place_[p];
  if (at.bucket >= 0 && at.numel > 0)
    fnv1a_mix(h, params_.data() + at.offset, static_cast<std::size_t>(at.numel) * sizeof(float));
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
  std::fill(grads_.data(), grads_.data() + grads_.size(), 0.0f);
}

}  // namespace canzona::engine
