// bf16 collectives on the MPI backend (communicator.h): the data move as 2-byte elements, counted
// under the bf16 counters at half the fp32 bytes; a deterministic sum is the fp32 sum in rank
// order rounded once; the native sum is within the bf16 rounding of each addition. The expected
// values are formed here with plain loops and a rounding written out in this file.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "canzona/common/error.h"
#include "mpi_communicator.h"
#include "test_util.h"

namespace canzona::comm {
namespace {

using Counts = std::vector<std::int64_t>;

// Round to nearest, ties to even, of a float that is not NaN, from the dropped low half: above
// 0x8000 rounds up, below down, exactly 0x8000 to the even one.
std::uint16_t bf16_round_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t keep = u >> 16, rest = u & 0xFFFFu;
  if (rest > 0x8000u || (rest == 0x8000u && (keep & 1u)))
    return static_cast<std::uint16_t>(keep + 1);
  return static_cast<std::uint16_t>(keep);
}

float bf16_widen(bf16 b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

// Rank q's input: n bf16 values that are not exactly summable in bf16 (random in [-1, 1)).
std::vector<bf16> bf16_rank_input(int q, std::int64_t n, unsigned salt) {
  std::mt19937 rng(977u * salt + static_cast<unsigned>(q));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<bf16> x(n);
  for (bf16& v : x) v = bf16{bf16_round_bits(dist(rng))};
  return x;
}

std::vector<bf16> bf16_rank_order_sum(int P, std::int64_t n, unsigned salt) {
  std::vector<float> acc(n, 0.0f);
  for (int q = 0; q < P; ++q) {
    const std::vector<bf16> x = bf16_rank_input(q, n, salt);
    for (std::int64_t i = 0; i < n; ++i)
      acc[i] = q == 0 ? bf16_widen(x[i]) : acc[i] + bf16_widen(x[i]);
  }
  std::vector<bf16> out(n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16{bf16_round_bits(acc[i])};
  return out;
}

bool same_bf16(const std::vector<bf16>& a, const std::vector<bf16>& b, std::int64_t offset = 0) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].bits != b[offset + i].bits) return false;
  return true;
}

TEST(Bf16Collectives, DeterministicSumsAreTheRankOrderFp32SumRoundedOnce) {
  MpiCommunicator comm(MPI_COMM_WORLD, ReduceMode::kDeterministic);
  const int P = comm.size(), me = comm.rank();
  const std::int64_t n = 1001;
  const Counts counts = even_split(n, P);
  const std::vector<bf16> input = bf16_rank_input(me, n, 1);
  const std::vector<bf16> reference = bf16_rank_order_sum(P, n, 1);
  std::vector<bf16> shard(counts[me]), reduced(n);
  comm.reduce_scatter(input, shard, counts).wait();
  comm.all_reduce(input, reduced).wait();
  EXPECT_TRUE(same_bf16(shard, reference, testing_util::prefix_offsets(counts)[me]));
  EXPECT_TRUE(same_bf16(reduced, reference));
  if (P >= 3) {  // rounding after each addition would differ somewhere
    int differing = 0;
    std::vector<bf16> x0 = bf16_rank_input(0, n, 1), x1 = bf16_rank_input(1, n, 1),
                      x2 = bf16_rank_input(2, n, 1);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint16_t each =
          bf16_round_bits(bf16_widen(bf16{bf16_round_bits(bf16_widen(x0[i]) + bf16_widen(x1[i]))}) +
                          bf16_widen(x2[i]));
      differing += P == 3 && each != reference[i].bits;
    }
    if (P == 3) {
      EXPECT_GT(differing, 0) << "the inputs do not tell one rounding from several";
    }
  }
  // Half the bytes of the same fp32 collectives, counted under bf16 only.
  const CommBytes bf16_bytes = comm.bytes(DType::kBF16);
  EXPECT_EQ(comm.bytes(DType::kF32), CommBytes{});
  std::vector<float> f(n, 1.0f), fshard(counts[me]), freduced(n);
  comm.reduce_scatter(f, fshard, counts).wait();
  comm.all_reduce(f, freduced).wait();
  EXPECT_EQ(comm.bytes(DType::kF32).reduce_scatter, 2 * bf16_bytes.reduce_scatter);
  EXPECT_EQ(comm.bytes(DType::kF32).all_reduce, 2 * bf16_bytes.all_reduce);
  EXPECT_EQ(bf16_bytes.reduce_scatter, 2 * (n - counts[me]));
  EXPECT_EQ(comm.bytes().total(), 3 * bf16_bytes.total());
}

