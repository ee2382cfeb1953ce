// Argument validation shared by every Communicator backend.
#include "canzona/comm/communicator.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

template <typename... Args>
void require(bool ok, const char* call, const Args&... what) {
  if (!ok) throw Error(str("Communicator::", call, ": ", what...));
}

bool overlap(ConstTypedSpan a, ConstTypedSpan b) {
  if (a.empty() || b.empty()) return false;
  const std::less<const std::byte*> less;
  return less(a.data(), b.data() + b.size_bytes()) && less(b.data(), a.data() + a.size_bytes());
}

void check_dtypes(const char* call, ConstTypedSpan send, ConstTypedSpan recv) {
  require(send.dtype() == recv.dtype(), call, "send is ", to_string(send.dtype()), ", recv ",
          to_string(recv.dtype()));
}

// Checks one count array against `size` ranks; returns the sum of the counts.
std::int64_t check_counts(const char* call, const char* name, std::span<const std::int64_t> counts,
                          int size) {
  require(std::ssize(counts) == size, call, name, " has ", counts.size(), " entries for ", size,
          " ranks");
  std::int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    require(counts[r] >= 0, call, name, "[", r, "] = ", counts[r], " is negative");
    total += counts[r];
  }
  return total;
}

// Checks counts and displacements against `size` ranks and a buffer of `buffer_size` elements;
// with `disjoint`, non-empty segments must not overlap each other.
void check_segments(const char* call, const char* name, std::span<const std::int64_t> counts,
                    std::span<const std::int64_t> displs, std::int64_t buffer_size, int size,
                    bool disjoint) {
  check_counts(call, name, counts, size);
  require(std::ssize(displs) == size, call, name, " displacements have ", displs.size(),
          " entries for ", size, " ranks");
  std::vector<std::pair<std::int64_t, std::int64_t>> segments;  // {displ, count}, non-empty only
  for (int r = 0; r < size; ++r) {
    require(displs[r] >= 0 && displs[r] + counts[r] <= buffer_size, call, name, " segment of rank ",
            r, " {", displs[r], ", ", counts[r], "} is outside the buffer of ", buffer_size,
            " elements");
    if (counts[r] > 0) segments.emplace_back(displs[r], counts[r]);
  }
  if (!disjoint) return;
  std::sort(segments.begin(), segments.end());
  for (std::size_t i = 1; i < segments.size(); ++i) {
    require(segments[i - 1].first + segments[i - 1].second <= segments[i].first, call, name,
            " segments overlap at element ", segments[i].first);
  }
}

}  // namespace

CommBytes& CommBytes::operator+=(const CommBytes& other) {
  reduce_scatter += other.reduce_scatter;
  all_gather += other.all_gather;
  all_reduce += other.all_reduce;
  all_to_all += other.all_to_all;
  p2p += other.p2p;
  return *this;
}

CommBytes operator-(CommBytes a, const CommBytes& b) {
  a.reduce_scatter -= b.reduce_scatter;
  a.all_gather -= b.all_gather;
  a.all_reduce -= b.all_reduce;
  a.all_to_all -= b.all_to_all;
  a.p2p -= b.p2p;
  return a;
}

CommBytes Communicator::bytes() const {
  CommBytes all = untyped_;
  for (const CommBytes& b : by_dtype_) all += b;
  return all;
}

void Communicator::reset_bytes() {
  untyped_ = CommBytes{};
  for (CommBytes& b : by_dtype_) b = CommBytes{};
}

std::vector<std::int64_t> even_split(std::int64_t n, int parts) {
  CANZONA_CHECK(n >= 0 && parts >= 1, "even_split(", n, ", ", parts, ")");
  std::vector<std::int64_t> counts(parts, n / parts);
  for (int p = 0; p < n % parts; ++p) ++counts[p];
  return counts;
}

