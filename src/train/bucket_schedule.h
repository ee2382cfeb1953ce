// When the forward and backward gather and release each bucket of params (ZeRO-3), and where
// the forward waits for the step's param sync (stage 1), from the model's forward segments
// (Qwen3Model::forward_segments) and the engine's buckets.
//
// Forward: before segment s, wait for the buckets s reads and prefetch those of s + 1; after s,
// release each bucket no later segment reads, except, when a backward follows, the last segment's
// buckets (the backward starts with them, as FSDP keeps the root unsharded after forward).
// Backward: when it reaches segment s, wait for s's buckets and prefetch those of s - 1; a bucket
// is released once every param in it has accumulated its gradient in this backward (no node
// that reads it is left). Every DP rank runs the same schedule, so the gathers are posted in the
// same order everywhere. Under stage 1 the engine's prefetch and release are no-ops and waiting
// for a bucket is waiting for its param sync.
#pragma once

#include <vector>

#include "canzona/engine/engine.h"

namespace canzona::train {

class BucketSchedule {
 public:
  BucketSchedule(engine::Engine& engine, const std::vector<std::vector<int>>& segments);

  // Each returns the exposed wait in ms.
  double before_forward(int segment);
  void after_forward(int segment, bool backward_follows);
  double before_backward(int segment);
  // Param p's gradient was accumulated by the running backward.
  void accumulated(int p);

 private:
  void prefetch(int segment);
  double wait(int segment);

  engine::Engine& engine_;
  std::vector<std::vector<int>> buckets_;  // [segment] buckets it reads, ascending
  std::vector<int> last_read_;             // [bucket] last segment that reads it
  std::vector<int> params_in_;             // [bucket] params
  std::vector<int> accumulated_;           // [bucket] params accumulated this backward
};

}  // namespace canzona::train
