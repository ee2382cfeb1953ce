// The order in which one pipeline stage runs the forwards and backwards of a step's micro-batches:
// Megatron-LM's 1F1B without interleaving (schedules.py,
// forward_backward_pipelining_without_interleaving). Stage s of p runs min(p - s - 1, m) warm-up
// forwards, then alternates one forward and one backward until every forward has run (steady
// state), then the remaining backwards (cool-down). Micro-batches start and finish in order on
// every stage, so a stage accumulates the gradients of micro-batch 0, 1, ... in that order, as
// one stage does; the last stage runs each backward right after its forward.
#pragma once

#include <vector>

namespace canzona::plan {

struct PipelineOp {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro = 0;  // micro-batch index in [0, m)
  bool operator==(const PipelineOp&) const = default;
};

// The 2m operations of `stage` (0 <= stage < stages) for m = micro_batches >= 1. Throws Error on
// arguments out of range.
std::vector<PipelineOp> one_f_one_b(int stages, int stage, int micro_batches);

// Warm-up forwards of `stage`: min(stages - stage - 1, micro_batches).
int warmup_forwards(int stages, int stage, int micro_batches);

}  // namespace canzona::plan
