// The param sync of the engine (engine_core.h): how updated params reach the DP ranks that did
// not compute them.
//   none                   (sc): every DP rank computed every update itself.
//   layer-wise All-Gather-v (layerwise, the paper-era Megatron variant): each DP rank's owned
//                          params, concatenated, one variable All-Gather over DP inside the step.
//   bucket All-Gather      (asc, lb-asc): one variable All-Gather per bucket of the shards the
//                          cuts give each rank, posted in forward order and waited by the next
//                          forward right before it first uses the bucket.
#include <algorithm>

#include "canzona/common/error.h"
#include "engine_core.h"

namespace canzona::runtime {
namespace {

class NoParamSync final : public ParamSyncPart {
 public:
  double start() override { return 0.0; }
  double wait(int) override { return 0.0; }
};

class LayerwiseAllGatherV final : public ParamSyncPart {
 public:
  explicit LayerwiseAllGatherV(Engine::Core& core) : core_(core) {
    const std::vector<std::vector<int>>& owned = core.work.owned;
    CANZONA_CHECK(static_cast<int>(owned.size()) == core.dp, "owned params per DP rank");
    counts_.assign(core.dp, 0);
    displs_.assign(core.dp, 0);
    std::int64_t total = 0;
    for (int r = 0; r < core.dp; ++r) {
      displs_[r] = total;
      for (int p : owned[r]) counts_[r] += core.place[p].numel;
      total += counts_[r];
    }
    buffer_.assign(static_cast<std::size_t>(total), 0.0f);
  }

  double start() override {
    TraceScope span(core_.trace, "phase", "param sync (all-gather-v)");
    const std::vector<std::vector<int>>& owned = core_.work.owned;
    const int me = core_.dp_rank;
    std::int64_t offset = displs_[me];
    for (int p : owned[me]) {
      std::copy(core_.local_param(p), core_.local_param(p) + core_.place[p].numel,
                buffer_.begin() + offset);
      offset += core_.place[p].numel;
    }
    Pending pending;
    pending.name = "layerwise all-gather-v";
    pending.posted_us = core_.trace.now_us();
    pending.request = core_.grid.dp().all_gather(
        std::span<const float>(buffer_.data() + displs_[me], static_cast<std::size_t>(counts_[me])),
        buffer_, counts_, displs_);
    double exposed = 0.0;
    core_.wait(pending, exposed);
    for (int r = 0; r < core_.dp; ++r) {
      if (r == me) continue;
      offset = displs_[r];
      for (int p : owned[r]) {
        std::copy(buffer_.begin() + offset, buffer_.begin() + offset + core_.place[p].numel,
                  core_.local_param(p));
        offset += core_.place[p].numel;
      }
    }
    return exposed;
  }

  double wait(int) override { return 0.0; }

 private:
  Engine::Core& core_;
  std::vector<std::int64_t> counts_, displs_;  // [dp rank] in buffer_
  std::vector<float> buffer_;
};

class BucketAllGather final : public ParamSyncPart {
 public:
  explicit BucketAllGather(Engine::Core& core)
      : core_(core), pending_(core.stage.layout.buckets.size()) {}

  double start() override {
    const auto& buckets = core_.stage.layout.buckets;
    // Forward order: the bucket the next forward needs first is posted first.
    for (std::size_t i = buckets.size(); i-- > 0;) {
      const plan::BucketShards& s = core_.work.shards[i];
      Pending& pending = pending_[i];
      pending.name = str("bucket ", i, " all-gather");
      pending.posted_us = core_.trace.now_us();
      float* base = core_.params.data() + buckets[i].offset;
      pending.request = core_.grid.dp().all_gather(
          std::span<const float>(base + s.displs[core_.dp_rank],
                                 static_cast<std::size_t>(s.counts[core_.dp_rank])),
          std::span<float>(base, static_cast<std::size_t>(buckets[i].numel)), s.counts, s.displs);
    }
    return 0.0;
  }

  double wait(int bucket) override {
    double exposed = 0.0;
    core_.wait(pending_.at(bucket), exposed);
    return exposed;
  }

 private:
  Engine::Core& core_;
  std::vector<Pending> pending_;  // [bucket]
};

}  // namespace

std::unique_ptr<ParamSyncPart> make_param_sync(plan::ParamSync kind, Engine::Core& core) {
  switch (kind) {
    case plan::ParamSync::kNone:
      return std::make_unique<NoParamSync>();
    case plan::ParamSync::kLayerwiseAllGatherV:
      return std::make_unique<LayerwiseAllGatherV>(core);
    case plan::ParamSync::kBucketAllGather:
      return std::make_unique<BucketAllGather>(core);
  }
  CANZONA_CHECK(false, "unknown param sync");
  return nullptr;
}

}  // namespace canzona::runtime
