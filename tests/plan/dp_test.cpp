// Hand-worked cases of the DP planners: the start-index rule, paper Algorithm 1, the layerwise
// ping-pong deal, equal chunks, and our balanced planner on small inputs.
#include "algorithms/dp.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace canzona::plan {
namespace {

TEST(StartIndex, ParamGoesToTheRankWhoseSliceHoldsItsStart) {
  // S = 1024 / 4 = 256: starts 0, 64, 128 lie in slice 0; 512 in slice 2.
  EXPECT_EQ(start_index_cuts({0, 64, 128, 512}, 1024, 4), (ItemCuts{0, 3, 3, 4, 4}));
}

TEST(StartIndex, NonDivisibleStrideUsesExactIntegerComparison) {
  // S = 10 / 3: slice boundaries at 3.33 and 6.67; start 3 is in slice 0, start 4 in slice 1.
  EXPECT_EQ(start_index_cuts({0, 3, 4, 7}, 10, 3), (ItemCuts{0, 2, 3, 4}));
}

TEST(AlphaBalanced, SingleBucketCutsAtTheClosestBoundary) {
  // μ = 5, targets 5 and 5: Φ = 0 4 7 9 10, |4-5| < |7-5| so the cut is after item 0.
  const auto cuts = alpha_balanced_cuts({{4, 3, 2, 1}}, 2, 1.0);
  EXPECT_EQ(cuts[0], (ItemCuts{0, 1, 4}));
}

TEST(AlphaBalanced, DeficitsSteerTheSecondBucket) {
  // Bucket 0 (total 8) first: cut after 6 -> L = (6, 2). Bucket 1 (total 6): deficits (1, 5),
  // targets (1, 5); Φ = 0 3 6, closest to 1 is 0, so rank 1 takes everything -> L = (6, 8).
  const auto cuts = alpha_balanced_cuts({{6, 2}, {3, 3}}, 2, 1.0);
  EXPECT_EQ(cuts[0], (ItemCuts{0, 1, 2}));
  EXPECT_EQ(cuts[1], (ItemCuts{0, 0, 2}));
}

TEST(AlphaBalanced, AlphaZeroIsTheEvenSplit) {
  const auto cuts = alpha_balanced_cuts({{6, 2}, {3, 3}}, 2, 0.0);
  EXPECT_EQ(cuts[1], (ItemCuts{0, 1, 2}));
}

TEST(AlphaBalanced, TiesPickTheFirstBoundary) {
  // Target 2 between Φ(1) = 1 and Φ(2) = 3: equal distance, the first wins.
  const auto cuts = alpha_balanced_cuts({{1, 2, 1}}, 2, 1.0);
  EXPECT_EQ(cuts[0], (ItemCuts{0, 1, 3}));
}

TEST(AlphaBalanced, BucketsVisitedInDescendingCostWithIndexTies) {
  // Two equal buckets: bucket 0 is visited first and its cut favours rank 0's even target.
  const auto cuts = alpha_balanced_cuts({{2, 2}, {2, 2}}, 2, 1.0);
  EXPECT_EQ(cuts[0], (ItemCuts{0, 1, 2}));
  EXPECT_EQ(cuts[1], (ItemCuts{0, 1, 2}));
}

TEST(AlphaBalanced, MoreRanksThanItemsLeavesRanksEmpty) {
  const auto cuts = alpha_balanced_cuts({{5}}, 4, 1.0);
  ASSERT_EQ(cuts[0].size(), 5u);
  EXPECT_EQ(cuts[0].front(), 0);
  EXPECT_EQ(cuts[0].back(), 1);
  for (std::size_t r = 1; r < cuts[0].size(); ++r) EXPECT_LE(cuts[0][r - 1], cuts[0][r]);
}

TEST(Layerwise, PingPongDealOfDescendingCosts) {
  // Sorted: 0(5) 2(4) | 3(3) 4(2) | 1(1): ranks 0 1 | 1 0 | 0.
  EXPECT_EQ(layerwise_owners({5, 1, 4, 3, 2}, 2), (std::vector<int>{0, 0, 1, 1, 0}));
}

TEST(EqualChunk, CutsAreEvenSlices) {
  EXPECT_EQ(equal_chunk_cuts(1024, 4), (std::vector<std::int64_t>{0, 256, 512, 768, 1024}));
  // floor(10 r / 4): 0, 2.5, 5, 7.5, 10.
  EXPECT_EQ(equal_chunk_cuts(10, 4), (std::vector<std::int64_t>{0, 2, 5, 7, 10}));
}

TEST(EqualChunk, NoOverflowForAPaddedBucketAtTheLargestDp) {
  // A layerwise bucket padded to DP x its largest shard: 2^18 ranks x 155,582,464 elements (the
  // embedding of Qwen3-0.6B) + 3, so numel x r passes int64 (found by UBSan in cli_plan_limits).
  // Expected values from 128-bit arithmetic.
  const int ranks = 262144;
  const std::int64_t numel = std::int64_t{155582464} * ranks + 3;
  const auto cuts = equal_chunk_cuts(numel, ranks);
  ASSERT_EQ(cuts.size(), static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r <= ranks; ++r)
    ASSERT_EQ(cuts[r], static_cast<std::int64_t>(static_cast<__int128>(numel) * r / ranks)) << r;
}

TEST(Balanced, BigItemsLandOnSeparateRanks) {
  // One bucket of four atomic items on two ranks: the exact monotone solver puts 4 | 3 2 1 ->
  // loads (4, 6), or 4 3 | 2 1 -> (7, 3); minimising Σ L² prefers (4, 6).
  std::vector<std::vector<DpItem>> items{
      {{4, 4, 64, false, {}}, {3, 3, 64, false, {}}, {2, 2, 64, false, {}}, {1, 1, 64, false, {}}}};
  const auto result = balanced_cuts(items, {{0, 64, 128, 192}}, {256}, 2);
  EXPECT_EQ(result[0].element_cuts, (std::vector<std::int64_t>{0, 64, 256}));
}

TEST(Balanced, RefinementMovesABoundaryItemAcrossBuckets) {
  // Bucket 0 (visited first) splits 5 | 5; bucket 1 then goes 1 | 9 -> loads (6, 14). Refinement
  // moves bucket 0's second item to rank 0 (11, 9), then bucket 1's first item to rank 1 (10, 10).
  std::vector<std::vector<DpItem>> items{{{5, 5, 10, false, {}}, {5, 5, 10, false, {}}},
                                         {{1, 1, 10, false, {}}, {9, 9, 10, false, {}}}};
  const auto result = balanced_cuts(items, {{0, 10}, {0, 10}}, {20, 20}, 2);
  double load[2] = {0, 0};
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i) {
      const std::int64_t start = i * 10;
      const int owner = start >= result[b].element_cuts[1] ? 1 : 0;
      load[owner] += items[b][i].time;
    }
  EXPECT_EQ(load[0], 10.0);
  EXPECT_EQ(load[1], 10.0);
}

