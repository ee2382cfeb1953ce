// Megatron-style contiguous buffer of one pipeline stage (docs/references.md, "Megatron bucket
// rule").
//
// Terms. The *buffer* holds every param of the stage, TP-local shapes, in reverse registration
// order. Each param starts at a multiple of `param_align` elements (its *slot*; the gap before it
// is padding). The buffer is cut into *buckets*: a param is never split across buckets, and a
// bucket closes right after the param whose end makes it reach `bucket_size` elements; the
// bucket end is then padded to a multiple of lcm(DP, 128). Offsets are in elements.
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/common/parallel_dims.h"
#include "canzona/model/limits.h"
#include "canzona/model/spec.h"

namespace canzona::layout {

// Largest bucket size a caller may ask for: the largest model (model::kMaxModelNumel elements);
// a bigger bucket would only mean "one bucket" and invites overflow in offsets times rank counts.
inline constexpr std::int64_t kMaxBucketSize = model::kMaxModelNumel;
// Largest param alignment (elements); Megatron uses 64 (128-byte starts in bf16).
inline constexpr std::int64_t kMaxParamAlign = std::int64_t{1} << 20;

struct LayoutOptions {
  int dp = 1;                     // data-parallel degree (bucket padding and default size)
  int tp = 1;                     // tensor-parallel degree (local shapes)
  std::int64_t bucket_size = 0;   // elements; 0 = Megatron default max(40,000,000, 1,000,000 dp)
  std::int64_t param_align = 64;  // param starts are rounded up to this many elements
  bool pad_bucket_end = true;     // round bucket ends up to lcm(dp, 128)
  // ZeRO-3: bucket_size 0 means the elements of the largest transformer layer (TP-local), so a
  // bucket is about one layer, the unit ZeRO-3 gathers (FSDP wraps one block per unit); ZeRO-1
  // keeps Megatron's default.
  ZeroStage zero_stage = ZeroStage::kOne;
};

// One param inside a bucket.
struct Slot {
  int param = 0;            // index into ModelSpec::params
  std::int64_t offset = 0;  // first element, relative to the bucket start (aligned)
  std::int64_t numel = 0;   // TP-local element count
  std::int64_t end() const { return offset + numel; }
};

struct Bucket {
  std::int64_t offset = 0;  // first element of the bucket in the buffer
  std::int64_t numel = 0;   // padded size of the bucket
  std::vector<Slot> slots;  // buffer order (reverse registration order)
};

struct Layout {
  std::vector<Bucket> buckets;  // buffer order: bucket 0 holds the last-registered params
  std::int64_t numel = 0;       // whole buffer, padding included
};

// Resolved bucket size for the options (applies the Megatron default when bucket_size == 0).
std::int64_t effective_bucket_size(const LayoutOptions& options);
// The ZeRO-3 default: the largest sum of TP-local elements of one layer's params among `params`
// (at least 1).
std::int64_t layer_bucket_size(const model::ModelSpec& model, const std::vector<int>& params,
                               int tp);

// Lays out `params` (indices into model.params, in registration order; typically one pipeline
// stage). Throws UsageError when dp, tp or param_align is not positive, bucket_size is negative,
// bucket_size exceeds kMaxBucketSize, param_align exceeds kMaxParamAlign, or an offset, padding
// or size overflows int64 (each names what it was computing).
Layout build_layout(const model::ModelSpec& model, const std::vector<int>& params,
                    const LayoutOptions& options);

// The order inside a bucket is free (docs/design.md section 3): a bucket's collective starts when
// its last param's gradient is ready, wherever the params sit in it. Both functions keep every
// bucket's params and re-lay them; order[b] lists indices into layout.buckets[b].slots in their
// new buffer order (a permutation). Bucket offsets and the buffer size follow the new sizes.
//
// reorder_buckets: slots packed in that order with the options' param alignment and bucket end
// padding, as build_layout packs them.
Layout reorder_buckets(const Layout& layout, const std::vector<std::vector<int>>& order,
                       const LayoutOptions& options);

// Padded equal shards (Megatron-LM's layer-wise optimizer): bucket b is cut into dp regions of
// one size S; region[b][k] is the DP rank whose region holds slot k (original index), and a
// region's slots follow `order` from the region's start with the param alignment. S is the
// largest region's extent rounded up to a multiple of lcm(param_align, 128), so every region
// starts aligned and the bucket (dp x S) keeps Megatron's end padding rule. The shard cuts are
// r x S (equal_chunk_cuts).
Layout padded_shards(const Layout& layout, const std::vector<std::vector<int>>& order,
                     const std::vector<std::vector<int>>& region, const LayoutOptions& options);

}  // namespace canzona::layout
