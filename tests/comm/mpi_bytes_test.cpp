// The byte-counting definitions of the MPI backend (mpi_calls.h), at P = 1..4 with zero counts.
// Expected values are worked out by hand from the definitions in mpi_communicator.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mpi_calls.h"

namespace canzona::comm::detail {
namespace {

struct CountsCase {
  std::vector<int> counts;            // the int array handed to MPI, one entry per rank
  std::vector<std::int64_t> by_rank;  // expected bytes on each rank
};

// Sum over r != me of counts[r], times 4: MPI_Ialltoallv's sendcounts and MPI_Ireduce_scatter's
// recvcounts follow the same rule.
const std::vector<CountsCase> kOthersCases = {
    {{5}, {0}},                       // P = 1: only the own block
    {{3, 0}, {0, 12}},                // P = 2, nothing for rank 1
    {{0, 2, 7}, {36, 28, 8}},         // P = 3
    {{1, 0, 4, 0}, {16, 20, 4, 20}},  // P = 4, zeros for ranks 1 and 3
    {{0, 0, 0, 0}, {0, 0, 0, 0}},     // all zero
};

TEST(MpiBytes, AlltoallvCountsSendCountsForOtherRanks) {
  for (const CountsCase& c : kOthersCases) {
    for (int me = 0; me < std::ssize(c.counts); ++me) {
      EXPECT_EQ(alltoallv_bytes(DType::kF32, c.counts, me), c.by_rank[me])
          << "P " << c.counts.size() << " rank " << me;
    }
  }
}

TEST(MpiBytes, ReduceScatterCountsTheBlocksOtherRanksReceive) {
  for (const CountsCase& c : kOthersCases) {
    for (int me = 0; me < std::ssize(c.counts); ++me) {
      EXPECT_EQ(reduce_scatter_bytes(DType::kF32, c.counts, me), c.by_rank[me])
          << "P " << c.counts.size() << " rank " << me;
    }
  }
}

TEST(MpiBytes, ByteAllgathervCountsOneBytePerElementOncePerOtherRank) {
  const std::vector<CountsCase> cases = {
      {{9}, {0}},                    // P = 1
      {{0, 5}, {0, 5}},              // P = 2: 5 bytes to 1 other rank
      {{2, 0, 3}, {4, 0, 6}},        // P = 3: 2 x 2 and 3 x 2 bytes
      {{1, 0, 2, 0}, {3, 0, 6, 0}},  // P = 4: 1 x 3 and 2 x 3 bytes
  };
  for (const CountsCase& c : cases) {
    for (int me = 0; me < std::ssize(c.counts); ++me) {
      EXPECT_EQ(byte_allgatherv_bytes(c.counts, me), c.by_rank[me])
          << "P " << c.counts.size() << " rank " << me;
    }
  }
}

TEST(MpiBytes, AllgathervCountsTheOwnBlockOncePerOtherRank) {
  const std::vector<CountsCase> cases = {
      {{9}, {0}},                      // P = 1
      {{0, 5}, {0, 20}},               // P = 2: 5 elements to 1 other rank
      {{2, 0, 3}, {16, 0, 24}},        // P = 3: 2 x 2 and 3 x 2 elements
      {{1, 0, 2, 0}, {12, 0, 24, 0}},  // P = 4: 1 x 3 and 2 x 3 elements
  };
  for (const CountsCase& c : cases) {
    for (int me = 0; me < std::ssize(c.counts); ++me) {
      EXPECT_EQ(allgatherv_bytes(DType::kF32, c.counts, me), c.by_rank[me])
          << "P " << c.counts.size() << " rank " << me;
    }
  }
}

TEST(MpiBytes, AllreduceCountsAReduceScatterAndAllGatherOverTheEvenSplit) {
  struct Case {
    int n;
    std::vector<std::int64_t> by_rank;  // index = rank, size = P
  };
  const std::vector<Case> cases = {
      {7, {0}},                // P = 1
      {0, {0, 0}},             // P = 2, empty
      {3, {12, 12}},           // P = 2, split {2, 1}: (3-2)+2 = 3 and (3-1)+1 = 3 elements
      {2, {12, 12, 8}},        // P = 3, split {1, 1, 0}: 1+2, 1+2, 2+0
      {10, {64, 64, 56, 56}},  // P = 4, split {3, 3, 2, 2}: 7+9, 7+9, 8+6, 8+6
  };
  for (const Case& c : cases) {
    const int P = static_cast<int>(c.by_rank.size());
    for (int me = 0; me < P; ++me) {
      EXPECT_EQ(allreduce_bytes(DType::kF32, c.n, P, me), c.by_rank[me])
          << "n " << c.n << " rank " << me;
    }
  }
}

TEST(MpiBytes, SummedOverRanksAllReduceIsTwiceAReduceScatter) {
  for (int P = 1; P <= 4; ++P) {
    for (int n : {0, 1, P - 1, P + 1, 1003}) {
      std::vector<int> even(P, n / P);
      for (int r = 0; r < n % P; ++r) ++even[r];
      std::int64_t all_reduce = 0;
      std::int64_t reduce_scatter = 0;
      std::int64_t all_gather = 0;
      for (int me = 0; me < P; ++me) {
        all_reduce += allreduce_bytes(DType::kF32, n, P, me);
        reduce_scatter += reduce_scatter_bytes(DType::kF32, even, me);
        all_gather += allgatherv_bytes(DType::kF32, even, me);
      }
      EXPECT_EQ(reduce_scatter, 4 * std::int64_t{P - 1} * n) << "P " << P << " n " << n;
      EXPECT_EQ(all_gather, reduce_scatter) << "P " << P << " n " << n;
      EXPECT_EQ(all_reduce, reduce_scatter + all_gather) << "P " << P << " n " << n;
    }
  }
}

}  // namespace
}  // namespace canzona::comm::detail
