// The DP gradient sync (grad_sync.h).
//   All-Reduce      (sc, layerwise-paper): every rank ends with the whole reduced bucket, in place.
//   Reduce-Scatter  (asc, lb-asc, layerwise): variable counts from the plan's cuts
//                   (plan::BucketShards); rank r receives the reduced elements
//                   [cuts[r], cuts[r + 1]) of each bucket into its shard buffer.
#include "grad_sync.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::engine {

float grad_scale(int dp) {
  return 1.0f / static_cast<float>(dp);
}

void scale_grads(TypedSpan grads, float scale) {
  if (grads.dtype() == DType::kF32) {
    for (float& g : grads.as<float>()) g *= scale;
    return;
  }
  for (bf16& g : grads.as<bf16>()) g = to_bf16(to_float(g) * scale);
}

GradSync::GradSync(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
                   CollectiveWaits& waits)
    : context_(context),
      dp_(dp),
      buffers_(buffers),
      waits_(waits),
      ready_(buffers.layout().buckets.size(), 0),
      param_ready_(context.model.params.size(), 0),
      pending_(buffers.layout().buckets.size()),
      give_back_(context.options.zero_stage == ZeroStage::kThree),
      given_back_(buffers.layout().buckets.size(), 0) {}

void GradSync::mark_ready(int p) {
  const ParamPlace& at = buffers_.place(p);
  CANZONA_CHECK(at.bucket >= 0, "grad_ready: param ", context_.model.params[p].name,
                " is not in this stage");
  CANZONA_CHECK(!param_ready_[p], "grad_ready: param ", context_.model.params[p].name,
                " marked ready twice in one step");
  param_ready_[p] = 1;
  const int b = at.bucket;
  if (++ready_[b] != static_cast<int>(buffers_.layout().buckets[b].slots.size())) return;
  const TypedSpan values = buffers_.bucket_grads(b);
  // Megatron scales an expert buffer by the dense DP (expert_gradient_scaling_factor), not by
  // its own expert DP: EngineOptions::grad_scaling_dp.
  const int scaling =
      context_.options.grad_scaling_dp > 0 ? context_.options.grad_scaling_dp : context_.dp;
  if (scaling > 1) scale_grads(values, grad_scale(scaling));
  Pending& pending = pending_[b];
  const comm::ScopedOpLabel op_label = waits_.label(pending, str("bucket ", b, " ", collective()));
  pending.request = post(b, values);
}

void GradSync::progress() {
  for (std::size_t b = 0; b < pending_.size(); ++b) {
    Pending& p = pending_[b];
    if (p.request.pending() && p.request.test() && give_back_ && !given_back_[b]) {
      buffers_.release_grads(static_cast<int>(b));
      given_back_[b] = 1;
    }
  }
}

double GradSync::finish() {
  const auto& buckets = buffers_.layout().buckets;
  for (std::size_t b = 0; b < ready_.size(); ++b)
    CANZONA_CHECK(ready_[b] == static_cast<int>(buckets[b].slots.size()),
                  "finish_grad_sync: bucket ", b, " has ", ready_[b], " of ",
                  buckets[b].slots.size(), " params ready");
  double exposed = 0.0;
  for (std::size_t b = 0; b < pending_.size(); ++b) {
    waits_.wait(pending_[b], exposed);
    if (give_back_ && !given_back_[b]) buffers_.release_grads(static_cast<int>(b));
  }
  std::fill(given_back_.begin(), given_back_.end(), 0);
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
  return exposed;
}

namespace {

class AllReduceSync final : public GradSync {
 public:
  using GradSync::GradSync;

  ConstTypedPtr reduced_grad(int param, std::int64_t slot_element) const override {
    return buffers_.grad(param).ptr() + slot_element;
  }
  std::vector<GradRange> reduced() const override { return {GradRange{0, buffers_.grads()}}; }
  bool sharded() const override { return false; }

 private:
  comm::Request post(int, TypedSpan scaled) override { return dp_.all_reduce(scaled, scaled); }
  const char* collective() const override { return "all-reduce"; }
};

class ReduceScatterSync final : public GradSync {
 public:
  ReduceScatterSync(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
                    CollectiveWaits& waits)
      : GradSync(context, dp, buffers, waits),
        shards_(context.rank_plan.shards),
        dtype_(buffers.grad_dtype()) {
    CANZONA_CHECK(shards_.size() == buffers.layout().buckets.size(), "shards per bucket");
    std::int64_t total = 0;
    for (const plan::BucketShards& s : shards_) {
      shard_offset_.push_back(total);
      total += s.counts[context.dp_rank];
    }
    shard_.assign(static_cast<std::size_t>(total * dtype_bytes(dtype_)), std::byte{0});
  }
  // Collectives in flight write shard_: wait for them before it is freed.
  ~ReduceScatterSync() override { drop_in_flight(); }

  ConstTypedPtr reduced_grad(int param, std::int64_t slot_element) const override {
    const ParamPlace& at = buffers_.place(param);
    const plan::BucketShards& s = shards_[at.bucket];
    const int me = context_.dp_rank;
    const std::int64_t element = at.slot_offset + slot_element;
    const std::int64_t first = s.displs[me];
    CANZONA_CHECK(element >= first && element < first + s.counts[me], "param ",
                  context_.model.params[param].name, " element ", slot_element,
                  " outside DP shard ", me);
    return shard(at.bucket).ptr() + (element - first);
  }

  std::vector<GradRange> reduced() const override {
    std::vector<GradRange> ranges;
    const auto& buckets = buffers_.layout().buckets;
    const int me = context_.dp_rank;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const plan::BucketShards& s = shards_[b];
      ranges.push_back(GradRange{buckets[b].offset + s.displs[me], shard(static_cast<int>(b))});
    }
    return ranges;
  }

  bool sharded() const override { return true; }

 private:
  comm::Request post(int b, TypedSpan scaled) override {
    return dp_.reduce_scatter(scaled, shard(b), shards_[b].counts);
  }
  // This rank's reduced shard of bucket b.
  TypedSpan shard(int b) {
    return {shard_.data() + shard_offset_[b] * dtype_bytes(dtype_),
            shards_[b].counts[context_.dp_rank], dtype_};
  }
  ConstTypedSpan shard(int b) const {
    return {shard_.data() + shard_offset_[b] * dtype_bytes(dtype_),
            shards_[b].counts[context_.dp_rank], dtype_};
  }
  const char* collective() const override { return "reduce-scatter"; }

  const std::vector<plan::BucketShards>& shards_;
  DType dtype_;                             // the gradient buffer's
  std::vector<std::byte> shard_;            // this rank's reduced shards, bucket after bucket
  std::vector<std::int64_t> shard_offset_;  // [bucket] in shard_
};

}  // namespace

std::unique_ptr<GradSync> make_grad_sync(const RankContext& context, comm::Communicator& dp,
                                         ParamBuffers& buffers, CollectiveWaits& waits) {
  if (context.rank_plan.parts.dp_sync == plan::DpSync::kReduceScatter)
    return std::make_unique<ReduceScatterSync>(context, dp, buffers, waits);
  return std::make_unique<AllReduceSync>(context, dp, buffers, waits);
}

}  // namespace canzona::engine
