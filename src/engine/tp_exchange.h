// The TP exchange of the optimizer step: how the ranks of a TP group get the full gradients of the
// TP-split matrix tasks they compute and the updated rows back. Which exchange is the strategy's
// plan::TpExchange. The engine's step is begin_step(), the local updates
// (OptimizerShards::step_local) while the first exchange travels, then finish_step().
#pragma once

#include <memory>

#include "buffers.h"
#include "canzona/comm/communicator.h"
#include "collectives.h"
#include "context.h"
#include "grad_sync.h"
#include "optimizer_shards.h"

namespace canzona::engine {

class TpExchange {
 public:
  virtual ~TpExchange() = default;
  // Posts the exchange that can travel while the local updates run.
  virtual void begin_step() = 0;
  // Completes the exchange and steps the TP-split tasks; adds exposed waits to comm_ms.
  virtual void finish_step(double& comm_ms) = 0;
  // Setup: fills the main params of the TP-split tasks from the param buffer (no optimizer step).
  virtual void init_main() = 0;
};

// What an exchange reads and writes: the gradients the DP sync reduced, the tasks it steps and
// the param buffer the updated rows go to.
struct TpExchangeParts {
  comm::Communicator& tp;
  const GradSync& grads;
  OptimizerShards& shards;
  ParamBuffers& buffers;
  CollectiveWaits& waits;
};

std::unique_ptr<TpExchange> make_tp_exchange(const RankContext& context,
                                             const TpExchangeParts& parts);

}  // namespace canzona::engine
