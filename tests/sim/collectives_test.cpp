// α-β collective costs against values computed by hand (collectives.h).
#include "canzona/sim/collectives.h"

#include <gtest/gtest.h>

#include <random>

#include "canzona/common/error.h"

namespace canzona::sim {
namespace {

// β = 1e11 bytes/s, α = 5e-6 s.
const Link kLink{100.0, 5.0};

TEST(Collectives, RingAllReduceMatchesHandValue) {
  // 2 (p-1)/p n/β + 2 (p-1) α = 2 * 3/4 * 1e9 / 1e11 + 6 * 5e-6
  EXPECT_DOUBLE_EQ(ring_all_reduce_s(kLink, 4, 1e9), 0.015 + 3e-5);
}

TEST(Collectives, RingReduceScatterAndAllGatherMatchHandValue) {
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(kLink, 4, 1e9), 0.0075 + 1.5e-5);
  EXPECT_DOUBLE_EQ(ring_all_gather_s(kLink, 4, 1e9), 0.0075 + 1.5e-5);
}

TEST(Collectives, NonDivisibleRankCount) {
  // p = 3: 2/3 * 1e9 / 1e11 + 2 * 5e-6
  EXPECT_NEAR(ring_reduce_scatter_s(kLink, 3, 1e9), 2.0 / 300.0 + 1e-5, 1e-15);
}

TEST(Collectives, AllReduceIsReduceScatterPlusAllGather) {
  for (int p : {2, 3, 7, 8, 32, 128}) {
    for (double n : {0.0, 1.0, 4096.0, 3e9}) {
      EXPECT_DOUBLE_EQ(ring_all_reduce_s(kLink, p, n),
                       ring_reduce_scatter_s(kLink, p, n) + ring_all_gather_s(kLink, p, n))
          << "p=" << p << " n=" << n;
    }
  }
}

TEST(Collectives, PaddedVariableChunksPayForTheLargest) {
  // (p-1) (max_chunk/β + α) = 3 * (4e8 / 1e11 + 5e-6)
  const std::vector<double> chunks = {4e8, 1e8, 0.0, 2e8};
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(kLink, chunks, VarCollective::kPadded), 3 * (0.004 + 5e-6));
  EXPECT_DOUBLE_EQ(all_gather_v_s(kLink, chunks, VarCollective::kPadded), 3 * (0.004 + 5e-6));
}

TEST(Collectives, GroupedVariableChunksPayForTheBusiestLink) {
  // (n - min c)/β + (p-1) α = (7e8 - 0) / 1e11 + 3 * 5e-6
  const std::vector<double> chunks = {4e8, 1e8, 0.0, 2e8};
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(kLink, chunks, VarCollective::kGrouped), 0.007 + 1.5e-5);
  EXPECT_DOUBLE_EQ(all_gather_v_s(kLink, {3e8, 3e8, 1e8}, VarCollective::kGrouped),
                   6e8 / 1e11 + 2 * 5e-6);
}

TEST(Collectives, EqualVariableChunksReduceToThePlainRing) {
  for (int p : {2, 3, 8, 32}) {
    std::vector<double> chunks(p, 1e9 / p);
    for (auto kind : {VarCollective::kGrouped, VarCollective::kPadded}) {
      EXPECT_NEAR(reduce_scatter_v_s(kLink, chunks, kind), ring_reduce_scatter_s(kLink, p, 1e9),
                  1e-12)
          << "p=" << p << " " << to_string(kind);
    }
  }
}

TEST(Collectives, GroupedIsNeverSlowerThanPadded) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1e9);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> chunks(1 + trial % 64);
    for (double& c : chunks) c = trial % 3 == 0 ? 0.0 : u(rng);
    chunks[0] = u(rng);
    EXPECT_LE(reduce_scatter_v_s(kLink, chunks, VarCollective::kGrouped),
              reduce_scatter_v_s(kLink, chunks, VarCollective::kPadded) + 1e-15)
        << "trial " << trial;
  }
}

TEST(Collectives, AllToAllMatchesHandValue) {
  // (p-1) α + bytes/β = 7 * 5e-6 + 7e8 / 1e11
  EXPECT_DOUBLE_EQ(all_to_all_s(kLink, 8, 7e8), 3.5e-5 + 0.007);
}

