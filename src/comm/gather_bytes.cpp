// Control data to rank 0 over the byte gather (communicator.h).
#include <span>

#include "canzona/comm/communicator.h"

namespace canzona::comm {

std::vector<std::string> gather_bytes_to_root(Communicator& world, const std::string& bytes) {
  const std::vector<std::vector<std::byte>> all =
      world.all_gather_bytes(std::as_bytes(std::span(bytes)));
  std::vector<std::string> out;
  if (world.rank() != 0) return out;
  for (const std::vector<std::byte>& blob : all)
    out.emplace_back(reinterpret_cast<const char*>(blob.data()), blob.size());
  return out;
}

}  // namespace canzona::comm
