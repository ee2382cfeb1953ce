// Communicator contract without MPI: argument validation, byte counters, Request lifetime.
#include "canzona/comm/communicator.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

// Counts waits of the requests it hands out; the operation itself does nothing.
class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override {}
  std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) override {
    return std::vector<std::uint64_t>(size_, value);
  }
  int posted = 0;
  int waited = 0;

 protected:
  Request do_reduce_scatter(std::span<const float>, std::span<float>,
                            std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_gather(std::span<const float>, std::span<float>, std::span<const std::int64_t>,
                        std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_to_all(std::span<const float>, std::span<const std::int64_t>,
                        std::span<const std::int64_t>, std::span<float>,
                        std::span<const std::int64_t>, std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_reduce(std::span<const float>, std::span<float>) override { return post(); }

 private:
  class CountingImpl final : public Request::Impl {
   public:
    explicit CountingImpl(int& waited) : waited_(waited) {}
    void wait() override { ++waited_; }
    bool test() override { return true; }

   private:
    int& waited_;
  };
  Request post() {
    ++posted;
    return Request(std::make_unique<CountingImpl>(waited));
  }
  int rank_;
  int size_;
};

class ThrowingImpl final : public Request::Impl {
 public:
  void wait() override { throw Error("backend failed"); }
  bool test() override { return false; }
};

std::int64_t sum(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

TEST(EvenSplit, FirstRemainderPartsGetOneMore) {
  EXPECT_EQ(even_split(10, 4), (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(even_split(2, 3), (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_EQ(even_split(0, 2), (std::vector<std::int64_t>{0, 0}));
  EXPECT_THROW(even_split(-1, 2), Error);
  EXPECT_THROW(even_split(4, 0), Error);
}

TEST(CommBytes, CountsBytesOtherRanksNeedPerKind) {
  // counts with a zero, on every rank of P = 4.
  const std::vector<std::int64_t> counts = {3, 0, 5, 2};
  const std::int64_t total = sum(counts);
  for (int rank = 0; rank < 4; ++rank) {
    FakeCommunicator comm(rank, 4);
    std::vector<float> full(total), shard(counts[rank]);
    comm.reduce_scatter(full, shard, counts).wait();
    EXPECT_EQ(comm.bytes().reduce_scatter, 4 * (total - counts[rank])) << "rank " << rank;

    const std::vector<std::int64_t> displs = {0, 3, 3, 8};
    comm.all_gather(shard, full, counts, displs).wait();
    EXPECT_EQ(comm.bytes().all_gather, 4 * 3 * counts[rank]) << "rank " << rank;

    std::vector<float> vec(10);  // even_split(10, 4) = {3, 3, 2, 2}
    comm.all_reduce(vec, vec).wait();
    const std::int64_t own = even_split(10, 4)[rank];
    EXPECT_EQ(comm.bytes().all_reduce, 4 * ((10 - own) + 3 * own)) << "rank " << rank;

    const std::vector<std::int64_t> send_counts = {1, 2, 0, 4};
    const std::vector<std::int64_t> send_displs = {0, 1, 3, 3};
    std::vector<float> send(7), recv(7);
    comm.all_to_all(send, send_counts, send_displs, recv, send_counts, send_displs).wait();
    EXPECT_EQ(comm.bytes().all_to_all, 4 * (7 - send_counts[rank])) << "rank " << rank;
    EXPECT_EQ(comm.bytes().total(), comm.bytes().reduce_scatter + comm.bytes().all_gather +
                                        comm.bytes().all_reduce + comm.bytes().all_to_all);
  }
}

TEST(CommBytes, AllReduceCountsTwiceAReduceScatterSummedOverRanks) {
  const int P = 4;
  const std::vector<std::int64_t> counts = even_split(1000, P);
  CommBytes total;
  for (int rank = 0; rank < P; ++rank) {
    FakeCommunicator comm(rank, P);
    std::vector<float> full(1000), shard(counts[rank]);
    comm.reduce_scatter(full, shard, counts).wait();
    comm.all_reduce(full, full).wait();
    total += comm.bytes();
  }
  EXPECT_EQ(total.reduce_scatter, 4 * (P - 1) * 1000);
  EXPECT_EQ(total.all_reduce, 2 * total.reduce_scatter);
  CommBytes diff = total - total;
  EXPECT_EQ(diff, CommBytes{});
}

TEST(CommunicatorValidation, BadArgumentsThrowBeforePosting) {
  FakeCommunicator comm(1, 3);
  std::vector<float> a(6), b(6);
  const std::vector<std::int64_t> counts = {2, 2, 2};
  const std::span<float> shard(b.data(), 2);
  EXPECT_THROW(comm.reduce_scatter(a, shard, std::vector<std::int64_t>{2, 2}), Error);
  EXPECT_THROW(comm.reduce_scatter(a, shard, std::vector<std::int64_t>{2, 4, 0}), Error);
  EXPECT_THROW(comm.reduce_scatter(a, shard, std::vector<std::int64_t>{2, 2, -2}), Error);
  EXPECT_THROW(comm.reduce_scatter(std::span<const float>(a.data(), 5), shard, counts), Error);
  EXPECT_THROW(comm.reduce_scatter(a, std::span<float>(a.data() + 2, 2), counts), Error);
  EXPECT_THROW(comm.all_gather(std::span<const float>(a.data(), 2), b, counts,
                               std::vector<std::int64_t>{0, 3, 5}),
               Error);  // rank 2's segment runs past the end
  EXPECT_THROW(comm.all_gather(std::span<const float>(a.data(), 2), b, counts,
                               std::vector<std::int64_t>{0, 1, 4}),
               Error);  // segments overlap
  EXPECT_THROW(comm.all_gather(std::span<const float>(b.data() + 1, 2), b, counts,
                               std::vector<std::int64_t>{0, 2, 4}),
               Error);  // overlaps recv, but not as the own segment
  EXPECT_THROW(comm.all_reduce(a, std::span<float>(b.data(), 5)), Error);
  EXPECT_EQ(comm.posted, 0);
  EXPECT_EQ(comm.bytes(), CommBytes{});
}

TEST(CommunicatorValidation, InPlaceAllGatherAndAllReduceAreAccepted) {
  FakeCommunicator comm(1, 3);
  std::vector<float> buf(6);
  const std::vector<std::int64_t> counts = {2, 2, 2}, displs = {0, 2, 4};
  EXPECT_NO_THROW(comm.all_gather(std::span<const float>(buf.data() + 2, 2), buf, counts, displs));
  EXPECT_NO_THROW(comm.all_reduce(buf, buf));
  EXPECT_THROW(
      comm.all_reduce(std::span<const float>(buf.data() + 1, 5), std::span<float>(buf.data(), 5)),
      Error);
  EXPECT_EQ(comm.posted, 2);
}

TEST(Request, AbandoningAPendingRequestWaitsForIt) {
  FakeCommunicator comm(0, 1);
  std::vector<float> buf(4);
  {
    Request r = comm.all_reduce(buf, buf);
    EXPECT_TRUE(r.pending());
  }
  EXPECT_EQ(comm.waited, 1);
  Request r = comm.all_reduce(buf, buf);
  r = comm.all_reduce(buf, buf);  // overwriting waits for the first
  EXPECT_EQ(comm.waited, 2);
  Request moved = std::move(r);
  EXPECT_FALSE(r.pending());
  r.wait();  // empty: no-op
  moved.wait();
  moved.wait();  // waited once only
  EXPECT_EQ(comm.waited, 3);
  EXPECT_FALSE(moved.pending());
}

TEST(Request, WaitRethrowsButTheDestructorDoesNot) {
  Request r(std::make_unique<ThrowingImpl>());
  EXPECT_THROW(r.wait(), Error);
  EXPECT_FALSE(r.pending());
  testing::internal::CaptureStderr();
  { Request abandoned(std::make_unique<ThrowingImpl>()); }
  EXPECT_NE(testing::internal::GetCapturedStderr().find("backend failed"), std::string::npos);
}

}  // namespace
}  // namespace canzona::comm
