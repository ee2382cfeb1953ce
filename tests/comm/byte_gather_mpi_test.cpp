// Communicator::all_gather_bytes over MPI at every world size ctest runs (np 1..4): every rank's
// payload, of a size differing per rank (zero included), arrives intact and in rank order on every
// rank, and the all_gather counter grows by (P - 1) times this rank's size (communicator.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpi_communicator.h"

namespace canzona::comm {
namespace {

using Bytes = std::vector<std::byte>;

// Payload sizes per rank: uneven, zero on even ranks, all zero, only the last rank, large and
// non-divisible (past Open MPI's eager limit).
std::vector<std::vector<std::size_t>> size_patterns(int P) {
  std::vector<std::vector<std::size_t>> patterns(5, std::vector<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    patterns[0][r] = r + 1;
    patterns[1][r] = r % 2 == 0 ? 0 : 3 * r + 1;
    patterns[2][r] = 0;
    patterns[3][r] = r == P - 1 ? 17 : 0;
    patterns[4][r] = (1 << 20) + 37 * r;
  }
  return patterns;
}

// Rank q's byte i under pattern k: differs between ranks, patterns and neighbouring bytes.
Bytes payload(int k, int q, std::size_t size) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<std::byte>((31 * q + 7 * k + 13 * i + 1) % 251);
  return bytes;
}

class ByteGather : public testing::TestWithParam<ReduceMode> {
 protected:
  MpiCommunicator comm_{MPI_COMM_WORLD, GetParam()};
  int P = comm_.size();
  int me = comm_.rank();
};

TEST_P(ByteGather, EveryRanksPayloadArrivesIntactInRankOrder) {
  const auto patterns = size_patterns(P);
  for (int k = 0; k < static_cast<int>(patterns.size()); ++k) {
    const Bytes mine = payload(k, me, patterns[k][me]);
    const CommBytes before = comm_.bytes();
    const std::vector<Bytes> all = comm_.all_gather_bytes(mine);
    ASSERT_EQ(static_cast<int>(all.size()), P) << "pattern " << k;
    for (int q = 0; q < P; ++q)
      EXPECT_EQ(all[q], payload(k, q, patterns[k][q])) << "pattern " << k << ", from rank " << q;
    const CommBytes counted = comm_.bytes() - before;
    EXPECT_EQ(counted,
              (CommBytes{.all_gather = static_cast<std::int64_t>((P - 1) * patterns[k][me])}))
        << "pattern " << k;
  }
}

TEST_P(ByteGather, InterleavesWithFloatCollectives) {
  std::vector<float> value = {static_cast<float>(me + 1)};
  comm_.all_reduce(value, value).wait();
  const std::vector<Bytes> all = comm_.all_gather_bytes(payload(9, me, 3 + me));
  comm_.all_reduce(value, value).wait();
  for (int q = 0; q < P; ++q) EXPECT_EQ(all[q], payload(9, q, 3 + q));
  EXPECT_EQ(value[0], static_cast<float>(P * P * (P + 1) / 2));  // (sum of 1..P) * P
}

INSTANTIATE_TEST_SUITE_P(BothModes, ByteGather,
                         testing::Values(ReduceMode::kNative, ReduceMode::kDeterministic),
                         [](const testing::TestParamInfo<ReduceMode>& info) {
                           return info.param == ReduceMode::kNative ? "Native" : "Deterministic";
                         });

}  // namespace
}  // namespace canzona::comm
