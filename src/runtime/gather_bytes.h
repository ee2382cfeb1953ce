// Control data to world rank 0: raw bytes carried as floats by one All-to-All (MPI moves the bit
// patterns unchanged between processes of one machine type), after an all_gather_u64 of sizes.
#pragma once

#include <string>
#include <vector>

#include "canzona/comm/communicator.h"

namespace canzona::runtime {

// Collective over `world`: returns every rank's `bytes`, indexed by rank, on rank 0; an empty
// vector elsewhere.
std::vector<std::string> gather_bytes_to_root(comm::Communicator& world, const std::string& bytes);

// Doubles <-> bytes for gather_bytes_to_root.
std::string pack_doubles(const std::vector<double>& values);
std::vector<double> unpack_doubles(const std::string& bytes);

}  // namespace canzona::runtime
