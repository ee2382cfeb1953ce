// comm_grid_check DP TP PP: builds the MPI grid and prints each rank's coordinates. A fatal error
// (e.g. world size != DP x TP x PP) goes through abort_all: one line naming the rank, every rank
// exits non-zero. Used by the world-size mismatch test.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"

int main(int argc, char** argv) {
  using namespace canzona::comm;
  MpiSession session(&argc, &argv);
  if (argc != 4) abort_all("usage: comm_grid_check DP TP PP", 2);
  try {
    auto grid = make_mpi_grid(std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]),
                              ReduceMode::kNative);
    const GridCoord& c = grid->coord();
    std::printf("rank %d: pp %d dp %d tp %d\n", grid->world().rank(), c.pp, c.dp, c.tp);
  } catch (const canzona::UsageError& e) {
    abort_all(e.what(), 2);
  } catch (const std::exception& e) {
    abort_all(e.what(), 1);
  }
  return 0;
}