Request Communicator::reduce_scatter(ConstTypedSpan send, TypedSpan recv,
                                     std::span<const std::int64_t> counts) {
  const char* call = "reduce_scatter";
  check_dtypes(call, send, recv);
  const std::int64_t total = check_counts(call, "counts", counts, size());
  require(std::ssize(send) == total, call, "send has ", send.size(), " elements, counts sum to ",
          total);
  require(std::ssize(recv) == counts[rank()], call, "recv has ", recv.size(), " elements, counts[",
          rank(), "] = ", counts[rank()]);
  require(!overlap(send, recv), call, "send and recv overlap");
  return do_reduce_scatter(send, recv, counts);
}

Request Communicator::all_gather(ConstTypedSpan send, TypedSpan recv,
                                 std::span<const std::int64_t> counts,
                                 std::span<const std::int64_t> displs) {
  const char* call = "all_gather";
  check_dtypes(call, send, recv);
  check_segments(call, "counts", counts, displs, std::ssize(recv), size(), /*disjoint=*/true);
  const std::int64_t own = counts[rank()];
  require(std::ssize(send) == own, call, "send has ", send.size(), " elements, counts[", rank(),
          "] = ", own);
  const bool in_place =
      own > 0 && send.data() == recv.data() + displs[rank()] * dtype_bytes(recv.dtype());
  require(in_place || !overlap(send, recv), call,
          "send overlaps recv without being this rank's own segment");
  return do_all_gather(send, recv, counts, displs);
}

Request Communicator::all_to_all(ConstTypedSpan send, std::span<const std::int64_t> send_counts,
                                 std::span<const std::int64_t> send_displs, TypedSpan recv,
                                 std::span<const std::int64_t> recv_counts,
                                 std::span<const std::int64_t> recv_displs) {
  const char* call = "all_to_all";
  check_dtypes(call, send, recv);
  check_segments(call, "send_counts", send_counts, send_displs, std::ssize(send), size(),
                 /*disjoint=*/false);
  check_segments(call, "recv_counts", recv_counts, recv_displs, std::ssize(recv), size(),
                 /*disjoint=*/true);
  require(!overlap(send, recv), call, "send and recv overlap");
  return do_all_to_all(send, send_counts, send_displs, recv, recv_counts, recv_displs);
}

Request Communicator::all_reduce(ConstTypedSpan send, TypedSpan recv) {
  const char* call = "all_reduce";
  check_dtypes(call, send, recv);
  require(send.size() == recv.size(), call, "send has ", send.size(), " elements, recv ",
          recv.size());
  const bool in_place = send.data() == recv.data();
  require(in_place || !overlap(send, recv), call,
          "send and recv overlap without being the same span");
  return do_all_reduce(send, recv);
}

Request Communicator::isend(std::span<const std::byte> data, int peer, int tag) {
  CANZONA_CHECK(peer >= 0 && peer < size(), "Communicator::isend: peer ", peer, " is outside [0, ",
                size(), ")");
  CANZONA_CHECK(tag >= 0 && tag <= kMaxTag, "Communicator::isend: tag ", tag, " is outside [0, ",
                kMaxTag, "]");
  return do_isend(data, peer, tag);
}

Request Communicator::irecv(std::span<std::byte> data, int peer, int tag) {
  CANZONA_CHECK(peer >= 0 && peer < size(), "Communicator::irecv: peer ", peer, " is outside [0, ",
                size(), ")");
  CANZONA_CHECK(tag >= 0 && tag <= kMaxTag, "Communicator::irecv: tag ", tag, " is outside [0, ",
                kMaxTag, "]");
  return do_irecv(data, peer, tag);
}

Request Communicator::do_isend(std::span<const std::byte>, int, int) {
  throw Error("Communicator::isend: this backend has no point-to-point");
}

Request Communicator::do_irecv(std::span<std::byte>, int, int) {
  throw Error("Communicator::irecv: this backend has no point-to-point");
}

ReduceMode parse_reduce_mode(const std::string& name) {
  if (name == "deterministic") return ReduceMode::kDeterministic;
  if (name == "native") return ReduceMode::kNative;
  throw UsageError(str("--reduce-mode must be deterministic or native (got '", name, "')"));
}

const char* to_string(ReduceMode mode) {
  return mode == ReduceMode::kDeterministic ? "deterministic" : "native";
}

}  // namespace canzona::comm
