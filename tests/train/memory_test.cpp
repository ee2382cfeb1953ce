// estimate_memory's buffers against the engine's allocations derived by hand (runtime/engine.cpp:
// one fp32 main copy per computed task; dp_sync.cpp: the DP shard of the gradient buffer under a
// reduce-scatter). With --all-adamw every param is one element-wise task of numel x 1, so the main
// copies of the model are exactly its params.
#include "canzona/train/memory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "canzona/model/load.h"

namespace canzona::train {
namespace {

struct Sizes {
  double params = 0.0, largest = 0.0;  // floats
};

Sizes sizes(const model::ModelSpec& spec) {
  Sizes s;
  for (const model::ParamSpec& p : spec.params) {
    s.params += static_cast<double>(p.numel());
    s.largest = std::max(s.largest, static_cast<double>(p.numel()));
  }
  return s;
}

MemoryNeed need_of(plan::Strategy strategy, int dp, Sizes* out) {
  TrainOptions o;
  o.run.model = "qwen3-tiny";
  o.run.dp = dp;
  o.all_adamw = true;
  o.strategies = {strategy};
  const model::TransformerConfig config = model::preset(o.run.model);
  const model::ModelSpec spec = training_spec(config, o);
  *out = sizes(spec);
  return estimate_memory(config, spec, o);
}

TEST(MemoryEstimate, Dp1LbAscHoldsAMainCopyAndAWholeShard) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kLbAsc, 1, &s);
  EXPECT_EQ(need.params_bytes, 4 * s.params);
  EXPECT_EQ(need.grads_bytes, 4 * s.params);
  EXPECT_EQ(need.buffer_bytes, 4 * (s.params + s.params));
}

TEST(MemoryEstimate, Dp2LbAscHalvesTheMainCopiesAndTheShard) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kLbAsc, 2, &s);
  EXPECT_EQ(need.buffer_bytes, 4 * ((s.params / 2 + s.largest) + (s.params / 2 + s.largest)));
}

TEST(MemoryEstimate, Dp2ScComputesEverythingAndReducesInPlace) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kSc, 2, &s);
  EXPECT_EQ(need.buffer_bytes, 4 * s.params);
}

}  // namespace
}  // namespace canzona::train
