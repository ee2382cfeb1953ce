#include "mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "canzona/common/error.h"
#include "mpi_internal.h"

namespace canzona::comm {
namespace detail {

void check_mpi(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = rc;
  MPI_Error_class(rc, &error_class);
  throw Error(str(call, " failed: ", std::string_view(text, length), " (MPI error class ",
                  error_class, ")"));
}

int to_mpi_int(std::int64_t value, const char* call) {
  if (value > INT_MAX)
    throw Error(str(call, ": count or displacement ", value, " exceeds INT_MAX"));
  return static_cast<int>(value);
}

void append_mpi_ints(std::span<const std::int64_t> values, const char* call,
                     std::vector<int>& out) {
  for (std::int64_t v : values) out.push_back(to_mpi_int(v, call));
}

const void* send_ptr(ConstTypedSpan send) {
  static const float kEmptySend = 0.0f;
  return send.empty() ? static_cast<const void*>(&kEmptySend) : send.data();
}

void* recv_ptr(TypedSpan recv) {
  static float empty_recv = 0.0f;
  return recv.empty() ? static_cast<void*>(&empty_recv) : recv.data();
}

WaitSite wait_site(const char* call, const MpiCommunicator* group, int peer) {
  return {call, current_op_label(), group, peer};
}

namespace {

// The line of canzona/comm/timeout.h, then the end of this process: no MPI_Finalize or MPI_Abort,
// which could wait on the peer that is gone.
[[noreturn]] void end_on_timeout(const WaitSite& site, double timeout_s) {
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const std::string what = site.label.empty() ? site.call : site.label + ", " + site.call + ",";
  std::string peers;
  std::string group = "an unnamed";
  if (site.group != nullptr) {
    group = site.group->name();
    for (int r = 0; r < site.group->size(); ++r) {
      if (r == site.group->rank() || (site.peer >= 0 && r != site.peer)) continue;
      if (!peers.empty()) peers += ", ";
      peers += std::to_string(site.group->world_rank(r));
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "canzona: error: rank %d (host %s): collective timeout: %s on the %s group did not "
               "complete within %g s; waiting for world rank%s %s (--collective-timeout)\n",
               world_rank, host, what.c_str(), group.c_str(), timeout_s,
               peers.find(',') == std::string::npos ? "" : "s", peers.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace

int timed_wait(MPI_Request* request, MPI_Status* status, const WaitSite& site) {
  using Clock = std::chrono::steady_clock;
  const double timeout_s = collective_timeout();
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout_s));
  for (unsigned polls = 1;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(request, &done, status);
    if (rc != MPI_SUCCESS || done) return rc;
    if (polls % 256 == 0 && Clock::now() >= deadline) end_on_timeout(site, timeout_s);
  }
}

bool MpiRequest::test() {
  int done = 0;
  check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), str("MPI_Test(", site_.call, ")"));
  return done != 0;
}

void MpiRequest::wait() {
  check_mpi(timed_wait(&request, MPI_STATUS_IGNORE, site_), str("MPI_Wait(", site_.call, ")"));
  if (finish) finish();
}

MpiRecvRequest::MpiRecvRequest(std::span<std::byte> data, int source, int tag, bool self,
                               WaitSite site)
    : data_(data), source_(source), tag_(tag), self_(self), site_(site) {
  if (self_) scratch_.resize(data_.size() + 1);
}

void* MpiRecvRequest::buffer() {
  static std::byte empty_recv{};
  if (self_) return scratch_.data();
  return data_.empty() ? &empty_recv : data_.data();
}

void MpiRecvRequest::throw_larger() {
  throw Error(str("irecv from rank ", source_, " with tag ", tag_,
                  ": the message is larger than the receive buffer of ", data_.size(),
                  " bytes (MPI_ERR_TRUNCATE)"));
}

void MpiRecvRequest::check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  int error_class = rc;
  MPI_Error_class(rc, &error_class);
  if (error_class == MPI_ERR_TRUNCATE) throw_larger();
  check_mpi(rc, call);
}

bool MpiRecvRequest::test() {
  if (done_) return true;
  int flag = 0;
  check(MPI_Test(&request, &flag, &status_), "MPI_Test(MPI_Irecv)");
  done_ = flag != 0;
  return done_;
}

void MpiRecvRequest::wait() {
  if (!done_) {
    check(timed_wait(&request, &status_, site_), "MPI_Wait(MPI_Irecv)");
    done_ = true;
  }
  int count = 0;
  check_mpi(MPI_Get_count(&status_, MPI_BYTE, &count), "MPI_Get_count");
  const std::int64_t size = std::ssize(data_);
  if (count > size) throw_larger();
  if (count != size)
    throw Error(str("irecv from rank ", source_, " with tag ", tag_, ": receive buffer has ", size,
                    " bytes, the matching isend sent ", count));
  if (self_) std::copy(scratch_.begin(), scratch_.begin() + count, data_.begin());
}

}  // namespace detail

