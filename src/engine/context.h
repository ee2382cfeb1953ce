// What every part of the engine reads and none changes: the model, this stage's plan, what this
// rank does in it (plan::decode_rank), the grid coordinates and the engine options. Each part owns
// its own mutable state (buffers.h, grad_sync.h, optimizer_shards.h, tp_exchange.h,
// param_sync.h); they meet only through the narrow interfaces those headers declare.
#pragma once

#include "canzona/engine/engine.h"

namespace canzona::engine {

struct RankContext {
  const model::ModelSpec& model;
  const plan::StagePlan& stage;
  plan::RankPlan rank_plan;
  EngineOptions options;
  int dp = 1, tp = 1;            // grid shape
  int dp_rank = 0, tp_rank = 0;  // this rank's coordinates
};

}  // namespace canzona::engine