TEST(Balanced, DivisibleItemFillsMemoryDeficits) {
  // Atomic item of memory 6 on some rank; a divisible item of memory 6 over 60 elements should
  // bring both ranks to 6: 0 elements go to the loaded rank, all 60 to the other.
  std::vector<std::vector<DpItem>> items{{{6, 6, 10, false, {}}}, {{0, 6, 60, true, {}}}};
  const auto result = balanced_cuts(items, {{0}, {0}}, {10, 60}, 2);
  const auto& atomic_cuts = result[0].element_cuts;
  const int atomic_owner = atomic_cuts[1] == 0 ? 1 : 0;
  const auto& cuts = result[1].element_cuts;
  const std::int64_t rank1_elements = cuts[2] - cuts[1];
  EXPECT_EQ(rank1_elements, atomic_owner == 0 ? 60 : 0);
}

TEST(Balanced, AdjacentDivisibleItemsAreFilledAsOneRun) {
  // Three adjacent element-wise items (memory 10 each) over three ranks: one run, one item each.
  std::vector<std::vector<DpItem>> items{
      {{0, 10, 10, true, {}}, {0, 10, 10, true, {}}, {0, 10, 10, true, {}}}};
  const auto result = balanced_cuts(items, {{0, 64, 128}}, {192}, 3);
  EXPECT_EQ(result[0].element_cuts, (std::vector<std::int64_t>{0, 64, 128, 192}));
}

