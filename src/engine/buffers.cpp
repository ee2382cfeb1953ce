#include "buffers.h"

#include "canzona/common/fnv.h"

namespace canzona::engine {

ParamBuffers::ParamBuffers(const model::ModelSpec& model, const layout::Layout& layout)
    : layout_(layout),
      place_(model.params.size()),
      params_(static_cast<std::size_t>(layout.numel), 0.0f),
      grads_(static_cast<std::size_t>(layout.numel), 0.0f) {
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
  for (const ParamPlace& at : place_)
    if (at.bucket >= 0 && at.numel > 0)
      fnv1a_mix(h, params_.data() + at.offset, static_cast<std::size_t>(at.numel) * sizeof(float));
  return h;
}

}  // namespace canzona::engine