TEST(Bf16Collectives, NativeSumsAreWithinEachAdditionsRounding) {
  MpiCommunicator comm(MPI_COMM_WORLD, ReduceMode::kNative);
  const int P = comm.size(), me = comm.rank();
  const std::int64_t n = 513;
  const std::vector<bf16> input = bf16_rank_input(me, n, 2);
  std::vector<bf16> reduced(n);
  comm.all_reduce(input, reduced).wait();
  // Exact inputs: small integers sum exactly in any order and rounding.
  std::vector<bf16> ints(n), int_sum(n);
  for (std::int64_t i = 0; i < n; ++i)
    ints[i] = bf16{bf16_round_bits(static_cast<float>(me + i % 7))};
  comm.all_reduce(ints, int_sum).wait();
  const std::vector<bf16> reference = bf16_rank_order_sum(P, n, 2);
  int far = 0, wrong = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    // P - 1 roundings of at most half an ulp of a magnitude below P: within P ulps of 2^0 scale.
    far += std::fabs(bf16_widen(reduced[i]) - bf16_widen(reference[i])) > P * 0x1p-7f * P;
    float expected = 0.0f;
    for (int q = 0; q < P; ++q) expected += static_cast<float>(q + i % 7);
    wrong += bf16_widen(int_sum[i]) != expected;
  }
  EXPECT_EQ(far, 0);
  EXPECT_EQ(wrong, 0);
  Counts counts = even_split(n, P);
  std::vector<bf16> shard(counts[me]);
  comm.reduce_scatter(ints, shard, counts).wait();
  for (std::int64_t i = 0; i < counts[me]; ++i)
    EXPECT_EQ(shard[i].bits, int_sum[testing_util::prefix_offsets(counts)[me] + i].bits);
}

TEST(Bf16Collectives, GathersMoveTheBitsAndHalfTheBytes) {
  MpiCommunicator comm(MPI_COMM_WORLD, ReduceMode::kDeterministic);
  const int P = comm.size(), me = comm.rank();
  Counts counts(P), displs(P);
  for (int r = 0; r < P; ++r) counts[r] = 3 + 5 * r;
  displs = testing_util::prefix_offsets(counts);
  const std::int64_t total = testing_util::sum(counts);
  std::vector<bf16> all(total);
  // NaN payloads and signed zeros travel as they are.
  for (std::int64_t i = 0; i < counts[me]; ++i)
    all[displs[me] + i] = bf16{static_cast<std::uint16_t>(0x7F81 + 257 * me + i)};
  comm.all_gather(std::span<const bf16>(all).subspan(displs[me], counts[me]), all, counts, displs)
      .wait();
  for (int r = 0; r < P; ++r)
    for (std::int64_t i = 0; i < counts[r]; ++i)
      EXPECT_EQ(all[displs[r] + i].bits, 0x7F81 + 257 * r + i);
  EXPECT_EQ(comm.bytes(DType::kBF16).all_gather, 2 * (P - 1) * counts[me]);

  std::vector<bf16> send(P), recv(P);
  for (int r = 0; r < P; ++r) send[r] = bf16{static_cast<std::uint16_t>(100 * me + r)};
  Counts ones(P, 1), iota(P);
  for (int r = 0; r < P; ++r) iota[r] = r;
  comm.all_to_all(send, ones, iota, recv, ones, iota).wait();
  for (int q = 0; q < P; ++q) EXPECT_EQ(recv[q].bits, 100 * q + me);
  EXPECT_EQ(comm.bytes(DType::kBF16).all_to_all, 2 * (P - 1));
}

TEST(Bf16Collectives, MixedDtypesAreRefusedBeforePosting) {
  MpiCommunicator comm(MPI_COMM_WORLD, ReduceMode::kDeterministic);
  std::vector<bf16> b(4);
  std::vector<float> f(4);
  try {
    comm.all_reduce(b, f);
    ADD_FAILURE() << "posted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Communicator::all_reduce: send is bf16, recv fp32");
  }
  EXPECT_EQ(comm.bytes(), CommBytes{});
}

}  // namespace
}  // namespace canzona::comm
