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

std::unique_ptr<ParamSync> make_param_sync(const RankContext& context, comm::Communicator& dp,
                                           ParamBuffers& buffers, CollectiveWaits& waits);

}  // namespace canzona::engine
