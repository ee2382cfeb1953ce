// Control data to world rank 0 (run statistics, traces, --verify digests), carried by the
// communicator's byte gather (comm::Communicator::all_gather_bytes).
#pragma once

#include <string>
#include <vector>

#include "canzona/comm/communicator.h"

namespace canzona::runtime {

// Collective over `world`: returns every rank's `bytes`, indexed by rank, on rank 0; an empty
// vector elsewhere.
std::vector<std::string> gather_bytes_to_root(comm::Communicator& world, const std::string& bytes);

}  // namespace canzona::runtime