// kDirect, by hand. 4 ranks, 2 per node (nodes {0, 1} and {2, 3}), one NIC per node (nic_share
// 1), chunks c = {4, 1, 0, 2} x 1e8 bytes: node {0, 1} holds 5e8 of them, node {2, 3} 2e8.
//   Reduce-Scatter: node {0,1} sends 2 x 2e8 = 4e8 and receives 2 x 5e8 = 1e9; node {2,3} sends
//   2 x 5e8 = 1e9 and receives 2 x 2e8 = 4e8: the busiest direction carries 1e9.
//   All-Gather: node {0,1} sends 2 x 5e8 = 1e9 (each chunk to both remote ranks) and receives
//   2 x 2e8; node {2,3} sends 2 x 2e8 and receives 1e9: again 1e9.
// So α + 1e9 / 1e11 = 5e-6 + 0.01 for both. With two NICs' worth of traffic per NIC
// (nic_share 2: two TP ranks' groups at once over one NIC) it doubles; with 3 ranks per node
// the nodes are {0,1,2} (shards 5e8) and {3} (2e8): in a Reduce-Scatter the first sends
// 3 x 2e8 = 6e8 and receives 1 x 5e8, the second sends 1 x 5e8 and receives 3 x 2e8 = 6e8:
// α + 0.006.
TEST(Collectives, DirectExchangeCountsEachNodesBusiestDirection) {
  const std::vector<double> chunks = {4e8, 1e8, 0.0, 2e8};
  Link link = kLink;
  link.ranks_per_node = 2;
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.01);
  EXPECT_DOUBLE_EQ(all_gather_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.01);
  link.nic_share = 2.0;
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.02);
  link.nic_share = 1.0;
  link.ranks_per_node = 3;
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.006);
  // One node: each rank's own traffic. Reduce-Scatter: rank 0 receives 3 x 4e8 = 1.2e9, the
  // most; All-Gather: rank 0 sends its 4e8 to 3 ranks, 1.2e9.
  link.ranks_per_node = 0;
  EXPECT_DOUBLE_EQ(reduce_scatter_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.012);
  EXPECT_DOUBLE_EQ(all_gather_v_s(link, chunks, VarCollective::kDirect), 5e-6 + 0.012);
}

// A direct All-Reduce of n = 8e8 bytes over 4 ranks, 2 per node: the even split 2e8 per rank;
// Reduce-Scatter: each node sends 2 x (2 x 2e8) = 8e8; All-Gather the same: 2 x (α + 8e8/β).
// The ring All-Reduce of the same: 2 x 3/4 x 8e8 / β + 6 α (kind grouped keeps it).
TEST(Collectives, DirectAllReduceIsItsTwoExchanges) {
  Link link = kLink;
  link.ranks_per_node = 2;
  EXPECT_DOUBLE_EQ(all_reduce_s(link, 4, 8e8, VarCollective::kDirect), 2 * (5e-6 + 0.008));
  EXPECT_DOUBLE_EQ(all_reduce_s(link, 4, 8e8, VarCollective::kGrouped),
                   ring_all_reduce_s(link, 4, 8e8));
  EXPECT_EQ(all_reduce_s(link, 1, 8e8, VarCollective::kDirect), 0.0);
}

// A ring crossing nodes whose NICs carry two groups' flows runs at half the bandwidth; a share
// at or below one changes nothing (the presets: a NIC per GPU).
TEST(Collectives, RingsShareANodesNics) {
  Link shared = kLink;
  shared.ranks_per_node = 2;
  shared.nic_share = 2.0;
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(shared, 4, 1e9), 0.015 + 1.5e-5);
  shared.nic_share = 0.5;
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_s(shared, 4, 1e9), ring_reduce_scatter_s(kLink, 4, 1e9));
}

TEST(Collectives, VarCollectiveNamesRoundTrip) {
  for (auto kind : {VarCollective::kGrouped, VarCollective::kPadded, VarCollective::kDirect})
    EXPECT_EQ(parse_var_collective(to_string(kind)), kind);
  EXPECT_THROW(parse_var_collective("ring"), UsageError);
}

TEST(Collectives, SingleRankCostsNothing) {
  EXPECT_EQ(ring_all_reduce_s(kLink, 1, 1e9), 0.0);
  EXPECT_EQ(reduce_scatter_v_s(kLink, {1e9}, VarCollective::kGrouped), 0.0);
  EXPECT_EQ(all_to_all_s(kLink, 1, 1e9), 0.0);
}

TEST(Collectives, ZeroBytesCostsOnlyLatency) {
  EXPECT_DOUBLE_EQ(ring_all_gather_s(kLink, 8, 0.0), 7 * 5e-6);
}

TEST(Collectives, MoreBandwidthIsNeverSlower) {
  for (int p : {2, 8, 32}) {
    for (double n : {1e3, 1e6, 1e9}) {
      double previous = 1e300;
      for (double bw : {1.0, 10.0, 45.0, 360.0, 900.0}) {
        Link link{bw, 5.0};
        std::vector<double> chunks(p, n / p);
        chunks[0] = n;
        double t = ring_all_reduce_s(link, p, n) +
                   reduce_scatter_v_s(link, chunks, VarCollective::kGrouped) +
                   all_to_all_s(link, p, n);
        EXPECT_LE(t, previous) << "p=" << p << " n=" << n << " bw=" << bw;
        previous = t;
      }
    }
  }
}

TEST(Collectives, RejectsNegativeSizesAndRanks) {
  EXPECT_THROW(ring_all_reduce_s(kLink, 4, -1.0), Error);
  EXPECT_THROW(all_to_all_s(kLink, 0, 1.0), Error);
  EXPECT_THROW(reduce_scatter_v_s(kLink, {}, VarCollective::kGrouped), Error);
  EXPECT_THROW(reduce_scatter_v_s(kLink, {1.0, -1.0}, VarCollective::kGrouped), Error);
  EXPECT_THROW(parse_var_collective("tree"), UsageError);
}

}  // namespace
}  // namespace canzona::sim
