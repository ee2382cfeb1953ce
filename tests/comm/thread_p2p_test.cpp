// The thread backend's point-to-point messages (communicator.h, thread.h): ring exchanges with
// several tags posted out of order, same-tag messages matched in posting order, a 1F1B-like
// pipeline pair, byte counters, test(), size mismatches and bad peers or tags.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"
#include "p2p_patterns.h"

namespace canzona::comm {
namespace {

using p2p_test::payload;
using p2p_test::same_bytes;

const ReduceMode kP2pModes[] = {ReduceMode::kNative, ReduceMode::kDeterministic};

TEST(ThreadP2p, RingExchangeOnTheWorldAndOnPipelineGroups) {
  for (ReduceMode mode : kP2pModes) {
    // World of 6; PP groups of 4 (dp 1 x tp 2 x pp 4); a ring of one (the rank sends to itself).
    run_on_thread_grid({.dp = 2, .tp = 3, .pp = 1}, mode, [](Grid& grid) {
      for (int round = 0; round < 3; ++round) p2p_test::ring_exchange(grid.world(), round);
      p2p_test::ring_exchange(grid.pp(), 0);
    });
    run_on_thread_grid({.dp = 1, .tp = 2, .pp = 4}, mode, [](Grid& grid) {
      p2p_test::ring_exchange(grid.pp(), 0);
      p2p_test::ring_exchange(grid.tp(), 1);
    });
  }
}

TEST(ThreadP2p, SameTagMessagesMatchInPostingOrder) {
  run_on_thread_grid({.dp = 4, .tp = 1, .pp = 1}, ReduceMode::kNative,
                     [](Grid& grid) { p2p_test::same_tag_in_posting_order(grid.world()); });
}

TEST(ThreadP2p, OneFOneBBetweenTheTwoStagesOfEachPipeline) {
  // PP groups {0, 2} and {1, 3}: two pairs run the pattern at once.
  run_on_thread_grid({.dp = 2, .tp = 1, .pp = 2}, ReduceMode::kDeterministic,
                     [](Grid& grid) { p2p_test::one_f_one_b(grid.pp()); });
}

TEST(ThreadP2p, BadPeerOrTagThrowsBeforePosting) {
  run_on_thread_grid({.dp = 1, .tp = 1, .pp = 3}, ReduceMode::kNative, [](Grid& grid) {
    p2p_test::bad_peer_and_tag_throw(grid.pp());
    // Nothing was posted: the next exchange pairs up as if the bad calls never happened.
    p2p_test::ring_exchange(grid.pp(), 0);
  });
}

// The p2p counter grows by the bytes sent to other ranks; self-sends and receives count nothing,
// and the other counters only hold the ring's all_reduce of 2 floats (even_split(2, 3) =
// {1, 1, 0}: 4 * ((2 - c) + 2 c) bytes per round).
TEST(ThreadP2p, ByteCountersCountBytesSentToOtherRanks) {
  run_on_thread_grid({.dp = 3, .tp = 1, .pp = 1}, ReduceMode::kNative, [](Grid& grid) {
    Communicator& world = grid.world();
    const int me = world.rank();
    std::int64_t want = 0;
    for (int round = 0; round < 2; ++round) {
      // Sizes by hand (p2p_patterns.h): tag 0 empty, else 1 + (7 me + 3 tag + 11 round) % 300.
      const std::int64_t before = want;
      for (int tag : {5, 300, 32767}) want += 1 + (7 * me + 3 * tag + 11 * round) % 300;
      EXPECT_EQ(p2p_test::ring_exchange(world, round), want - before);
      EXPECT_EQ(world.bytes().p2p, want);
    }
    std::vector<std::byte> self(40), back(40);
    Request r = world.irecv(back, me, 9);
    world.isend(self, me, 9).wait();
    r.wait();
    const std::int64_t all_reduce = 2 * 4 * (2 + (me < 2 ? 1 : 0));
    EXPECT_EQ(world.bytes(), (CommBytes{.all_reduce = all_reduce, .p2p = want}));
    EXPECT_EQ(world.bytes().total(), all_reduce + want);
    EXPECT_EQ(grid.dp().bytes(), CommBytes{});
  });
}

// A receive's test() is false until its message is sent (rank 0 sends only after a barrier that
// rank 1 enters after testing), then true; isend is complete when posted.
TEST(ThreadP2p, TestSaysWhetherTheMessageHasBeenSent) {
  run_on_thread_grid({.dp = 2, .tp = 1, .pp = 1}, ReduceMode::kNative, [](Grid& grid) {
    Communicator& world = grid.world();
    std::vector<std::byte> data = payload(0, 1, 3, 0, 17), got(17);
    if (world.rank() == 1) {
      Request r = world.irecv(got, 0, 3);
      EXPECT_FALSE(r.test());
      world.barrier();
      while (!r.test()) {
      }
      r.wait();
      EXPECT_TRUE(same_bytes(got, data));
    } else {
      world.barrier();
      Request s = world.isend(data, 1, 3);
      EXPECT_TRUE(s.test());
      s.wait();
    }
  });
}

// An isend completes when its receive is posted (MPI_Issend), not when it is posted: the barriers
// order rank 1's irecv after rank 0's first test() and before its second.
TEST(ThreadP2p, SendCompletesWhenItsReceiveIsPosted) {
  run_on_thread_grid({.dp = 2, .tp = 1, .pp = 1}, ReduceMode::kNative, [](Grid& grid) {
    Communicator& world = grid.world();
    std::vector<std::byte> data = payload(0, 1, 5, 0, 9), got(9);
    if (world.rank() == 0) {
      Request s = world.isend(data, 1, 5);
      EXPECT_FALSE(s.test());
      world.barrier();
      world.barrier();
      EXPECT_TRUE(s.test());
      s.wait();
    } else {
      world.barrier();
      Request r = world.irecv(got, 0, 5);
      world.barrier();
      r.wait();
      EXPECT_TRUE(same_bytes(got, data));
    }
  });
}

// A receive buffer of another size than the message's fails in wait(), naming both sizes; the
// next message of that (peer, tag) is matched by the next receive as usual.
TEST(ThreadP2p, SizeMismatchIsAnErrorNamingBothSizes) {
  run_on_thread_grid({.dp = 2, .tp = 1, .pp = 1}, ReduceMode::kNative, [](Grid& grid) {
    Communicator& world = grid.world();
    if (world.rank() == 0) {
      const std::vector<std::byte> five = payload(0, 1, 3, 0, 5), seven = payload(0, 1, 3, 1, 7),
                                   six = payload(0, 1, 3, 2, 6);
      for (const auto* m : {&five, &seven, &six}) world.isend(*m, 1, 3).wait();
      return;
    }
    std::vector<std::byte> four(4), eight(8), six(6);
    const std::string prefix = "thread communicator: irecv from rank 0 with tag 3: ";
    try {
      world.irecv(four, 0, 3).wait();
      ADD_FAILURE() << "expected canzona::Error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                prefix + "receive buffer has 4 bytes, the matching isend sent 5");
    }
    try {
      world.irecv(eight, 0, 3).wait();
      ADD_FAILURE() << "expected canzona::Error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                prefix + "receive buffer has 8 bytes, the matching isend sent 7");
    }
    world.irecv(six, 0, 3).wait();
    EXPECT_TRUE(same_bytes(six, payload(0, 1, 3, 2, 6)));
  });
}

}  // namespace
}  // namespace canzona::comm
