// The DP owner exchange of the optimizer step (plan::DpExchange): fsdp-a2a's way of giving each
// matrix task its whole gradient when the DP shards are equal flat cuts that split matrices. Per
// batch of the plan (plan::OwnerBatch), one All-to-All over DP moves every piece of the batch's
// reduced gradients to the params' owners; with TP > 1 the owner's TP ranks then All-Gather the
// TP shards of the split params (the redundant TP gather); the owner steps the tasks; a second
// All-to-All returns the updated values to the ranks whose shards hold them. Batch k+1's gather
// is posted before batch k is computed (Dion runs up to three batches at once). The other
// strategies have no owner exchange (every matrix lies whole in its owner's shard).
#pragma once

#include <memory>

#include "buffers.h"
#include "canzona/comm/communicator.h"
#include "collectives.h"
#include "context.h"
#include "grad_sync.h"
#include "optimizer_shards.h"

namespace canzona::engine {

class OwnerExchange {
 public:
  virtual ~OwnerExchange() = default;
  // Posts the first batch's gather so it travels while the element-wise updates run.
  virtual void begin_step() = 0;
  // Runs every batch, steps the owned tasks and writes the updated values into the shards;
  // adds exposed waits to comm_ms.
  virtual void finish_step(double& comm_ms) = 0;
  // Setup: the owned tasks' main params from the shards of the param buffer (no step).
  virtual void init_main() = 0;
};

struct OwnerExchangeParts {
  comm::Communicator& dp;
  comm::Communicator& tp;
  const GradSync& grads;
  OptimizerShards& shards;
  ParamBuffers& buffers;
  CollectiveWaits& waits;
};

// A no-op unless the strategy's parts name DpExchange::kOwnerAllToAll.
std::unique_ptr<OwnerExchange> make_owner_exchange(const RankContext& context,
                                                   const OwnerExchangeParts& parts);

}  // namespace canzona::engine
