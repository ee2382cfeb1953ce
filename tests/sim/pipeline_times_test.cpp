// The 1F1B timing against timelines drawn by hand (stage_model.h: time_pipeline).
#include <gtest/gtest.h>

#include "stage_model.h"

namespace canzona::sim::detail {
namespace {

std::vector<StageCompute> stages(std::vector<double> per_micro_batch_s) {
  std::vector<StageCompute> out;
  for (double c : per_micro_batch_s) out.push_back({c});
  return out;
}

// Two stages of 3 s per micro batch (forward 1, backward 2), 2 micro batches, 0.5 s per send.
// Stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1:
//   s0 F0 [0, 1]    s1 F0 [1.5, 2.5]    s0 F1 [1, 2]    s1 B0 [2.5, 4.5]
//   s0 B0 [5, 7]    s1 F1 [4.5, 5.5]    s1 B1 [5.5, 7.5]    s0 B1 [8, 10]
TEST(TimePipeline, TwoStagesByHand) {
  const PipelineTimes t = time_pipeline(stages({3.0, 3.0}), 2, 0.5);
  EXPECT_DOUBLE_EQ(t.end_s[0], 10.0);
  EXPECT_DOUBLE_EQ(t.end_s[1], 7.5);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 6.0);
  EXPECT_DOUBLE_EQ(t.bubble_s[0], 4.0);
  EXPECT_DOUBLE_EQ(t.bubble_s[1], 1.5);
}

// Without sends, equal stages: the first stage ends at (m + p - 1) x c, so its bubble is
// (p - 1) / m of its compute, the textbook (p - 1) / (m + p - 1) of the whole.
TEST(TimePipeline, EqualStagesGiveTheTextbookBubble) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      std::vector<double> c(static_cast<std::size_t>(p), 3.0);
      const PipelineTimes t = time_pipeline(stages(c), m, 0.0);
      EXPECT_DOUBLE_EQ(t.end_s[0], 3.0 * (m + p - 1)) << p << " " << m;
      EXPECT_DOUBLE_EQ(t.bubble_s[0] / t.end_s[0], (p - 1.0) / (m + p - 1.0));
      // The last stage starts late (forwards of the stages before) and ends early.
      EXPECT_DOUBLE_EQ(t.end_s[p - 1], 3.0 * m + (p - 1) * 1.0);
    }
  }
}

TEST(TimePipeline, OneStageHasNoBubble) {
  const PipelineTimes t = time_pipeline(stages({2.0}), 5, 1.0);
  EXPECT_DOUBLE_EQ(t.end_s[0], 10.0);
  EXPECT_DOUBLE_EQ(t.bubble_s[0], 0.0);
}

// Past kMaxTimedOps the critical path formula serves every stage.
TEST(TimePipeline, ManyMicroBatchesUseTheCriticalPath) {
  const std::int64_t m = kMaxTimedOps;
  const PipelineTimes t = time_pipeline(stages({3.0, 6.0}), m, 0.5);
  const double end = 9.0 + static_cast<double>(m - 1) * 6.0 + 2.0 * 0.5;
  EXPECT_DOUBLE_EQ(t.end_s[0], end);
  EXPECT_DOUBLE_EQ(t.end_s[1], end);
  EXPECT_DOUBLE_EQ(t.bubble_s[1], end - 6.0 * static_cast<double>(m));
}

}  // namespace
}  // namespace canzona::sim::detail
