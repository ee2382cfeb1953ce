#include "residency.h"

#include "canzona/common/error.h"
#include "param_sync.h"

namespace canzona::engine {

ParamResidency::ParamResidency(const RankContext& context, comm::Communicator& dp,
                               ParamBuffers& buffers, CollectiveWaits& waits)
    : context_(context),
      dp_(dp),
      buffers_(buffers),
      waits_(waits),
      sharded_(context.options.zero_stage == ZeroStage::kThree),
      // The client writes the initial (or loaded) params in place; init_main_params releases.
      state_(buffers.layout().buckets.size(), State::kGathered),
      pending_(buffers.layout().buckets.size()) {
  CANZONA_CHECK(
      !sharded_ || (context.rank_plan.parts.dp_sync == plan::DpSync::kReduceScatter &&
                    context.rank_plan.parts.param_sync == plan::ParamSync::kBucketAllGather &&
                    context.rank_plan.shards.size() == state_.size()),
      "ZeRO-3 needs a strategy with Reduce-Scatter and bucket All-Gather");
}

ParamResidency::~ParamResidency() {
  pending_.clear();  // waits for gathers still writing the param buffer
}

void ParamResidency::prefetch(int b) {
  if (!sharded_ || state_.at(b) != State::kReleased) return;
  Pending& pending = pending_[b];
  const comm::ScopedOpLabel op_label =
      waits_.label(pending, str("bucket ", b, " param all-gather"));
  pending.request =
      all_gather_bucket(dp_, buffers_, context_.rank_plan.shards[b], context_.dp_rank, b);
  state_[b] = State::kInFlight;
}

double ParamResidency::wait(int b) {
  double exposed = 0.0;
  if (!sharded_) return exposed;
  prefetch(b);
  waits_.wait(pending_[b], exposed);
  state_[b] = State::kGathered;
  return exposed;
}

void ParamResidency::release(int b) {
  if (!sharded_ || state_.at(b) == State::kReleased) return;
  double exposed = 0.0;
  waits_.wait(pending_[b], exposed);
  buffers_.release_params(b, shard_begin(b), shard_end(b));
  state_[b] = State::kReleased;
}

void ParamResidency::release_all() {
  for (std::size_t b = 0; b < state_.size(); ++b) release(static_cast<int>(b));
}

void ParamResidency::progress() {
  for (Pending& p : pending_)
    if (p.request.pending()) p.request.test();
}

bool ParamResidency::gathered(int b) const {
  return state_.at(b) == State::kGathered;
}

std::int64_t ParamResidency::shard_begin(int b) const {
  const auto& shards = context_.rank_plan.shards;
  if (shards.empty()) return 0;
  return shards.at(b).displs[context_.dp_rank];
}

std::int64_t ParamResidency::shard_end(int b) const {
  const auto& shards = context_.rank_plan.shards;
  if (shards.empty()) return buffers_.layout().buckets.at(b).numel;
  return shard_begin(b) + shards.at(b).counts[context_.dp_rank];
}

std::int64_t ParamResidency::persistent_bytes() const {
  std::int64_t elements = 0;
  for (std::size_t b = 0; b < state_.size(); ++b)
    elements += sharded_ ? shard_end(static_cast<int>(b)) - shard_begin(static_cast<int>(b))
                         : buffers_.layout().buckets[b].numel;
  return elements * dtype_bytes(buffers_.param_dtype());
}

}  // namespace canzona::engine
