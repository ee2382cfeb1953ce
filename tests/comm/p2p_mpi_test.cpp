// MpiCommunicator's point-to-point messages (communicator.h, mpi_communicator.h) at any world size
// (ctest runs np 1..4): ring exchanges with several tags posted out of order and collectives on
// the same communicator in between, same-tag messages matched in posting order, a 1F1B-like
// pipeline pair over PP groups, byte counters, size mismatches and bad peers or tags.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"
#include "mpi_communicator.h"
#include "p2p_patterns.h"

namespace canzona::comm {
namespace {

class MpiP2p : public testing::TestWithParam<ReduceMode> {
 protected:
  MpiCommunicator comm_{MPI_COMM_WORLD, GetParam()};
  int P = comm_.size();
  int me = comm_.rank();
};

TEST_P(MpiP2p, RingExchangeWithSeveralTagsPostedOutOfOrder) {
  std::int64_t sent = 0;
  for (int round = 0; round < 3; ++round) sent += p2p_test::ring_exchange(comm_, round);
  // By hand (p2p_patterns.h): tag 0 empty, tag t else 1 + (7 me + 3 t + 11 round) % 300 bytes;
  // nothing counted when the ring is this rank alone.
  std::int64_t want = 0;
  for (int round = 0; round < 3; ++round)
    for (int tag : {5, 300, 32767}) want += 1 + (7 * me + 3 * tag + 11 * round) % 300;
  EXPECT_EQ(sent, P == 1 ? 0 : want);
  EXPECT_EQ(comm_.bytes().p2p, P == 1 ? 0 : want);
}

TEST_P(MpiP2p, SameTagMessagesMatchInPostingOrder) {
  p2p_test::same_tag_in_posting_order(comm_);
}

TEST_P(MpiP2p, OneFOneBBetweenTheTwoStagesOfEachPipeline) {
  if (P % 2 != 0) GTEST_SKIP() << "needs two pipeline stages";
  auto grid = make_mpi_grid({.dp = P / 2, .tp = 1, .pp = 2}, GetParam());
  p2p_test::one_f_one_b(grid->pp());
  // The embedding group of two stages is the PP group's pair again.
  p2p_test::one_f_one_b(grid->embedding(), 8, 1);
}

TEST_P(MpiP2p, BadPeerOrTagThrowsBeforePosting) {
  p2p_test::bad_peer_and_tag_throw(comm_);
  p2p_test::ring_exchange(comm_, 0);  // nothing was posted: the next exchange pairs up as usual
}

// A receive buffer larger than the message fails in wait() naming both sizes (from the status); a
// smaller one fails with MPI's truncation, naming the buffer size. The next message of that
// (peer, tag) is matched by the next receive as usual.
TEST_P(MpiP2p, SizeMismatchIsAnError) {
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const std::vector<std::byte> five = p2p_test::payload(me, next, 20, 0, 5),
                               seven = p2p_test::payload(me, next, 20, 1, 7),
                               six = p2p_test::payload(me, next, 20, 2, 6);
  std::vector<std::byte> eight(8), four(4), got(6);
  Request small = comm_.irecv(eight, prev, 20);
  Request large = comm_.irecv(four, prev, 20);
  Request fine = comm_.irecv(got, prev, 20);
  std::vector<Request> sends;
  for (const auto* m : {&five, &seven, &six}) sends.push_back(comm_.isend(*m, next, 20));
  const std::string prefix = "irecv from rank " + std::to_string(prev) + " with tag 20: ";
  try {
    small.wait();
    ADD_FAILURE() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              prefix + "receive buffer has 8 bytes, the matching isend sent 5");
  }
  try {
    large.wait();
    ADD_FAILURE() << "expected canzona::Error";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        prefix + "the message is larger than the receive buffer of 4 bytes (MPI_ERR_TRUNCATE)");
  }
  fine.wait();
  for (Request& r : sends) r.wait();
  EXPECT_TRUE(p2p_test::same_bytes(got, p2p_test::payload(prev, me, 20, 2, 6)));
}

INSTANTIATE_TEST_SUITE_P(BothModes, MpiP2p,
                         testing::Values(ReduceMode::kNative, ReduceMode::kDeterministic),
                         [](const testing::TestParamInfo<ReduceMode>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace canzona::comm
