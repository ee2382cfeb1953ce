// Megatron-LM's layer-wise optimizer layout as its current code behaves (NVIDIA/Megatron-LM at
// d98e8a64dd, 2026-08-22: megatron/core/optimizer/layer_wise_optimizer.py,
// LayerWiseDistributedOptimizer._compute_per_buffer_param_layout, with the soft-minimum buckets of
// #5415; param_layout.py for the padding helpers; the buffer routing of #4771), re-expressed as a
// pure function so the plan it produces can be compared with ours. Written from reading that
// code; none of it is copied.
//
// Upstream puts the params Muon orthogonalises (2-D, not embedding or output layer, use_muon) in
// their own buffer with this layout, and every other param in a second buffer that the regular
// distributed optimizer lays out (fixed buckets, equal byte-level shards: layout::build_layout).
//
// Terms. Params are given in model (registration) order and walked in backprop order (reversed).
// A *chunk* is the run of params that becomes one bucket. A bucket is dp *shards* of one padded
// size S; a shard holds whole params, each starting at a multiple of 64 elements.
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/layout/layout.h"

namespace canzona::plan::megatron_layerwise {

struct Param {
  int param = 0;                    // index into ModelSpec::params (copied into the layout's slots)
  std::int64_t numel = 0;           // TP-local elements (param.data.nelement())
  std::vector<std::int64_t> shape;  // TP-local shape (param.data.shape)
  int remat_size = 1;             // GTP weight rematerialisation degree (is_gtp_weight_remat: > 1)
  bool shared_embedding = false;  // tied embedding under PP: a bucket of its own, in shard 0
};

// _ns_compute_cost: element count for a param that is not 2-D; max(M, N)·min(M, N)² otherwise,
// with M multiplied by remat_size (GTP shards along dim 0 and gathers the full matrix first).
double ns_compute_cost(const Param& p);

// _shard_divisor: lcm(64, bucket_end_divisor / dp), bucket_end_divisor = lcm(dp, 128) or, with
// pad_for_high_nccl_busbw, lcm(dp, 128, 2^16). dp x S then keeps the bucket-end rule and every
// shard starts 64-aligned.
std::int64_t shard_divisor(int dp, bool pad_for_high_nccl_busbw);

struct BufferLayout {
  layout::Layout layout;                // buckets in backprop order; slots by offset
  std::vector<std::vector<int>> shard;  // [bucket][slot] the DP shard (rank) holding the slot
};

// The layout of one buffer (all its params in `params`, model order), bucket_size elements the
// soft minimum (0 = one bucket, upstream's bucket_size None). Walking backprop order:
//  * a shared embedding closes the open chunk (emitted) and is emitted alone;
//  * otherwise, with a non-empty chunk, the chunk is emitted before the param when it holds at
//    least max(bucket_size, int(dp · its largest param · 0.9)) elements and the param cannot be
//    absorbed: an estimate that places every param, in walk order, 64-aligned on the shard with
//    the fewest elements (lowest index on ties) absorbs it when that shard's aligned end plus
//    the param stays within the most-loaded shard rounded up to the shard divisor.
// Emitting a chunk (_emit_bucket): params sorted by cost descending (stable); each goes to the
// shard with the lowest compute load (carried over the whole buffer; lowest index on ties) among
// those whose aligned end plus the param stays within 1.3 x the chunk's elements / dp, or, when
// none does, to the shard with the fewest elements in this bucket; shards keep that order. S is
// the largest shard's extent rounded up to the shard divisor. A shared embedding sits in shard 0
// and every other shard is padded by its size (no compute load added).
BufferLayout layerwise_buffer(const std::vector<Param>& params, std::int64_t bucket_size, int dp,
                              bool pad_for_high_nccl_busbw = false);

}  // namespace canzona::plan::megatron_layerwise
