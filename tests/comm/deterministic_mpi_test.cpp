// ReduceMode::kDeterministic: reduce_scatter and all_reduce produce the same bytes as a local
// rank-order sum ((x_0 + x_1) + x_2) + ..., hence the same bytes as each other. Inputs are
// non-integer random floats, so summation order changes results (checked for P >= 3).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "canzona/comm/mpi_communicator.h"
#include "test_util.h"

namespace canzona::comm {
namespace {

using Counts = std::vector<std::int64_t>;
using testing_util::prefix_offsets;
using testing_util::same_bits;

// Rank q's input: n uniform floats in [-1, 1) from a seed fixed per (q, salt); any rank can
// regenerate any other rank's input.
std::vector<float> rank_input(int q, std::int64_t n, unsigned salt) {
  std::mt19937 rng(1000u * salt + static_cast<unsigned>(q));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// The contract's reference: element-wise sum in rank order 0..P-1.
std::vector<float> rank_order_sum(int P, std::int64_t n, unsigned salt) {
  std::vector<float> acc = rank_input(0, n, salt);
  for (int q = 1; q < P; ++q) {
    const std::vector<float> x = rank_input(q, n, salt);
    for (std::int64_t i = 0; i < n; ++i) acc[i] += x[i];
  }
  return acc;
}

std::span<const float> segment(const std::vector<float>& v, std::int64_t offset, std::int64_t n) {
  return std::span<const float>(v).subspan(offset, n);
}

class Deterministic : public testing::Test {
 protected:
  MpiCommunicator comm_{MPI_COMM_WORLD, ReduceMode::kDeterministic};
  int P = comm_.size();
  int me = comm_.rank();
};

TEST_F(Deterministic, InputsAreOrderSensitive) {
  if (P < 3) GTEST_SKIP() << "fp32 addition of two values is commutative";
  const std::vector<float> x0 = rank_input(0, 1003, 1), x1 = rank_input(1, 1003, 1),
                           x2 = rank_input(2, 1003, 1);
  int differing = 0;
  for (int i = 0; i < 1003; ++i)
    differing += ((x0[i] + x1[i]) + x2[i]) != (x0[i] + (x1[i] + x2[i]));
  EXPECT_GT(differing, 0) << "the bitwise tests below would not detect a reordered sum";
}

TEST_F(Deterministic, ReduceScatterAndAllReduceGiveIdenticalBytesOnEveryShard) {
  const std::int64_t n = 1003;
  Counts uneven(P);  // zero for odd ranks, the rest spread unevenly over even ranks
  std::int64_t left = n;
  for (int r = 0; r < P; ++r) {
    uneven[r] = r == P - 1 ? left : (r % 2 == 1 ? 0 : std::min<std::int64_t>(left, 100 + 211 * r));
    left -= uneven[r];
  }
  for (const Counts& counts : {uneven, even_split(n, P)}) {
    const std::vector<float> input = rank_input(me, n, 1);
    const std::vector<float> reference = rank_order_sum(P, n, 1);
    const std::int64_t offset = prefix_offsets(counts)[me];

    std::vector<float> shard(counts[me]);
    comm_.reduce_scatter(input, shard, counts).wait();
    std::vector<float> reduced(n);
    comm_.all_reduce(input, reduced).wait();
    std::vector<float> in_place = input;
    comm_.all_reduce(in_place, in_place).wait();

    EXPECT_TRUE(same_bits(shard, segment(reduced, offset, counts[me])))
        << "reduce_scatter vs all_reduce";
    EXPECT_TRUE(same_bits(shard, segment(reference, offset, counts[me])))
        << "reduce_scatter vs rank-order reference";
    EXPECT_TRUE(same_bits(reduced, reference)) << "all_reduce vs rank-order reference";
    EXPECT_TRUE(same_bits(in_place, reference)) << "in-place all_reduce vs reference";
  }
}

TEST_F(Deterministic, OutstandingAllReducesMayBeWaitedInAnyOrderOnEachRank) {
  const std::int64_t n = 777;
  std::vector<float> a = rank_input(me, n, 2), b = rank_input(me, n, 3), c = rank_input(me, n, 4);
  const Counts counts = even_split(n, P);
  std::vector<float> shard(counts[me]);
  Request ra = comm_.all_reduce(a, a);
  Request rb = comm_.all_reduce(b, b);
  Request rs = comm_.reduce_scatter(c, shard, counts);
  if (me % 2 == 0) {
    rb.wait();  // advances `ra` first: phase 2 is posted in posting order on every rank
    rs.wait();
    ra.wait();
  } else {
    rs.wait();
    ra.wait();
    rb.wait();
  }
  EXPECT_TRUE(same_bits(a, rank_order_sum(P, n, 2)));
  EXPECT_TRUE(same_bits(b, rank_order_sum(P, n, 3)));
  EXPECT_TRUE(
      same_bits(shard, segment(rank_order_sum(P, n, 4), prefix_offsets(counts)[me], counts[me])));
}

TEST_F(Deterministic, AbandonedAllReduceStillCompletes) {
  const std::int64_t n = 50;
  std::vector<float> a = rank_input(me, n, 5), b = rank_input(me, n, 6);
  Request kept = comm_.all_reduce(b, b);
  { Request abandoned = comm_.all_reduce(a, a); }  // waits (and first advances `kept`)
  kept.wait();
  EXPECT_TRUE(same_bits(a, rank_order_sum(P, n, 5)));
  EXPECT_TRUE(same_bits(b, rank_order_sum(P, n, 6)));
}

}  // namespace
}  // namespace canzona::comm
