// ReduceMode::kDeterministic: reduce_scatter and all_reduce produce the same bytes as a local
// rank-order sum ((x_0 + x_1) + x_2) + ..., hence the same bytes as each other. Inputs are
// non-integer random floats, so summation order changes results (checked for P >= 3). The
// all-reduce progresses by test() alone (both phases), in any test and wait order across ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "mpi_communicator.h"
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

// Rounds of test() calls after which a request that has not completed counts as a failure. Far
// more than any run needs (a dozen rounds at P = 4 oversubscribed on 2 cores); the bound only
// turns a bug into a failure instead of a hang, and says nothing about time.
constexpr int kMaxTestRounds = 1'000'000;

class Deterministic : public testing::Test {
 protected:
  // Bytes both phases of an all-reduce of n elements hand MPI on this rank (mpi_communicator.h).
  std::int64_t all_reduce_bytes(std::int64_t n) const {
    const std::int64_t own = even_split(n, P)[me];
    return 4 * ((n - own) + (P - 1) * own);
  }

  // Calls test() on requests[order[0]], requests[order[1]], ... in rounds, skipping those that
  // reported done, until all of them did or kMaxTestRounds passed. Returns which reported done
  // (requests not in `order` are not tested and stay false).
  static std::vector<bool> test_until_done(std::vector<Request>& requests,
                                           const std::vector<int>& order) {
    std::vector<bool> done(requests.size(), false);
    std::size_t left = order.size();
    for (int round = 0; round < kMaxTestRounds && left > 0; ++round) {
      for (int i : order) {
        if (!done[i] && requests[i].test()) {
          done[i] = true;
          --left;
        }
      }
    }
    return done;
  }

  // 0, 1, ..., k - 1 rotated left by `by`.
  static std::vector<int> rotated(int k, int by) {
    std::vector<int> order(k);
    for (int j = 0; j < k; ++j) order[j] = (j + by) % k;
    return order;
  }

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

// Sizes: empty, one element (P - 1 ranks own nothing), fewer than P, non-divisible, large.
std::vector<std::int64_t> all_reduce_sizes(int P) {
  return {0, 1, P - 1, P + 1, 1003, 4099};
}

TEST_F(Deterministic, TestAlonePostsPhaseTwoAndCompletesEveryAllReduceBeforeWait) {
  const std::vector<std::int64_t> sizes = all_reduce_sizes(P);
  const int k = static_cast<int>(sizes.size());
  std::vector<std::vector<float>> send(k), recv(k);
  std::vector<Request> requests;
  std::int64_t expected_bytes = 0;
  for (int i = 0; i < k; ++i) {
    send[i] = rank_input(me, sizes[i], 10 + i);
    recv[i].assign(sizes[i], -1.0f);
    const bool in_place = i % 2 == 1;
    requests.push_back(in_place ? comm_.all_reduce(send[i], send[i])
                                : comm_.all_reduce(send[i], recv[i]));
    expected_bytes += all_reduce_bytes(sizes[i]);
  }
  const std::vector<bool> done = test_until_done(requests, rotated(k, 0));
  for (int i = 0; i < k; ++i) EXPECT_TRUE(done[i]) << "n " << sizes[i] << " never reported done";
  // Phase 2 of every all-reduce was posted (and counted) before any wait().
  EXPECT_EQ(comm_.bytes().all_reduce, expected_bytes);
  for (int i = 0; i < k; ++i) {
    EXPECT_TRUE(requests[i].pending()) << "test() must not finish the request";
    requests[i].wait();
    const std::vector<float>& result = i % 2 == 1 ? send[i] : recv[i];
    EXPECT_TRUE(same_bits(result, rank_order_sum(P, sizes[i], 10 + i))) << "n " << sizes[i];
  }
}

TEST_F(Deterministic, TestingTheLatestAllReduceAdvancesTheEarlierOnesFirst) {
  const std::int64_t n = 1001;
  std::vector<std::vector<float>> bufs;
  for (unsigned salt = 20; salt < 23; ++salt) bufs.push_back(rank_input(me, n, salt));
  std::vector<Request> requests;
  for (std::vector<float>& buf : bufs) requests.push_back(comm_.all_reduce(buf, buf));
  const std::vector<bool> last_done = test_until_done(requests, {2});
  EXPECT_TRUE(last_done[2]);
  // The last one's phase 2 could only be posted after the earlier two's: all three counted.
  EXPECT_EQ(comm_.bytes().all_reduce, 3 * all_reduce_bytes(n));
  const std::vector<bool> done = test_until_done(requests, {0, 1, 2});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(done[i]) << "request " << i;
    requests[i].wait();
    EXPECT_TRUE(same_bits(bufs[i], rank_order_sum(P, n, 20 + i))) << "request " << i;
  }
}

TEST_F(Deterministic, RanksTestingAndWaitingInRotatedOrdersCompleteWithRankOrderSums) {
  const std::vector<std::int64_t> sizes = all_reduce_sizes(P);
  const int k = static_cast<int>(sizes.size());
  // Round 1 only tests (rank r starts at request r mod k); round 2 tests one request, then waits
  // all in an order rotated by rank, newest first on odd ranks.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<float>> bufs(k);
    std::vector<Request> requests;
    const Counts counts = even_split(1003, P);
    std::vector<float> rs_send = rank_input(me, 1003, 40 + round), shard(counts[me]);
    for (int i = 0; i < k; ++i) {
      bufs[i] = rank_input(me, sizes[i], 30 + 10 * round + i);
      requests.push_back(comm_.all_reduce(bufs[i], bufs[i]));
      if (i == k / 2) requests.push_back(comm_.reduce_scatter(rs_send, shard, counts));
    }
    const int total = static_cast<int>(requests.size());
    std::vector<int> order = rotated(total, me % total);
    if (round == 0) {
      const std::vector<bool> done = test_until_done(requests, order);
      for (int i = 0; i < total; ++i) EXPECT_TRUE(done[i]) << "request " << i << " rank " << me;
    } else {
      requests[order.back()].test();
      if (me % 2 == 1) std::reverse(order.begin(), order.end());
    }
    for (int i : order) requests[i].wait();
    for (int i = 0; i < k; ++i) {
      EXPECT_TRUE(same_bits(bufs[i], rank_order_sum(P, sizes[i], 30 + 10 * round + i)))
          << "round " << round << " n " << sizes[i];
    }
    EXPECT_TRUE(same_bits(shard, segment(rank_order_sum(P, 1003, 40 + round),
                                         prefix_offsets(counts)[me], counts[me])));
  }
}

}  // namespace
}  // namespace canzona::comm
