// Hand-worked cases of the TP planners: the MinHeap LPT solver, paper Algorithm 2 (greedy
// rollback), asc round robin and our carried-load variant; capacity edge cases.
#include "algorithms/tp.h"

#include <gtest/gtest.h>

namespace canzona::plan {
namespace {

const std::vector<TpTask> kTasks{{5, 40}, {4, 30}, {3, 30}, {3, 20}, {2, 10}};

TEST(Lpt, LargestFirstToLeastLoadedLowestHostOnTies) {
  // 5 -> h0, 4 -> h1, 3 -> h1 (4 < 5), 3 (index 3) -> h0 (5 < 7), 2 -> h0? loads (8, 7) -> h1.
  EXPECT_EQ(lpt_hosts(kTasks, {0, 1, 2, 3, 4}, {0, 0}), (std::vector<int>{0, 1, 1, 0, 1}));
}

TEST(Lpt, InitialLoadsAreRespected) {
  EXPECT_EQ(lpt_hosts(kTasks, {0, 1}, {10, 0}), (std::vector<int>{1, 1}));
}

TEST(Rollback, ClosesTheGroupWhenAHostWouldExceedCapacity) {
  // {0,1}: bytes (40, 30) fit 50. Adding task 2 puts 30 + 30 on host 1 -> new group {2}.
  // {2,3}: (30, 20). Adding 4 (2 -> h0 on a tie of 3 vs 3): host 0 gets 40 <= 50 -> accepted.
  const auto groups = rollback_groups(kTasks, 2, 50);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].tasks, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[0].hosts, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1].tasks, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(groups[1].hosts, (std::vector<int>{0, 1, 0}));
  EXPECT_DOUBLE_EQ(groups[0].makespan, 5.0);
  EXPECT_DOUBLE_EQ(groups[1].makespan, 5.0);
  EXPECT_EQ(groups[1].max_host_bytes, 40);
}

TEST(Rollback, TaskOverCapacityIsItsOwnGroupNotAnError) {
  const auto groups = rollback_groups({{1, 100}, {1, 10}}, 2, 50);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].tasks, (std::vector<int>{0}));
  EXPECT_EQ(groups[1].tasks, (std::vector<int>{1}));
  EXPECT_EQ(groups[0].max_host_bytes, 100);
}

TEST(Rollback, HugeCapacityMakesOneGroup) {
  const auto groups = rollback_groups(kTasks, 2, 1'000'000);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].tasks.size(), 5u);
}

TEST(RoundRobin, FixedCountGroupsWithCyclicHosts) {
  const auto groups = round_robin_groups(kTasks, 2, 2);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].hosts, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1].hosts, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[2].tasks, (std::vector<int>{4}));
  EXPECT_EQ(groups[2].hosts, (std::vector<int>{0}));
}

TEST(BalancedGroups, HostsBalancedOverAllTasksThenFirstFitByCapacity) {
  // LPT over all: 0->h0, 1->h1, 2->h1, 3->h0, 4->h1; totals (8, 9).
  // First fit: 0, 1 -> g0 (40, 30); 2 would put 60 on h1 -> g1; 3 would put 60 on h0 -> g1;
  // 4 fits g0 (h1 = 40).
  const auto groups = balanced_groups(kTasks, 2, 50);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].tasks, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(groups[0].hosts, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(groups[1].tasks, (std::vector<int>{2, 3}));
  EXPECT_EQ(groups[1].hosts, (std::vector<int>{1, 0}));
  EXPECT_EQ(groups[0].max_host_bytes, 40);
}

TEST(BalancedGroups, TaskOverCapacityKeepsItsHostAloneButNotTheOthers) {
  // Task 0 (100 bytes > 50) on h0; tasks 1 and 2 on h1 share its group.
  const auto groups = balanced_groups({{5, 100}, {1, 10}, {1, 10}}, 2, 50);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].hosts, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(groups[0].max_host_bytes, 100);
  // Two over-capacity tasks on one host never share a group.
  const auto two = balanced_groups({{5, 100}, {5, 100}}, 1, 50);
  EXPECT_EQ(two.size(), 2u);
}

}  // namespace
}  // namespace canzona::plan
