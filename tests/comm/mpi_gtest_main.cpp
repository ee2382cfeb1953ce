// main() for GoogleTest binaries run under mpirun. Every rank runs every test in the same order
// (tests post collectives, so they must). Rank 0 prints GoogleTest's usual output; every rank
// prints its own failures as "[rank R] FAILED ..." lines and a summary line, and every rank exits
// non-zero when any rank had a failure, so no failure is hidden behind another rank's output.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "canzona/comm/mpi.h"

namespace {

class RankReporter final : public testing::EmptyTestEventListener {
 public:
  explicit RankReporter(int rank) : rank_(rank) {}

  // The test's name is remembered here: OnTestPartResult runs under GoogleTest's lock, so it must
  // not call back into UnitTest (current_test_info() would deadlock).
  void OnTestStart(const testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }

  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

  void OnTestProgramEnd(const testing::UnitTest& unit) override {
    std::fprintf(stderr, "[rank %d] %d tests ran, %d failed\n", rank_, unit.test_to_run_count(),
                 unit.failed_test_count());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  canzona::comm::MpiSession session(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankReporter(rank));

  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && !failed) std::fprintf(stderr, "[rank %d] another rank failed\n", rank);
  return any_failed;
}
