// The thread backend's failure paths: a rank that throws, or ranks that post mismatched
// collectives, make every waiting rank throw canzona::Error instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

const GridShape k2x3{/*dp=*/2, /*tp=*/3, /*pp=*/1};

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

TEST(ThreadCommGrid, BadShapeIsAUsageError) {
  EXPECT_THROW(run_on_thread_grid(GridShape{0, 2, 1}, ReduceMode::kNative, [](Grid&) {}),
               UsageError);
}

}  // namespace
}  // namespace canzona::comm
