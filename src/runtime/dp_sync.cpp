// The DP gradient sync of the engine (engine_core.h): one collective per bucket, posted when its
// last param is ready, after the bucket is scaled by 1/DP (Megatron's gradient_scaling_factor).
//   All-Reduce      (sc, layerwise-paper): every rank ends with the whole reduced bucket, in place.
//   Reduce-Scatter  (asc, lb-asc, layerwise): variable counts from the plan's cuts
//                   (plan::BucketShards); rank r receives the reduced elements
//                   [cuts[r], cuts[r + 1]) of each bucket into its shard buffer.
#include "canzona/common/error.h"
#include "engine_core.h"

namespace canzona::runtime {

float grad_scale(int dp) {
  return 1.0f / static_cast<float>(dp);
}
namespace {

// Shared by both: scaling, the per-bucket Pending list, progress and waits.
class BucketSync : public DpGradSync {
 public:
  explicit BucketSync(Engine::Core& core)
      : core_(core), pending_(core.stage.layout.buckets.size()) {}
  ~BucketSync() override = default;

  void progress() override {
    for (Pending& p : pending_)
      if (p.request.pending()) p.request.test();
  }

  double wait_all() override {
    double exposed = 0.0;
    for (Pending& p : pending_) core_.wait(p, exposed);
    return exposed;
  }

 protected:
  // The bucket's span of the gradient buffer, scaled by 1/DP.
  std::span<float> scaled_bucket(int b) {
    const layout::Bucket& bucket = core_.stage.layout.buckets[b];
    const std::span<float> values(core_.grads.data() + bucket.offset,
                                  static_cast<std::size_t>(bucket.numel));
    if (core_.dp > 1) {
      const float scale = grad_scale(core_.dp);
      for (float& g : values) g *= scale;
    }
    return values;
  }

  Pending& pending(int b, const char* what) {
    Pending& p = pending_[b];
    p.name = str("bucket ", b, " ", what);
    p.posted_us = core_.trace.now_us();
    return p;
  }

  Engine::Core& core_;
  // Reduce-Scatter only: this rank's reduced shards, bucket after bucket, and each bucket's
  // offset in it. Declared before pending_ so collectives in flight are waited (by their
  // Requests' destructors) before the buffer they write is freed.
  std::vector<float> shard_;
  std::vector<std::int64_t> shard_offset_;  // [bucket]
  std::vector<Pending> pending_;            // [bucket]
};

class AllReduceSync final : public BucketSync {
 public:
  using BucketSync::BucketSync;

  void post(int b) override {
    const std::span<float> bucket = scaled_bucket(b);
    pending(b, "all-reduce").request = core_.grid.dp().all_reduce(bucket, bucket);
  }

  const float* reduced_grad(int param, std::int64_t slot_element) const override {
    return core_.grads.data() + core_.place[param].offset + slot_element;
  }

  std::vector<GradRange> reduced() const override { return {GradRange{0, core_.grads}}; }
  bool sharded() const override { return false; }
};

class ReduceScatterSync final : public BucketSync {
 public:
  explicit ReduceScatterSync(Engine::Core& core) : BucketSync(core) {
    const std::vector<plan::BucketShards>& shards = core.work.shards;
    CANZONA_CHECK(shards.size() == core.stage.layout.buckets.size(), "shards per bucket");
    std::int64_t total = 0;
    for (const plan::BucketShards& s : shards) {
      shard_offset_.push_back(total);
      total += s.counts[core.dp_rank];
    }
    shard_.assign(static_cast<std::size_t>(total), 0.0f);
  }

  void post(int b) override {
    const std::span<float> bucket = scaled_bucket(b);
    const plan::BucketShards& s = core_.work.shards[b];
    pending(b, "reduce-scatter").request = core_.grid.dp().reduce_scatter(
        bucket,
        std::span<float>(shard_.data() + shard_offset_[b],
                         static_cast<std::size_t>(s.counts[core_.dp_rank])),
        s.counts);
  }

  const float* reduced_grad(int param, std::int64_t slot_element) const override {
    const ParamPlace& at = core_.place[param];
    const plan::BucketShards& s = core_.work.shards[at.bucket];
    const std::int64_t element = at.slot_offset + slot_element;
    const std::int64_t first = s.displs[core_.dp_rank];
    CANZONA_CHECK(element >= first && element < first + s.counts[core_.dp_rank], "param ",
                  core_.model.params[param].name, " element ", slot_element, " outside DP shard ",
                  core_.dp_rank);
    return shard_.data() + shard_offset_[at.bucket] + (element - first);
  }

  std::vector<GradRange> reduced() const override {
    std::vector<GradRange> ranges;
    const auto& buckets = core_.stage.layout.buckets;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const plan::BucketShards& s = core_.work.shards[b];
      const std::int64_t count = s.counts[core_.dp_rank];
      ranges.push_back(GradRange{buckets[b].offset + s.displs[core_.dp_rank],
                                 std::span<const float>(shard_.data() + shard_offset_[b],
                                                        static_cast<std::size_t>(count))});
    }
    return ranges;
  }

  bool sharded() const override { return true; }
};

}  // namespace

std::unique_ptr<DpGradSync> make_dp_sync(plan::DpSync kind, Engine::Core& core) {
  if (kind == plan::DpSync::kReduceScatter) return std::make_unique<ReduceScatterSync>(core);
  return std::make_unique<AllReduceSync>(core);
}

}  // namespace canzona::runtime
