// MpiCommunicator collectives against analytically known results, in both ReduceModes, for any
// world size (ctest runs np 1..4). Inputs are integer-valued floats, so every sum is exact in any
// order and equality is exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "canzona/common/error.h"
#include "mpi_communicator.h"
#include "mpi_internal.h"
#include "test_util.h"

namespace canzona::comm {
namespace {

using Counts = std::vector<std::int64_t>;
using testing_util::prefix_offsets;
using testing_util::same_bits;
using testing_util::sum;

// Count patterns over P ranks: uneven, zeros in the middle and at the ends, all zero, one rank
// only, and large non-divisible.
std::vector<Counts> count_patterns(int P) {
  std::vector<Counts> patterns(5, Counts(P));
  for (int r = 0; r < P; ++r) {
    patterns[0][r] = r + 1;
    patterns[1][r] = r % 2 == 0 ? 0 : 3 * r + 1;
    patterns[2][r] = 0;
    patterns[3][r] = r == P - 1 ? 17 : 0;
    patterns[4][r] = 1000 + 37 * r;
  }
  return patterns;
}

// Rank q's contribution at index i; sum over q of (q + 1) is P(P+1)/2.
float input(int q, std::int64_t i) {
  return static_cast<float>((q + 1) * (i % 7 + 1));
}
float expected_sum(int P, std::int64_t i) {
  return static_cast<float>(P * (P + 1) / 2 * (i % 7 + 1));
}
// expected_sum(P, first + j) for j < n.
std::vector<float> expected_sums(int P, std::int64_t first, std::int64_t n) {
  std::vector<float> sums(n);
  for (std::int64_t j = 0; j < n; ++j) sums[j] = expected_sum(P, first + j);
  return sums;
}

class Collectives : public testing::TestWithParam<ReduceMode> {
 protected:
  MpiCommunicator comm_{MPI_COMM_WORLD, GetParam()};
  int P = comm_.size();
  int me = comm_.rank();
};

TEST_P(Collectives, ReduceScatterSumsEachRanksBlockWithUnevenAndZeroCounts) {
  for (const Counts& counts : count_patterns(P)) {
    std::vector<float> send(sum(counts));
    for (std::int64_t i = 0; i < std::ssize(send); ++i) send[i] = input(me, i);
    std::vector<float> recv(counts[me], -1.0f);
    comm_.reset_bytes();
    comm_.reduce_scatter(send, recv, counts).wait();
    EXPECT_TRUE(same_bits(recv, expected_sums(P, prefix_offsets(counts)[me], counts[me])));
    EXPECT_EQ(comm_.bytes().reduce_scatter, 4 * (sum(counts) - counts[me]));
  }
}

TEST_P(Collectives, AllGatherPlacesEverySegmentAndLeavesGapsUntouched) {
  for (const Counts& counts : count_patterns(P)) {
    // Segments in reverse rank order with a gap of 2 elements before each.
    Counts displs(P);
    std::int64_t offset = 0;
    for (int r = P - 1; r >= 0; --r) {
      displs[r] = offset + 2;
      offset = displs[r] + counts[r];
    }
    for (bool in_place : {false, true}) {
      std::vector<float> recv(offset, -1.0f);
      std::vector<float> own(counts[me]);
      for (std::int64_t j = 0; j < counts[me]; ++j) own[j] = static_cast<float>(me * 1000 + j);
      std::span<const float> send = own;
      if (in_place) {
        std::copy(own.begin(), own.end(), recv.begin() + displs[me]);
        send = std::span<const float>(recv.data() + displs[me], counts[me]);
      }
      comm_.reset_bytes();
      comm_.all_gather(send, recv, counts, displs).wait();
      std::vector<float> expected(offset, -1.0f);
      for (int r = 0; r < P; ++r) {
        for (std::int64_t j = 0; j < counts[r]; ++j) {
          expected[displs[r] + j] = static_cast<float>(r * 1000 + j);
        }
      }
      EXPECT_TRUE(same_bits(recv, expected)) << (in_place ? "in place" : "out of place");
      EXPECT_EQ(comm_.bytes().all_gather, 4 * (P - 1) * counts[me]);
    }
  }
}

TEST_P(Collectives, AllToAllRoutesRandomCountsFromAFixedSeed) {
  for (unsigned seed : {1u, 2u, 3u}) {
    // counts[src][dst], identical on every rank; about a third are zero.
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dist(-3, 6);
    std::vector<Counts> counts(P, Counts(P));
    for (auto& row : counts) {
      for (auto& c : row) c = std::max(0, dist(rng));
    }
    auto value = [](int src, int dst, std::int64_t k) {
      return static_cast<float>(src * 10000 + dst * 100 + k);
    };
    // Send segments in destination order with a 1-element gap; receive segments in reverse
    // source order, contiguous.
    Counts send_counts(P), send_displs(P), recv_counts(P), recv_displs(P);
    std::int64_t send_size = 0, recv_size = 0;
    for (int dst = 0; dst < P; ++dst) {
      send_counts[dst] = counts[me][dst];
      send_displs[dst] = send_size + 1;
      send_size = send_displs[dst] + send_counts[dst];
    }
    for (int src = P - 1; src >= 0; --src) {
      recv_counts[src] = counts[src][me];
      recv_displs[src] = recv_size;
      recv_size += recv_counts[src];
    }
    std::vector<float> send(send_size, -7.0f), recv(recv_size, -1.0f);
    for (int dst = 0; dst < P; ++dst) {
      for (std::int64_t k = 0; k < send_counts[dst]; ++k) {
        send[send_displs[dst] + k] = value(me, dst, k);
      }
    }
    comm_.reset_bytes();
    comm_.all_to_all(send, send_counts, send_displs, recv, recv_counts, recv_displs).wait();
    std::vector<float> expected(recv_size);
    for (int src = 0; src < P; ++src) {
      for (std::int64_t k = 0; k < recv_counts[src]; ++k) {
        expected[recv_displs[src] + k] = value(src, me, k);
      }
    }
    EXPECT_TRUE(same_bits(recv, expected)) << "seed " << seed;
    EXPECT_EQ(comm_.bytes().all_to_all, 4 * (sum(send_counts) - send_counts[me]));
  }
}

TEST_P(Collectives, AllReduceSumsInPlaceAndOutOfPlace) {
  for (std::int64_t n : {0, 1, 5, 1001}) {
    for (bool in_place : {false, true}) {
      std::vector<float> send(n), recv(n, -1.0f);
      for (std::int64_t i = 0; i < n; ++i) send[i] = input(me, i);
      comm_.reset_bytes();
      if (in_place) {
        comm_.all_reduce(send, send).wait();
        recv = send;
      } else {
        comm_.all_reduce(send, recv).wait();
      }
      EXPECT_TRUE(same_bits(recv, expected_sums(P, 0, n))) << "n " << n;
      const std::int64_t own = even_split(n, P)[me];
      EXPECT_EQ(comm_.bytes().all_reduce, 4 * ((n - own) + (P - 1) * own));
    }
  }
}

TEST_P(Collectives, TwoOutstandingRequestsCompleteInEitherWaitOrder) {
  const std::int64_t n = 4096;
  std::vector<float> a(n), b(n), c(n);
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] = input(me, i);
  const Counts counts = even_split(n, P);
  std::vector<float> shard(counts[me]);
  Request first = comm_.all_reduce(a, a);
  Request second = comm_.reduce_scatter(b, shard, counts);
  Request third = comm_.all_reduce(b, c);
  if (me % 2 == 0) {  // ranks wait in different orders
    third.wait();
    second.wait();
    first.wait();
  } else {
    first.wait();
    second.wait();
    third.wait();
  }
  EXPECT_TRUE(same_bits(a, expected_sums(P, 0, n)));
  EXPECT_TRUE(same_bits(c, expected_sums(P, 0, n)));
  EXPECT_TRUE(same_bits(shard, expected_sums(P, prefix_offsets(counts)[me], counts[me])));
}

TEST_P(Collectives, TestDrivesRequestsToCompletionBeforeWait) {
  const std::int64_t n = 2048;
  std::vector<float> a(n), b(n), c(n);
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] = input(me, i);
  const Counts counts = even_split(n, P);
  std::vector<float> shard(counts[me]);
  Request reduce = comm_.all_reduce(a, c);
  Request scatter = comm_.reduce_scatter(b, shard, counts);
  // Both complete by test() alone (bounded spin, no timing): in deterministic mode test() also
  // posts the all-reduce's second phase.
  bool scatter_done = false;
  bool reduce_done = false;
  for (int spin = 0; spin < 10'000'000 && !(scatter_done && reduce_done); ++spin) {
    reduce_done = reduce_done || reduce.test();
    scatter_done = scatter_done || scatter.test();
  }
  EXPECT_TRUE(scatter_done);
  EXPECT_TRUE(reduce_done);
  EXPECT_EQ(comm_.bytes().all_reduce, 4 * ((n - counts[me]) + (P - 1) * counts[me]))
      << "both phases counted before wait()";
  EXPECT_TRUE(scatter.pending());  // still owned until waited
  scatter.wait();
  reduce.wait();
  EXPECT_TRUE(scatter.test());  // empty requests report done
  EXPECT_TRUE(same_bits(c, expected_sums(P, 0, n)));
  EXPECT_TRUE(same_bits(shard, expected_sums(P, prefix_offsets(counts)[me], counts[me])));
}

