// ZeRO-3's part: which buckets' params are gathered on this rank. Under stage 3 a rank keeps only
// its DP shard of each bucket's params ([cuts[d], cuts[d+1]), whole matrices on Canzona's cuts)
// between uses; the client gathers a bucket right before it is used (prefetch posts the variable
// All-Gather in place, wait completes it) and releases it after its last use, which gives every
// page outside the shard back. Under stage 1 every bucket stays gathered and the calls only wait
// for the param sync of the step.
#pragma once

#include <cstdint>
#include <vector>

#include "buffers.h"
#include "canzona/comm/communicator.h"
#include "collectives.h"
#include "context.h"

namespace canzona::engine {

class ParamResidency {
 public:
  ParamResidency(const RankContext& context, comm::Communicator& dp, ParamBuffers& buffers,
                 CollectiveWaits& waits);
  ~ParamResidency();
  ParamResidency(const ParamResidency&) = delete;
  ParamResidency& operator=(const ParamResidency&) = delete;

  bool sharded() const { return sharded_; }
  // Stage 3: posts bucket b's All-Gather unless it is gathered or in flight. Collective over DP:
  // every DP rank prefetches the same buckets in the same order.
  void prefetch(int b);
  // Stage 3: prefetch(b), then waits for it; returns the exposed ms.
  double wait(int b);
  // Stage 3: waits for bucket b if in flight and gives back its params outside this rank's shard.
  void release(int b);
  void release_all();
  bool gathered(int b) const;
  // Request::test() on every gather in flight.
  void progress();
  // This rank's shard of bucket b: elements [begin, end) relative to the bucket.
  std::int64_t shard_begin(int b) const;
  std::int64_t shard_end(int b) const;
  // Bytes of param buffer this rank keeps between uses: its shards (stage 3) or the whole buffer.
  std::int64_t persistent_bytes() const;

 private:
  enum class State : char { kReleased, kInFlight, kGathered };
  const RankContext& context_;
  comm::Communicator& dp_;
  ParamBuffers& buffers_;
  CollectiveWaits& waits_;
  bool sharded_;
  std::vector<State> state_;      // [bucket]
  std::vector<Pending> pending_;  // [bucket]
};

}  // namespace canzona::engine