using detail::check_mpi;

MpiCommunicator::MpiCommunicator(MPI_Comm comm, ReduceMode mode, std::string name)
    : mode_(mode), name_(std::move(name)) {
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm_, &group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  std::vector<int> ranks(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) ranks[static_cast<std::size_t>(r)] = r;
  world_ranks_.resize(ranks.size());
  const int rc = MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  check_mpi(rc, "MPI_Group_translate_ranks");
  if (mode_ == ReduceMode::kDeterministic) {
    check_mpi(MPI_Comm_dup(comm_, &phase2_comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(phase2_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (phase2_comm_ != MPI_COMM_NULL) MPI_Comm_free(&phase2_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
  check_mpi(timed_wait(&request, MPI_STATUS_IGNORE, detail::wait_site("MPI_Ibarrier", this)),
            "MPI_Ibarrier");
}

std::vector<std::uint64_t> MpiCommunicator::all_gather_u64(std::uint64_t value) {
  std::vector<std::uint64_t> values(size_);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Iallgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, comm_, &request),
      "MPI_Iallgather");
  check_mpi(timed_wait(&request, MPI_STATUS_IGNORE, detail::wait_site("MPI_Iallgather", this)),
            "MPI_Iallgather");
  return values;
}

std::vector<std::vector<std::byte>> MpiCommunicator::all_gather_bytes(
    std::span<const std::byte> bytes) {
  const char* call = "MPI_Allgatherv";
  const std::vector<std::uint64_t> sizes = all_gather_u64(bytes.size());
  std::vector<int> counts(size_), displs(size_);
  std::int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    // Every rank sees the same sizes, so all of them throw here or none does.
    if (sizes[r] > static_cast<std::uint64_t>(INT_MAX) || total + sizes[r] > INT_MAX)
      throw Error(str("all_gather_bytes: ", sizes[r], " bytes from rank ", r,
                      " take the total past INT_MAX, the most one ", call, " can move"));
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  std::vector<std::byte> recv(static_cast<std::size_t>(total));
  static const std::byte kEmpty{};
  std::byte empty_recv{};
  detail::allgatherv_bytes_blocking(
      {comm_, rank_, size_, this}, bytes.empty() ? &kEmpty : bytes.data(),
      recv.empty() ? &empty_recv : recv.data(), counts, displs, mutable_bytes().all_gather, call);
  std::vector<std::vector<std::byte>> out(size_);
  for (int r = 0; r < size_; ++r)
    out[r].assign(recv.begin() + displs[r], recv.begin() + displs[r] + counts[r]);
  return out;
}

Request MpiCommunicator::do_reduce_scatter(ConstTypedSpan send, TypedSpan recv,
                                           std::span<const std::int64_t> counts) {
  const detail::MpiGroup group{comm_, rank_, size_, this};
  std::int64_t& counter = mutable_bytes(send.dtype()).reduce_scatter;
  if (mode_ == ReduceMode::kDeterministic) {
    return detail::post_deterministic_reduce_scatter(group, send, recv, counts, counter);
  }
  const char* call = "MPI_Ireduce_scatter";
  auto request = std::make_unique<detail::MpiRequest>(detail::wait_site(call, this));
  detail::append_mpi_ints(counts, call, request->ints);
  detail::post_ireduce_scatter(group, send.dtype(), detail::send_ptr(send), detail::recv_ptr(recv),
                               request->ints, &request->request, counter, call);
  return Request(std::move(request));
}

Request MpiCommunicator::do_all_gather(ConstTypedSpan send, TypedSpan recv,
                                       std::span<const std::int64_t> counts,
                                       std::span<const std::int64_t> displs) {
  const char* call = "MPI_Iallgatherv";
  auto request = std::make_unique<detail::MpiRequest>(detail::wait_site(call, this));
  detail::append_mpi_ints(counts, call, request->ints);
  detail::append_mpi_ints(displs, call, request->ints);
  const std::span<const int> ints = request->ints;
  const std::size_t size = static_cast<std::size_t>(size_);
  const DType dtype = send.dtype();
  const bool in_place =
      !send.empty() && send.data() == recv.data() + displs[rank_] * dtype_bytes(dtype);
  detail::post_iallgatherv({comm_, rank_, size_, this}, dtype,
                           in_place ? MPI_IN_PLACE : detail::send_ptr(send), detail::recv_ptr(recv),
                           ints.subspan(0, size), ints.subspan(size, size), &request->request,
                           mutable_bytes(dtype).all_gather, call);
  return Request(std::move(request));
}

Request MpiCommunicator::do_all_to_all(ConstTypedSpan send,
                                       std::span<const std::int64_t> send_counts,
                                       std::span<const std::int64_t> send_displs, TypedSpan recv,
                                       std::span<const std::int64_t> recv_counts,
                                       std::span<const std::int64_t> recv_displs) {
  const char* call = "MPI_Ialltoallv";
  auto request = std::make_unique<detail::MpiRequest>(detail::wait_site(call, this));
  for (auto values : {send_counts, send_displs, recv_counts, recv_displs}) {
    detail::append_mpi_ints(values, call, request->ints);
  }
  const std::span<const int> ints = request->ints;
  const std::size_t size = static_cast<std::size_t>(size_);
  detail::post_ialltoallv({comm_, rank_, size_, this}, send.dtype(), detail::send_ptr(send),
                          ints.subspan(0, size), ints.subspan(size, size), detail::recv_ptr(recv),
                          ints.subspan(2 * size, size), ints.subspan(3 * size, size),
                          &request->request, mutable_bytes(send.dtype()).all_to_all, call);
  return Request(std::move(request));
}

Request MpiCommunicator::do_all_reduce(ConstTypedSpan send, TypedSpan recv) {
  if (mode_ == ReduceMode::kDeterministic) {
    auto request = std::make_unique<detail::DeterministicAllReduce>(*this, send, recv);
    unadvanced_all_reduces_.push_back(request.get());
    return Request(std::move(request));
  }
  const char* call = "MPI_Iallreduce";
  auto request = std::make_unique<detail::MpiRequest>(detail::wait_site(call, this));
  const bool in_place = !send.empty() && send.data() == recv.data();
  detail::post_iallreduce({comm_, rank_, size_, this}, send.dtype(),
                          in_place ? MPI_IN_PLACE : detail::send_ptr(send), detail::recv_ptr(recv),
                          detail::to_mpi_int(recv.size(), call), &request->request,
                          mutable_bytes(send.dtype()).all_reduce, call);
  return Request(std::move(request));
}

Request MpiCommunicator::do_isend(std::span<const std::byte> data, int peer, int tag) {
  const char* call = "MPI_Isend";
  static const std::byte kEmptySend{};
  auto request = std::make_unique<detail::MpiRequest>(detail::wait_site(call, this, peer));
  detail::post_isend({comm_, rank_, size_, this}, data.empty() ? &kEmptySend : data.data(),
                     detail::to_mpi_int(std::ssize(data), call), peer, tag, &request->request,
                     mutable_bytes().p2p, call);
  return Request(std::move(request));
}

Request MpiCommunicator::do_irecv(std::span<std::byte> data, int peer, int tag) {
  const char* call = "MPI_Irecv";
  detail::to_mpi_int(std::ssize(data) + 1, call);  // the count handed MPI fits
  auto request = std::make_unique<detail::MpiRecvRequest>(data, peer, tag, peer == rank_,
                                                          detail::wait_site(call, this, peer));
  detail::post_irecv({comm_, rank_, size_, this}, request->buffer(), request->count(), peer, tag,
                     &request->request, call);
  return Request(std::move(request));
}

bool MpiCommunicator::advance_all_reduces_through(const detail::DeterministicAllReduce* target,
                                                  bool block) {
  while (!unadvanced_all_reduces_.empty()) {
    detail::DeterministicAllReduce* oldest = unadvanced_all_reduces_.front();
    if (!block && !oldest->phase1_done()) return false;
    unadvanced_all_reduces_.pop_front();
    oldest->advance();
    if (oldest == target) return true;
  }
  return false;
}

void MpiCommunicator::forget_all_reduce(const detail::DeterministicAllReduce* target) noexcept {
  auto it = std::find(unadvanced_all_reduces_.begin(), unadvanced_all_reduces_.end(), target);
  if (it != unadvanced_all_reduces_.end()) unadvanced_all_reduces_.erase(it);
}

}  // namespace canzona::comm