TEST_P(Collectives, AbandonedRequestIsWaitedByItsDestructor) {
  std::vector<float> a(64);
  for (std::int64_t i = 0; i < 64; ++i) a[i] = input(me, i);
  { Request abandoned = comm_.all_reduce(a, a); }
  EXPECT_TRUE(same_bits(a, expected_sums(P, 0, 64)));
}

TEST_P(Collectives, AllGatherU64ReturnsEveryRanksValueInRankOrder) {
  const std::vector<std::uint64_t> values = comm_.all_gather_u64(0xC0FFEE00ull + me * me);
  std::vector<std::uint64_t> expected(P);
  for (int r = 0; r < P; ++r) expected[r] = 0xC0FFEE00ull + r * r;
  EXPECT_EQ(values, expected);
  comm_.barrier();
  EXPECT_EQ(comm_.bytes(), CommBytes{}) << "control traffic is not counted";
}

INSTANTIATE_TEST_SUITE_P(BothModes, Collectives,
                         testing::Values(ReduceMode::kNative, ReduceMode::kDeterministic),
                         [](const testing::TestParamInfo<ReduceMode>& info) {
                           return info.param == ReduceMode::kNative ? "Native" : "Deterministic";
                         });

TEST(MpiErrors, ReturnCodesBecomeErrorsNamingTheCall) {
  try {
    detail::check_mpi(MPI_ERR_COUNT, "MPI_Isomething");
    FAIL() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Isomething failed: "), std::string::npos) << e.what();
  }
  EXPECT_THROW(detail::to_mpi_int(std::int64_t{1} << 31, "MPI_Ialltoallv"), Error);
}

TEST(MpiErrors, InvalidCommunicatorIsReportedNotFatal) {
  try {
    MpiCommunicator bad(MPI_COMM_NULL, ReduceMode::kNative);
    FAIL() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Comm_dup failed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace canzona::comm