TEST(Balanced, GridCandidatesPackTasksOntoHostsAndKeepCutsMonotone) {
  // Two buckets; with tp = 2 the grid candidates join the DP ones. The divisible item's caps
  // change nothing here (the 24 units of time before it need ceil(1.25 x 24 / 24) = 2 = R ranks),
  // so each capped twin (candidates 1, 3, 5, 7) is skipped: three DP candidates, one grid one.
  // Every candidate's cuts are monotone, start at 0 and end at the bucket size.
  std::vector<std::vector<DpItem>> items{
      {{12, 12, 64, false, {12}}, {12, 12, 64, false, {6, 6}}, {0, 8, 64, true, {}}},
      {{12, 12, 64, false, {12}}, {12, 12, 64, false, {6, 6}}}};
  const auto one = balanced_cut_candidates(items, {{0, 64, 128}, {0, 64}}, {192, 128}, 2, 1);
  const auto grid = balanced_cut_candidates(items, {{0, 64, 128}, {0, 64}}, {192, 128}, 2, 2);
  EXPECT_EQ(one.size(), 3u);
  ASSERT_EQ(grid.size(), 4u);
  for (const auto& candidate : grid) {
    ASSERT_EQ(candidate.size(), 2u);
    for (std::size_t b = 0; b < 2; ++b) {
      const auto& c = candidate[b].element_cuts;
      ASSERT_EQ(c.size(), 3u);
      EXPECT_EQ(c.front(), 0);
      EXPECT_EQ(c.back(), b == 0 ? 192 : 128);
      EXPECT_LE(c[0], c[1]);
      EXPECT_LE(c[1], c[2]);
    }
  }
  // The grid candidate (no caps): the {12} of bucket 0 goes to rank 0 (hosts 12, 0); the {6, 6}
  // next to it to rank 1 (6, 6); bucket 1's {12} to rank 0 (12, 12, not 18, 6); its {6, 6} to
  // rank 1 (12, 12). Every host ends at 12; the element-wise tail follows its neighbour.
  const auto& g = grid[3];
  EXPECT_EQ(g[0].element_cuts, (std::vector<std::int64_t>{0, 64, 192}));
  EXPECT_EQ(g[1].element_cuts, (std::vector<std::int64_t>{0, 64, 128}));
}

// When the caps bind, the capped twins stay: 4 ranks, a big divisible item (memory 40 of 64)
// with 12 of the 24 units of time before it needs ceil(1.25 x 12 / 6) = 3 < 4 ranks at one end.
TEST(Balanced, CappedTwinsStayWhenTheCapsBind) {
  const DpItem a{6, 6, 64, false, {}}, d{0, 40, 64, true, {}};
  const std::vector<std::vector<DpItem>> items{{a, a, d, a, a}};
  const auto candidates = balanced_cut_candidates(items, {{0, 64, 128, 192, 256}}, {320}, 4, 1);
  EXPECT_EQ(candidates.size(), 6u);
}

TEST(Balanced, DivisibleItemIsSplitEvenlyWhenNothingElseExists) {
  std::vector<std::vector<DpItem>> items{{{0, 100, 100, true, {}}}};
  const auto result = balanced_cuts(items, {{0}}, {100}, 4);
  EXPECT_EQ(result[0].element_cuts, (std::vector<std::int64_t>{0, 25, 50, 75, 100}));
}

// Free order with a big divisible run beside atomic items (the embedding beside a few layers):
// 4 ranks; bucket 0 = a divisible item of memory 8 (8000 elements) and two atomic items, bucket 1
// = six atomic items, every atomic item time 1 and memory 1; total memory 16, mean 4.
// Plain LPT deals bucket 0's items to ranks 0 and 1 and bucket 1's to 2 3 0 1 2 3 (memory 2
// each), so the run's widest gap is after rank 1's item, over ranks 1..3: (3 x 2 + 8) / 3 = 14/3
// on them, max/mean 14/12. The windowed candidate (run memory 8 > mean 4; bucket 0 has 2 of the 8
// units of time, s = ceil(2 x 4 x 2 / 8) = 2) keeps ranks 0..1 free of bucket 0's items (they go
// to ranks 2 and 3) and expects 8/3 run memory on each of ranks 0..2; under the 1.1 x 4 = 4.4 cap
// bucket 1's items go to 0, 1, 3, 3, 3 and 0 (the least-memory rank when none fits): atomic
// memory (2, 1, 1, 4), and the run water-fills ranks 0..2 to exactly 4: max/mean 1.
TEST(FreeOrder, AWindowLetsABigDivisibleRunSpreadOverFreeRanks) {
  const DpItem big{0.0, 8.0, 8000, true, {}}, small{1.0, 1.0, 1, false, {}};
  const std::vector<std::vector<DpItem>> items{{big, small, small},
                                               {small, small, small, small, small, small}};
  const int ranks = 4;
  double best = 1e9, plain = 0.0;
  const auto candidates = free_order_candidates(items, ranks, 1);
  ASSERT_GE(candidates.size(), 2u);
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    const FreeOrder& f = candidates[c];
    std::vector<std::vector<DpItem>> laid(2);
    std::vector<std::vector<std::int64_t>> starts(2);
    std::vector<std::int64_t> numel(2, 0);
    for (int b = 0; b < 2; ++b)
      for (int i : f.order[b]) {
        laid[b].push_back(items[b][i]);
        starts[b].push_back(numel[b]);
        numel[b] += items[b][i].numel;
      }
    const DpCuts cuts = cuts_for_owners(laid, f.owner, starts, numel, ranks);
    // Memory per rank: each item's memory in proportion to its elements inside the rank's shard.
    std::vector<double> memory(ranks, 0.0);
    for (int b = 0; b < 2; ++b)
      for (std::size_t i = 0; i < laid[b].size(); ++i)
        for (int r = 0; r < ranks; ++r) {
          const std::int64_t lo = std::max(starts[b][i], cuts[b].element_cuts[r]);
          const std::int64_t hi =
              std::min(starts[b][i] + laid[b][i].numel, cuts[b].element_cuts[r + 1]);
          if (hi > lo)
            memory[r] += laid[b][i].memory * static_cast<double>(hi - lo) /
                         static_cast<double>(laid[b][i].numel);
        }
    const double ratio = *std::max_element(memory.begin(), memory.end()) / 4.0;
    if (c == 0) plain = ratio;
    best = std::min(best, ratio);
  }
  EXPECT_NEAR(plain, 14.0 / 12.0, 1e-3);  // the first candidate is plain LPT
  EXPECT_EQ(best, 1.0);
}

