// abort_agreed (session.h).
#include <mpi.h>

#include <chrono>
#include <thread>

#include "canzona/comm/mpi.h"
#include "canzona/runtime/session.h"

namespace canzona::runtime {

void abort_agreed(const std::string& message, int code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int rank = 0;
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(kAgreedAbortWaitMs));
  comm::abort_all(message, code);
}

}  // namespace canzona::runtime
