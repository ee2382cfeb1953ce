#include "canzona/plan/pipeline_schedule.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::plan {

int warmup_forwards(int stages, int stage, int micro_batches) {
  CANZONA_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
                "1F1B schedule of stage ", stage, " of ", stages, " for ", micro_batches,
                " micro-batches");
  return std::min(stages - stage - 1, micro_batches);
}

std::vector<PipelineOp> one_f_one_b(int stages, int stage, int micro_batches) {
  const int warmup = warmup_forwards(stages, stage, micro_batches);
  const int steady = micro_batches - warmup;
  using Kind = PipelineOp::Kind;
  std::vector<PipelineOp> ops;
  ops.reserve(2 * static_cast<std::size_t>(micro_batches));
  for (int i = 0; i < warmup; ++i) ops.push_back({Kind::kForward, i});
  for (int i = 0; i < steady; ++i) {
    ops.push_back({Kind::kForward, warmup + i});
    ops.push_back({Kind::kBackward, i});
  }
  for (int i = 0; i < warmup; ++i) ops.push_back({Kind::kBackward, steady + i});
  return ops;
}

}  // namespace canzona::plan
