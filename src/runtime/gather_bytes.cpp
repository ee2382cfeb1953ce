#include "gather_bytes.h"

#include <cstdint>
#include <cstring>

#include "canzona/common/error.h"

namespace canzona::runtime {

std::vector<std::string> gather_bytes_to_root(comm::Communicator& world, const std::string& bytes) {
  const int size = world.size();
  const bool root = world.rank() == 0;
  const std::vector<std::uint64_t> sizes = world.all_gather_u64(bytes.size());
  auto floats_for = [](std::uint64_t n) { return static_cast<std::int64_t>((n + 3) / 4); };
  std::vector<float> send(static_cast<std::size_t>(floats_for(bytes.size())), 0.0f);
  if (!bytes.empty()) std::memcpy(send.data(), bytes.data(), bytes.size());
  std::vector<std::int64_t> send_counts(size, 0), send_displs(size, 0);
  std::vector<std::int64_t> recv_counts(size, 0), recv_displs(size, 0);
  send_counts[0] = static_cast<std::int64_t>(send.size());
  std::int64_t total = 0;
  if (root) {
    for (int q = 0; q < size; ++q) {
      recv_displs[q] = total;
      recv_counts[q] = floats_for(sizes[q]);
      total += recv_counts[q];
    }
  }
  std::vector<float> recv(static_cast<std::size_t>(total), 0.0f);
  world.all_to_all(send, send_counts, send_displs, recv, recv_counts, recv_displs).wait();
  std::vector<std::string> out;
  if (!root) return out;
  for (int q = 0; q < size; ++q) {
    std::string blob(sizes[q], '\0');
    if (!blob.empty()) std::memcpy(blob.data(), recv.data() + recv_displs[q], blob.size());
    out.push_back(std::move(blob));
  }
  return out;
}

std::string pack_doubles(const std::vector<double>& values) {
  std::string bytes(values.size() * sizeof(double), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<double> unpack_doubles(const std::string& bytes) {
  CANZONA_CHECK(bytes.size() % sizeof(double) == 0, "packed doubles of ", bytes.size(), " bytes");
  std::vector<double> values(bytes.size() / sizeof(double));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

}  // namespace canzona::runtime
