// Communicator contract without MPI: argument validation, byte counters, Request lifetime.
#include "canzona/comm/communicator.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

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
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> bytes) override {
    return std::vector<std::vector<std::byte>>(size_, {bytes.begin(), bytes.end()});
  }
  int posted = 0;
  int waited = 0;

 protected:
  Request do_reduce_scatter(ConstTypedSpan, TypedSpan, std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_gather(ConstTypedSpan, TypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_to_all(ConstTypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>, TypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>) override {
    return post();
  }
  Request do_all_reduce(ConstTypedSpan, TypedSpan) override { return post(); }

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

TEST(EvenSplit, FirstRemainderPartsGetOneMore) {
  EXPECT_EQ(even_split(10, 4), (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(even_split(2, 3), (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_EQ(even_split(0, 2), (std::vector<std::int64_t>{0, 0}));
  EXPECT_THROW(even_split(-1, 2), Error);
  EXPECT_THROW(even_split(4, 0), Error);
}

TEST(CommBytes, TotalSumsTheKindsAndArithmeticIsPerKind) {
  CommBytes a{
      .reduce_scatter = 1, .all_gather = 20, .all_reduce = 300, .all_to_all = 4000, .p2p = 50000};
  EXPECT_EQ(a.total(), 54321);
  const CommBytes b{
      .reduce_scatter = 1, .all_gather = 2, .all_reduce = 3, .all_to_all = 4, .p2p = 5};
  EXPECT_EQ(a - b, (CommBytes{.reduce_scatter = 0,
                              .all_gather = 18,
                              .all_reduce = 297,
                              .all_to_all = 3996,
                              .p2p = 49995}));
  a += b;
  EXPECT_EQ(a, (CommBytes{.reduce_scatter = 2,
                          .all_gather = 22,
                          .all_reduce = 303,
                          .all_to_all = 4004,
                          .p2p = 50005}));
}

// Counting belongs to the backend (it counts what it hands its transport); the public methods
// only validate, so a backend that sends nothing counts nothing.
TEST(CommBytes, PublicCallsDoNotCountByThemselves) {
  FakeCommunicator comm(1, 3);
  std::vector<float> full(6), shard(2);
  const std::vector<std::int64_t> counts = {2, 2, 2}, displs = {0, 2, 4};
  comm.reduce_scatter(full, shard, counts).wait();
  comm.all_gather(shard, full, counts, displs).wait();
  comm.all_to_all(full, counts, displs, std::span<float>(shard.data(), 0),
                  std::vector<std::int64_t>{0, 0, 0}, std::vector<std::int64_t>{0, 0, 0})
      .wait();
  comm.all_reduce(full, full).wait();
  EXPECT_EQ(comm.posted, 4);
  EXPECT_EQ(comm.bytes(), CommBytes{});
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

// A backend without point-to-point (the default do_isend / do_irecv) says so; bad peers and tags
// are refused before the backend is reached.
TEST(CommunicatorValidation, PointToPointArgumentsAndBackendsWithoutIt) {
  FakeCommunicator comm(1, 3);
  std::vector<std::byte> data(4);
  EXPECT_THROW(comm.isend(data, 0, 0), Error);
  EXPECT_THROW(comm.irecv(data, 2, Communicator::kMaxTag), Error);
  try {
    comm.isend(data, 3, 0);
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Communicator::isend: peer 3 is outside [0, 3)"),
              std::string::npos)
        << e.what();
  }
  try {
    comm.irecv(data, 0, -2);
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Communicator::irecv: tag -2 is outside [0, 32767]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(comm.posted, 0);
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
