// comm_grid_check DP TP PP [abort | end | end-one]: builds the MPI grid and prints each rank's
// coordinates. A fatal error (e.g. world size != DP x TP x PP) ends the job:
//   abort    (default) through abort_all: one line naming the rank, MPI_Abort;
//   end      through end_job: every rank raised it, so one line "canzona: error: ..." from rank 0,
//            MPI finalized, every rank exits 2, no abort;
//   end-one  no grid: world rank 1 calls end_job with "only rank 1 failed" while the others wait
//            in a barrier, so end_job must fall back to the abort (naming rank 1) and not hang.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"

int main(int argc, char** argv) {
  using namespace canzona::comm;
  MpiSession session(&argc, &argv);
  if (argc != 4 && argc != 5) abort_all("usage: comm_grid_check DP TP PP [abort|end|end-one]", 2);
  const char* mode = argc == 5 ? argv[4] : "abort";
  const bool end = std::strcmp(mode, "abort") != 0;
  if (std::strcmp(mode, "end-one") == 0) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) end_job("only rank 1 failed", 2);
    MPI_Barrier(MPI_COMM_WORLD);  // never completes: rank 1 does not come
    return 0;
  }
  try {
    const ParallelDims dims{
        .dp = std::atoi(argv[1]), .tp = std::atoi(argv[2]), .pp = std::atoi(argv[3])};
    auto grid = make_mpi_grid(dims, ReduceMode::kNative);
    const GridCoord& c = grid->coord();
    std::printf("rank %d: pp %d dp %d tp %d\n", grid->world().rank(), c.pp, c.dp, c.tp);
  } catch (const canzona::UsageError& e) {
    end ? end_job(e.what(), 2) : abort_all(e.what(), 2);
  } catch (const std::exception& e) {
    end ? end_job(e.what(), 1) : abort_all(e.what(), 1);
  }
  return 0;
}
