// The param sync after the optimizer step: how updated params reach the DP ranks that did not
// compute them. Which sync is the strategy's plan::ParamSync.
#pragma once

#include <memory>

#include "buffers.h"
#include "canzona/comm/communicator.h"
#include "collectives.h"
#include "context.h"

namespace canzona::engine {

class ParamSync {
 public:
  virtual ~ParamSync() = default;
  // Posts (or runs and waits) the sync; returns the exposed ms.
  virtual double start() = 0;
  // Waits for bucket b's sync; returns the exposed ms.
  virtual double wait(int bucket) = 0;
};

// Posts the in-place variable All-Gather of bucket b's params over DP from each rank's shard
// (shards: the plan's counts and displacements of the bucket).
comm::Request all_gather_bucket(comm::Communicator& dp, ParamBuffers& buffers,
                                const plan::BucketShards& shards, int dp_rank, int b);

std::unique_ptr<ParamSync> make_param_sync(const RankContext& context, comm::Communicator& dp,
                                           ParamBuffers& buffers, CollectiveWaits& waits);

}  // namespace canzona::engine
