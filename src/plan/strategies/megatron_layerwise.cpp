// Megatron-LM's layer-wise layout (megatron_layerwise.h).
#include "strategies/megatron_layerwise.h"

#include <algorithm>
#include <numeric>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"

namespace canzona::plan::megatron_layerwise {
namespace {

constexpr std::int64_t kParamAlign = 64;  // pad_param_start
constexpr double kPaddingFloor = 0.9;     // soft minimum of a bucket dominated by one param
constexpr double kNumelCap = 1 + 0.3;     // a shard's elements within this x the bucket mean

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  const char* what = "megatron layer-wise layout: padding";
  return checked_mul(checked_add(value, multiple - 1, what) / multiple, multiple, what);
}

std::int64_t aligned(std::int64_t cursor) {
  return round_up(cursor, kParamAlign);
}

// First index of the smallest value (Python's min over range(n) with a key).
template <typename T>
int first_min(const std::vector<T>& v) {
  return static_cast<int>(std::min_element(v.begin(), v.end()) - v.begin());
}

class Builder {
 public:
  Builder(int dp, std::int64_t divisor) : dp_(dp), divisor_(divisor), compute_(dp, 0.0) {}

  void emit(const std::vector<const Param*>& chunk, bool shared_embedding) {
    if (chunk.empty()) return;
    std::vector<std::vector<const Param*>> shards(dp_);
    std::vector<std::int64_t> cursor(dp_, 0);
    if (shared_embedding) {
      CANZONA_CHECK(chunk.size() == 1, "a shared embedding is a bucket of its own");
      shards[0].push_back(chunk[0]);
      std::fill(cursor.begin(), cursor.end(), chunk[0]->numel);  // others: padding of its size
    } else {
      std::vector<const Param*> sorted = chunk;
      std::stable_sort(sorted.begin(), sorted.end(), [](const Param* a, const Param* b) {
        return ns_compute_cost(*a) > ns_compute_cost(*b);
      });
      double total = 0.0;
      for (const Param* p : chunk) total += static_cast<double>(p->numel);
      const double cap = total / dp_ * kNumelCap;
      for (const Param* p : sorted) {
        int best = -1;
        for (int s = 0; s < dp_; ++s) {
          if (static_cast<double>(aligned(cursor[s]) + p->numel) > cap) continue;
          if (best < 0 || compute_[s] < compute_[best]) best = s;
        }
        if (best < 0) best = first_min(cursor);
        shards[best].push_back(p);
        cursor[best] = checked_add(aligned(cursor[best]), p->numel, "layer-wise shard size");
        compute_[best] += ns_compute_cost(*p);
      }
    }
    const std::int64_t shard_size =
        round_up(*std::max_element(cursor.begin(), cursor.end()), divisor_);
    layout::Bucket bucket;
    bucket.offset = out_.layout.numel;
    bucket.numel = checked_mul(shard_size, std::int64_t{dp_}, "layer-wise bucket size");
    std::vector<int> owner;
    for (int s = 0; s < dp_; ++s) {
      std::int64_t at = std::int64_t{s} * shard_size;
      for (const Param* p : shards[s]) {
        at = aligned(at);
        bucket.slots.push_back(layout::Slot{p->param, at, p->numel});
        owner.push_back(s);
        at += p->numel;
      }
    }
    out_.layout.numel = checked_add(out_.layout.numel, bucket.numel, "layer-wise buffer size");
    out_.layout.buckets.push_back(std::move(bucket));
    out_.shard.push_back(std::move(owner));
  }

  BufferLayout take() { return std::move(out_); }

 private:
  int dp_;
  std::int64_t divisor_;
  std::vector<double> compute_;  // NS cost per shard, carried across the buffer's buckets
  BufferLayout out_;
};

}  // namespace

double ns_compute_cost(const Param& p) {
  if (p.shape.size() != 2) return static_cast<double>(p.numel);
  const double m = static_cast<double>(p.shape[0]) * p.remat_size;
  const double n = static_cast<double>(p.shape[1]);
  const double big = std::max(m, n), small = std::min(m, n);
  return big * small * small;
}

std::int64_t shard_divisor(int dp, bool pad_for_high_nccl_busbw) {
  CANZONA_CHECK(dp > 0);
  std::int64_t bucket_divisor = std::lcm<std::int64_t>(dp, 128);
  if (pad_for_high_nccl_busbw) bucket_divisor = std::lcm<std::int64_t>(bucket_divisor, 1 << 16);
  return std::lcm<std::int64_t>(kParamAlign, bucket_divisor / dp);
}

BufferLayout layerwise_buffer(const std::vector<Param>& params, std::int64_t bucket_size, int dp,
                              bool pad_for_high_nccl_busbw) {
  CANZONA_CHECK(dp > 0 && bucket_size >= 0);
  const std::int64_t divisor = shard_divisor(dp, pad_for_high_nccl_busbw);
  Builder builder(dp, divisor);
  std::vector<const Param*> chunk;
  std::int64_t chunk_numel = 0, chunk_max = 0;
  std::vector<std::int64_t> estimate(dp, 0);  // walk-order placement by elements
  auto reset = [&] {
    chunk.clear();
    chunk_numel = chunk_max = 0;
    std::fill(estimate.begin(), estimate.end(), 0);
  };
  auto absorbs = [&](std::int64_t numel) {
    const std::int64_t target =
        round_up(*std::max_element(estimate.begin(), estimate.end()), divisor);
    return aligned(*std::min_element(estimate.begin(), estimate.end())) + numel <= target;
  };
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Param& p = *it;
    if (p.shared_embedding) {
      builder.emit(chunk, false);
      reset();
      builder.emit({&p}, true);
      continue;
    }
    if (bucket_size > 0 && !chunk.empty()) {
      const double floor =
          static_cast<double>(checked_mul(std::int64_t{dp}, chunk_max, "layer-wise threshold")) *
          kPaddingFloor;
      const std::int64_t threshold = std::max(bucket_size, static_cast<std::int64_t>(floor));
      if (chunk_numel >= threshold && !absorbs(p.numel)) {
        builder.emit(chunk, false);
        reset();
      }
    }
    const int s = first_min(estimate);
    estimate[s] = checked_add(aligned(estimate[s]), p.numel, "layer-wise shard estimate");
    chunk.push_back(&p);
    chunk_numel = checked_add(chunk_numel, p.numel, "layer-wise chunk size");
    chunk_max = std::max(chunk_max, p.numel);
  }
  builder.emit(chunk, false);
  return builder.take();
}

}  // namespace canzona::plan::megatron_layerwise
