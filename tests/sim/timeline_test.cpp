// Stream schedules: bucket overlap and TP micro-group pipelines (timeline.h).
#include "timeline.h"

#include <gtest/gtest.h>

#include <random>

namespace canzona::sim {
namespace {

TEST(Overlap, OnlyTheLastBucketIsExposedWhenCommFitsUnderCompute) {
  EXPECT_DOUBLE_EQ(exposed_after_window({1, 2, 3}, {0.5, 0.5, 0.5}, 3.0), 0.5);
}

TEST(Overlap, CommLongerThanComputeIsExposed) {
  // Ends 3, 5, 7 against a window ending at 3.
  EXPECT_DOUBLE_EQ(exposed_after_window({1, 2, 3}, {2, 2, 2}, 3.0), 4.0);
  EXPECT_DOUBLE_EQ(exposed_after_window({}, {}, 3.0), 0.0);
}

TEST(Overlap, ForwardStallsForTheFirstGather) {
  // Ends 1, 2 against needs 0, 5.
  EXPECT_DOUBLE_EQ(stall_before_needs({1, 1}, {0, 5}), 1.0);
  EXPECT_DOUBLE_EQ(stall_before_needs({1, 1}, {1, 2}), 0.0);
}

// ZeRO-3 prefetch, by hand. Gathers 1, 3, 1 and compute 2 each: segment 0 waits for gather 0
// (ends 1), runs [1, 3); gather 1, posted at 1, ends 4: segment 1 runs [4, 6); gather 2, posted
// at 4, ends 5: segment 2 runs [6, 8). Stall 8 - 6 = 2.
TEST(Prefetch, OneSegmentAheadExposesOnlyWhatComputeCannotHide) {
  const PassTimeline t = run_prefetched_pass({2, 2, 2}, {1, 3, 1}, {0, 0, 0});
  EXPECT_DOUBLE_EQ(t.compute_end_s, 8.0);
  EXPECT_DOUBLE_EQ(t.compute_s, 6.0);
  EXPECT_DOUBLE_EQ(t.stream_end_s, 5.0);
  // With a Reduce-Scatter of 1 after each segment on the same stream: RS 0 runs [4, 5) behind
  // gather 1, so gather 2 (posted at 4) runs [5, 6); segment 2 still starts at 6 (end 8); RS 1
  // runs [6, 7), RS 2 [8, 9).
  const PassTimeline r = run_prefetched_pass({2, 2, 2}, {1, 3, 1}, {1, 1, 1});
  EXPECT_DOUBLE_EQ(r.compute_end_s, 8.0);
  EXPECT_DOUBLE_EQ(r.stream_end_s, 9.0);
  // Gathers shorter than compute hide behind it but for the first.
  const PassTimeline h = run_prefetched_pass({2, 2, 2}, {0.5, 0.5, 0.5}, {0, 0, 0});
  EXPECT_DOUBLE_EQ(h.compute_end_s - h.compute_s, 0.5);
  EXPECT_DOUBLE_EQ(run_prefetched_pass({}, {}, {}).compute_end_s, 0.0);
}

TEST(MicroGroups, SequentialAddsEveryCollective) {
  std::vector<GroupCost> groups = {{{2, 2}, 1, 1}, {{2, 2}, 1, 1}};
  TpTimeline t = run_micro_groups(groups, false);
  EXPECT_DOUBLE_EQ(t.total_s, 8.0);
  EXPECT_DOUBLE_EQ(t.compute_s, 4.0);
  EXPECT_DOUBLE_EQ(t.exposed_comm_s(), 4.0);
}

TEST(MicroGroups, PipelinedExposesFirstGatherAndLastScatter) {
  // G1 [0,1], G2 [1,2] under C1 [1,3], S1 [3,4] under C2 [3,5], S2 [5,6].
  std::vector<GroupCost> groups = {{{2, 2}, 1, 1}, {{2, 2}, 1, 1}};
  TpTimeline t = run_micro_groups(groups, true);
  EXPECT_DOUBLE_EQ(t.total_s, 6.0);
  EXPECT_DOUBLE_EQ(t.compute_s, 4.0);
}

TEST(MicroGroups, PipelinedLetsAnIdleHostStartTheNextGroup) {
  // Host 1 has nothing in group 1 and all of group 2: with free communication both run at once.
  std::vector<GroupCost> groups = {{{1, 0}, 0.5, 0.5}, {{0, 1}, 0.5, 0.5}};
  TpTimeline t = run_micro_groups(groups, true);
  EXPECT_DOUBLE_EQ(t.compute_s, 1.0);
  EXPECT_DOUBLE_EQ(t.total_s, 2.5);  // G1 .5, C1 [.5,1.5], S1 [1.5,2], C2 [1,2], S2 [2,2.5]
  EXPECT_DOUBLE_EQ(run_micro_groups(groups, false).total_s, 4.0);  // .5+1+.5 +.5+1+.5
}

TEST(MicroGroups, EmptyListCostsNothing) {
  TpTimeline t = run_micro_groups({}, true);
  EXPECT_EQ(t.total_s, 0.0);
  EXPECT_EQ(t.compute_s, 0.0);
}

// Random schedules: exposure never negative, pipelining never slower, faster links never slower.
TEST(MicroGroups, PropertiesOnRandomSchedules) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int hosts = 1 + trial % 8;
    const int count = 1 + trial % 6;
    std::vector<GroupCost> groups(count);
    for (auto& g : groups) {
      for (int h = 0; h < hosts; ++h) g.compute_s.push_back(u(rng) < 0.3 ? 0.0 : u(rng));
      g.gather_s = u(rng);
      g.scatter_s = u(rng);
    }
    for (bool pipelined : {false, true}) {
      TpTimeline t = run_micro_groups(groups, pipelined);
      EXPECT_GE(t.exposed_comm_s(), -1e-12) << "trial " << trial;
      std::vector<GroupCost> faster = groups;
      for (auto& g : faster) {
        g.gather_s /= 2;
        g.scatter_s /= 2;
      }
      EXPECT_LE(run_micro_groups(faster, pipelined).total_s, t.total_s + 1e-12) << trial;
    }
    EXPECT_LE(run_micro_groups(groups, true).total_s,
              run_micro_groups(groups, false).total_s + 1e-12)
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace canzona::sim
