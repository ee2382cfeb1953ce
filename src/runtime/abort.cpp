// abort_agreed (session.h).
#include <chrono>
#include <thread>

#include "canzona/comm/mpi.h"
#include "canzona/runtime/session.h"

namespace canzona::runtime {

void abort_agreed(const std::string& message, int code) {
  if (comm::world_rank_if_initialized().value_or(0) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(kAgreedAbortWaitMs));
  comm::abort_all(message, code);
}

}  // namespace canzona::runtime
