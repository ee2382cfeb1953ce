// The param syncs (param_sync.h).
//   none                   (sc): every DP rank computed every update itself.
//   layer-wise All-Gather-v (layerwise, the paper-era Megatron variant): each DP rank's owned
//                          params, concatenated, one variable All-Gather over DP inside the step.
//   bucket All-Gather      (asc, lb-asc): one variable All-Gather per bucket of the shards the
//                          cuts give each rank, posted in forward order and waited by the next
//                          forward right before it first uses the bucket.
#include "param_sync.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::engine {
namespace {

class NoParamSync final : public ParamSync {
 public:
  double start() override { return 0.0; }
  double wait(int) override { return 0.0; }
};

class LayerwiseAllGatherV final : public ParamSync {
 public:
  LayerwiseAllGatherV(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
                      CollectiveWaits& waits)
      : owned_(context.rank_plan.owned),
        dp_rank_(context.dp_rank),
        dp_(dp),
        buffers_(buffers),
        waits_(waits) {
    CANZONA_CHECK(static_cast<int>(owned_.size()) == context.dp, "owned params per DP rank");
    counts_.assign(context.dp, 0);
    displs_.assign(context.dp, 0);
    std::int64_t total = 0;
    for (int r = 0; r < context.dp; ++r) {
      displs_[r] = total;
      for (int p : owned_[r]) counts_[r] += buffers.place(p).numel;
      total += counts_[r];
    }
    buffer_.assign(total, buffers.param_dtype());
  }

  double start() override {
    TraceScope span(waits_.trace(), "phase", "param sync (all-gather-v)");
    const int me = dp_rank_;
    std::int64_t offset = displs_[me];
    const TypedSpan buffer = buffer_.span();
    for (int p : owned_[me]) {
      const std::int64_t numel = buffers_.place(p).numel;
      copy_cast(buffers_.param(p), buffer.subspan(offset, numel));
      offset += numel;
    }
    Pending pending;
    const comm::ScopedOpLabel op_label = waits_.label(pending, "layerwise all-gather-v");
    pending.request =
        dp_.all_gather(buffer.subspan(displs_[me], counts_[me]), buffer, counts_, displs_);
    double exposed = 0.0;
    waits_.wait(pending, exposed);
    for (int r = 0; r < static_cast<int>(owned_.size()); ++r) {
      if (r == me) continue;
      offset = displs_[r];
      for (int p : owned_[r]) {
        const std::int64_t numel = buffers_.place(p).numel;
        copy_cast(buffer.subspan(offset, numel), buffers_.param(p));
        offset += numel;
      }
    }
    return exposed;
  }

  double wait(int) override { return 0.0; }

 private:
  const std::vector<std::vector<int>>& owned_;  // [dp rank] params it computes
  int dp_rank_;
  comm::Communicator& dp_;
  ParamBuffers& buffers_;
  CollectiveWaits& waits_;
  std::vector<std::int64_t> counts_, displs_;  // [dp rank] in buffer_
  TypedVector buffer_;                         // the param dtype
};

class BucketAllGather final : public ParamSync {
 public:
  BucketAllGather(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
                  CollectiveWaits& waits)
      : shards_(context.rank_plan.shards),
        dp_rank_(context.dp_rank),
        dp_(dp),
        buffers_(buffers),
        waits_(waits),
        pending_(buffers.layout().buckets.size()) {}

  double start() override {
    // Forward order: the bucket the next forward needs first is posted first.
    for (std::size_t i = pending_.size(); i-- > 0;) {
      const plan::BucketShards& s = shards_[i];
      Pending& pending = pending_[i];
      const comm::ScopedOpLabel op_label = waits_.label(pending, str("bucket ", i, " all-gather"));
      pending.request = all_gather_bucket(dp_, buffers_, s, dp_rank_, static_cast<int>(i));
    }
    return 0.0;
  }

  double wait(int bucket) override {
    double exposed = 0.0;
    waits_.wait(pending_.at(bucket), exposed);
    return exposed;
  }

 private:
  const std::vector<plan::BucketShards>& shards_;  // [bucket]
  int dp_rank_;
  comm::Communicator& dp_;
  ParamBuffers& buffers_;
  CollectiveWaits& waits_;
  std::vector<Pending> pending_;  // [bucket]
};

}  // namespace

comm::Request all_gather_bucket(comm::Communicator& dp, ParamBuffers& buffers,
                                const plan::BucketShards& shards, int dp_rank, int b) {
  const TypedSpan bucket = buffers.bucket_params(b);
  return dp.all_gather(bucket.subspan(shards.displs[dp_rank], shards.counts[dp_rank]), bucket,
                       shards.counts, shards.displs);
}

std::unique_ptr<ParamSync> make_param_sync(const RankContext& context, comm::Communicator& dp,
                                           ParamBuffers& buffers, CollectiveWaits& waits) {
  switch (context.rank_plan.parts.param_sync) {
    case plan::ParamSync::kNone:
      return std::make_unique<NoParamSync>();
    case plan::ParamSync::kLayerwiseAllGatherV:
      return std::make_unique<LayerwiseAllGatherV>(context, dp, buffers, waits);
    case plan::ParamSync::kBucketAllGather:
      return std::make_unique<BucketAllGather>(context, dp, buffers, waits);
  }
  CANZONA_CHECK(false, "unknown param sync");
  return nullptr;
}

}  // namespace canzona::engine
