// Internals of the MPI backend shared by its source files (and white-box tests).
//
// Terms. An *MPI call name* is the MPI function as written in code ("MPI_Ialltoallv"); errors
// carry it. An MpiRequest is one posted MPI nonblocking operation together with the memory MPI
// reads or writes until it completes: the int count/displacement arrays (MPI requires them to stay
// valid until completion) and scratch space; an MpiRecvRequest one posted MPI_Irecv (it checks
// the received size). A DeterministicAllReduce is the two-phase all-reduce
// of ReduceMode::kDeterministic (see mpi_communicator.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "mpi_calls.h"
#include "mpi_communicator.h"

namespace canzona::comm::detail {

// Throws canzona::Error "<call> failed: <MPI error string> (MPI error class N)" unless rc is
// MPI_SUCCESS.
void check_mpi(int rc, std::string_view call);

// Appends `values` to `out` as MPI ints; throws canzona::Error naming `call` when one exceeds
// MPI's int range.
void append_mpi_ints(std::span<const std::int64_t> values, const char* call, std::vector<int>& out);
int to_mpi_int(std::int64_t value, const char* call);

// Buffer pointers for MPI: empty spans get distinct non-null dummies, so MPI never sees two equal
// pointers (which some calls reject as aliasing) or a null one.
const void* send_ptr(ConstTypedSpan send);
void* recv_ptr(TypedSpan recv);

class MpiRequest final : public Request::Impl {
 public:
  explicit MpiRequest(WaitSite site) : site_(site) {}
  // MPI_Wait, then `finish` (if set).
  void wait() override;
  bool test() override;  // MPI_Test

  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<int> ints;           // counts/displacements MPI reads until completion
  std::vector<std::byte> scratch;  // receive space of the deterministic reduce-scatter
  std::function<void()> finish;    // runs once, after the MPI operation completed

 private:
  WaitSite site_;
};

// One MPI_Irecv into `data` from rank `source` with `tag`. Once the receive has completed (in
// test() or wait()) wait() checks the received size from the status: a message larger than data
// (MPI_ERR_TRUNCATE) or of another size throws canzona::Error naming the sizes. A receive from this
// rank itself goes through a scratch buffer one byte longer than data, copied into data by wait():
// Open MPI 4.1's path to self truncates a longer message silently (no MPI_ERR_TRUNCATE, the count
// capped at the buffer), which the extra byte makes visible.
class MpiRecvRequest final : public Request::Impl {
 public:
  MpiRecvRequest(std::span<std::byte> data, int source, int tag, bool self, WaitSite site);
  void wait() override;  // MPI_Wait unless test() saw completion, then the size check
  bool test() override;  // MPI_Test

  // What to hand MPI_Irecv.
  void* buffer();
  int count() const { return static_cast<int>(self_ ? data_.size() + 1 : data_.size()); }

  MPI_Request request = MPI_REQUEST_NULL;

 private:
  void check(int rc, const char* call);  // rc of MPI_Test / MPI_Wait
  [[noreturn]] void throw_larger();

  std::span<std::byte> data_;
  int source_;
  int tag_;
  bool self_;
  WaitSite site_;
  std::vector<std::byte> scratch_;  // self_ only: data_.size() + 1 bytes
  bool done_ = false;
  MPI_Status status_{};
};

// Deterministic reduce-scatter (see mpi_communicator.h): MPI_Ialltoallv into scratch, summed in
// rank order when waited. The MPI_Ialltoallv's bytes go to `counter`.
Request post_deterministic_reduce_scatter(const MpiGroup& group, ConstTypedSpan send,
                                          TypedSpan recv, std::span<const std::int64_t> counts,
                                          std::int64_t& counter);

// The two-phase all-reduce of ReduceMode::kDeterministic. Phase 1 (an MPI_Ialltoallv on the
// owner's communicator) is posted by the constructor. *Advancing* completes phase 1, sums this
// rank's segment in rank order and posts phase 2 (an in-place MPI_Iallgatherv on the owner's
// phase-2 communicator). Phase-2 collectives must be posted in the same order on every rank, so an
// all-reduce advances only after every earlier-posted one of its owner has advanced; the owner
// keeps the not-yet-advanced ones in posting order. Both phases count into the owner's all_reduce
// bytes when posted.
class DeterministicAllReduce final : public Request::Impl {
 public:
  // Posts phase 1 on owner's communicator.
  DeterministicAllReduce(MpiCommunicator& owner, ConstTypedSpan send, TypedSpan recv);
  ~DeterministicAllReduce() override;

  // True when phase 1 has completed (MPI_Test: never blocks, drives progress).
  bool phase1_done();
  // Completes phase 1 (MPI_Wait, immediate when phase1_done()), sums this rank's segment into
  // recv, posts phase 2. Called once, by the owner, in posting order.
  void advance();

  // Advances the owner's earlier all-reduces and this one, blocking on their phase 1, then waits
  // for phase 2.
  void wait() override;
  // Never blocks: advances the owner's earlier all-reduces and this one as far as their phase 1
  // has completed (stopping at the first that has not), then tests phase 2. True only once phase
  // 2 has completed.
  bool test() override;

 private:
  MpiCommunicator& owner_;
  TypedSpan recv_;
  std::int64_t own_offset_ = 0;  // this rank's segment of recv: {own_offset_, own_count_}
  std::int64_t own_count_ = 0;
  bool advanced_ = false;
  WaitSite site_;  // names both phases when a wait times out
  MPI_Request phase1_ = MPI_REQUEST_NULL;
  MPI_Request phase2_ = MPI_REQUEST_NULL;
  std::vector<int> alltoall_ints_;   // send counts, send displs, recv counts, recv displs (4 x P)
  std::vector<int> allgather_ints_;  // counts, displs (2 x P)
  std::vector<std::byte> scratch_;   // (P, own_count_) elements: block q from rank q
};

}  // namespace canzona::comm::detail
