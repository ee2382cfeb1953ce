// The thread backend's failure paths: a rank that throws, or ranks that post mismatched
// collectives, make every waiting rank throw canzona::Error instead of hanging; so does a rank
// that throws before sending a message another rank waits to receive.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

const ParallelDims k2x3{.dp = 2, .tp = 3, .pp = 1};

TEST(ThreadComm, FailingRankMakesTheOthersFailInsteadOfHanging) {
  std::atomic<int> others_failed{0};
  const auto run = [&] {
    run_on_thread_grid(k2x3, ReduceMode::kDeterministic, [&](Grid& grid) {
      std::vector<float> data(3, 1.0f);
      Request pending = grid.world().all_reduce(data, data);
      if (grid.world().rank() == 1) throw std::runtime_error("rank 1 gave up");
      try {
        grid.world().barrier();  // rank 1 never posts it
      } catch (const Error&) {
        ++others_failed;
        throw;
      }
    });
  };
  try {
    run();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 gave up");
  }
  EXPECT_EQ(others_failed.load(), 5);
}

TEST(ThreadComm, MismatchedCollectivesThrowOnEveryRank) {
  std::atomic<int> failed{0};
  EXPECT_THROW(run_on_thread_grid(k2x3, ReduceMode::kNative,
                                  [&](Grid& grid) {
                                    try {
                                      if (grid.tp().rank() == 0) {
                                        grid.tp().barrier();
                                      } else {
                                        grid.tp().all_gather_u64(1);
                                      }
                                    } catch (const Error&) {
                                      ++failed;
                                      throw;
                                    }
                                  }),
               Error);
  EXPECT_EQ(failed.load(), 6);
  failed = 0;
  EXPECT_THROW(run_on_thread_grid(k2x3, ReduceMode::kDeterministic,
                                  [&](Grid& grid) {
                                    std::vector<float> data(grid.dp().rank() == 0 ? 3 : 4);
                                    try {
                                      grid.dp().all_reduce(data, data).wait();
                                    } catch (const Error&) {
                                      ++failed;
                                      throw;
                                    }
                                  }),
               Error);
  EXPECT_EQ(failed.load(), 6);
}

// A receive whose sender fails before sending throws instead of hanging, naming the sender.
TEST(ThreadComm, ReceiveFromAFailedRankThrowsInsteadOfHanging) {
  std::atomic<int> receivers_failed{0};
  try {
    run_on_thread_grid(ParallelDims{.dp = 3}, ReduceMode::kNative, [&](Grid& grid) {
      Communicator& world = grid.world();
      std::vector<std::byte> data(8);
      if (world.rank() == 1) throw std::runtime_error("rank 1 gave up");
      try {
        world.irecv(data, 1, 4).wait();
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1 of 3 was destroyed before sending message #0 "
                                             "with tag 4 that rank " +
                                             std::to_string(world.rank()) + " waits for"),
                  std::string::npos)
            << e.what();
        ++receivers_failed;
        throw;
      }
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 gave up");
  }
  EXPECT_EQ(receivers_failed.load(), 2);
}

// A failing rank abandons its pending receive while unwinding: that wait returns at once (its
// peer never sends: it waits in a barrier for the failing rank), so the failing rank's Grid goes
// and the peer's barrier fails instead of both hanging.
TEST(ThreadComm, PendingReceiveOfAFailingRankDoesNotBlockItsUnwinding) {
  std::atomic<int> peer_failed{0};
  try {
    run_on_thread_grid(ParallelDims{.dp = 2}, ReduceMode::kNative, [&](Grid& grid) {
      Communicator& world = grid.world();
      if (world.rank() == 0) {
        std::vector<std::byte> data(8);
        Request pending = world.irecv(data, 1, 0);
        throw std::runtime_error("rank 0 gave up");
      }
      try {
        world.barrier();
      } catch (const Error&) {
        ++peer_failed;
        throw;
      }
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 0 gave up");
  }
  EXPECT_EQ(peer_failed.load(), 1);
}

TEST(ThreadCommGrid, BadShapeIsAUsageError) {
  EXPECT_THROW(run_on_thread_grid(ParallelDims{.dp = 0, .tp = 2, .pp = 1}, ReduceMode::kNative,
                                  [](Grid&) {}),
               UsageError);
}

}  // namespace
}  // namespace canzona::comm