// free_order_for_owners lays given owners out (ranks ascending, old relative order) and refuses
// an atomic item without a DP rank.
TEST(FreeOrder, ForOwnersGroupsByOwnerAndChecksThem) {
  const DpItem a{1.0, 1.0, 1, false, {}}, d{0.0, 1.0, 1, true, {}};
  const std::vector<std::vector<DpItem>> items{{a, a, d, a}};
  const FreeOrder f = free_order_for_owners(items, 2, {{1, 0, -1, 1}});
  ASSERT_EQ(f.order[0].size(), 4u);
  std::vector<int> atomic;
  for (int i : f.order[0])
    if (!items[0][i].divisible) atomic.push_back(i);
  EXPECT_EQ(atomic, (std::vector<int>{1, 0, 3}));
  EXPECT_THROW(free_order_for_owners(items, 2, {{1, 2, -1, 1}}), std::exception);
  EXPECT_THROW(free_order_for_owners(items, 2, {{1, -1, -1, 1}}), std::exception);
}

}  // namespace
}  // namespace canzona::plan

namespace canzona::plan {
namespace {

// Megatron-LM layer-wise LPT, by hand. Two ranks, one bucket: costs 8, 5, 4, 1, numel 1, 5, 1, 1
// (8 elements, cap 1.3 x 8 / 2 = 5.2 per rank). 8 -> r0 (load 8, 1 el); 5 -> r1 (5, 5 el);
// 4: r1 is least loaded but 5 + 1 > 5.2, so r0 (12, 2 el); 1: r1 again over the cap -> r0.
// Without the cap the 4 would go to r1.
TEST(LayerwiseLpt, NumelCapSkipsAFullRank) {
  EXPECT_EQ(layerwise_lpt_ranks({{8, 5, 4, 1}}, {{1, 5, 1, 1}}, 2, 1.3),
            (std::vector<std::vector<int>>{{0, 1, 0, 0}}));
  EXPECT_EQ(layerwise_lpt_ranks({{8, 5, 4, 1}}, {{1, 5, 1, 1}}, 2, 100.0),
            (std::vector<std::vector<int>>{{0, 1, 1, 0}}));
}

// Loads carry across buckets: bucket 0 puts 8 on r0, so bucket 1's largest (3) goes to r1, its
// next (2) too (r1 3 < r0 8). With a cap: a param no rank can hold under it (numel 10 of 12, cap
// 7.8) goes to the least-loaded rank (r1, 0 < 8); the next one (numel 2) would again go to r1 by
// load, but r1 holds 10 already, so r0 takes it.
TEST(LayerwiseLpt, LoadsCarryAcrossBucketsAndOverCapFallsBackToLpt) {
  EXPECT_EQ(layerwise_lpt_ranks({{8}, {3, 2}}, {{1}, {1, 1}}, 2, 100.0),
            (std::vector<std::vector<int>>{{0}, {1, 1}}));
  EXPECT_EQ(layerwise_lpt_ranks({{8}, {3, 1}}, {{1}, {10, 2}}, 2, 1.3),
            (std::vector<std::vector<int>>{{0}, {1, 0}}));
}

}  // namespace
}  // namespace canzona::plan
