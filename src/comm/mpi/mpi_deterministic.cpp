// ReduceMode::kDeterministic: sums formed locally in rank order (see mpi_communicator.h).
#include <algorithm>
#include <memory>

#include "canzona/common/error.h"
#include "mpi_internal.h"

namespace canzona::comm::detail {
namespace {

// MPI_Ialltoallv arguments of a reduce-scatter: block r of `send` (offset sum(counts[0..r)),
// counts[r] elements) goes to rank r; from every rank q this rank receives counts[rank] elements
// at q * counts[rank] of the scratch buffer. Appends send counts, send displs, recv counts, recv
// displs (4 x size ints) to `ints`.
void reduce_scatter_as_alltoall(std::span<const std::int64_t> counts, int rank, const char* call,
                                std::vector<int>& ints) {
  const int size = static_cast<int>(counts.size());
  std::vector<std::int64_t> send_displs(size);
  std::int64_t offset = 0;
  for (int r = 0; r < size; ++r) {
    send_displs[r] = offset;
    offset += counts[r];
  }
  std::vector<std::int64_t> recv_counts(size, counts[rank]);
  std::vector<std::int64_t> recv_displs(size);
  for (int q = 0; q < size; ++q) recv_displs[q] = q * counts[rank];
  append_mpi_ints(counts, call, ints);
  append_mpi_ints(send_displs, call, ints);
  append_mpi_ints(recv_counts, call, ints);
  append_mpi_ints(recv_displs, call, ints);
}

// Posts the MPI_Ialltoallv described by `ints` (see reduce_scatter_as_alltoall).
void post_alltoall(const MpiGroup& group, ConstTypedSpan send, std::span<const int> ints,
                   std::vector<std::byte>& scratch, MPI_Request* request, std::int64_t& counter,
                   const char* call) {
  const std::size_t size = static_cast<std::size_t>(group.size);
  const DType dtype = send.dtype();
  const TypedSpan into(scratch.data(), std::ssize(scratch) / dtype_bytes(dtype), dtype);
  post_ialltoallv(group, dtype, send_ptr(send), ints.subspan(0, size), ints.subspan(size, size),
                  recv_ptr(into), ints.subspan(2 * size, size), ints.subspan(3 * size, size),
                  request, counter, call);
}

// The P blocks of `own` elements each in scratch, summed in rank order into `out`.
void sum_scratch(const std::vector<std::byte>& scratch, int size, TypedSpan out) {
  sum_in_rank_order(ConstTypedSpan(scratch.data(), size * out.size(), out.dtype()), size, out);
}

}  // namespace

Request post_deterministic_reduce_scatter(const MpiGroup& group, ConstTypedSpan send,
                                          TypedSpan recv, std::span<const std::int64_t> counts,
                                          std::int64_t& counter) {
  const char* call = "MPI_Ialltoallv (deterministic reduce_scatter)";
  auto request = std::make_unique<MpiRequest>(wait_site(call, group.owner));
  reduce_scatter_as_alltoall(counts, group.rank, call, request->ints);
  const std::int64_t own = counts[group.rank];
  const int size = group.size;
  request->scratch.resize(static_cast<std::size_t>(size * own * dtype_bytes(send.dtype())));
  post_alltoall(group, send, request->ints, request->scratch, &request->request, counter, call);
  MpiRequest* raw = request.get();
  request->finish = [raw, recv, size] { sum_scratch(raw->scratch, size, recv); };
  return Request(std::move(request));
}

DeterministicAllReduce::DeterministicAllReduce(MpiCommunicator& owner, ConstTypedSpan send,
                                               TypedSpan recv)
    : owner_(owner),
      recv_(recv),
      site_(wait_site("MPI_Ialltoallv + MPI_Iallgatherv (deterministic all_reduce)", &owner)) {
  const char* call = "MPI_Ialltoallv (deterministic all_reduce phase 1)";
  const int size = owner.size_;
  const int rank = owner.rank_;
  const std::vector<std::int64_t> counts = even_split(recv.size(), size);
  for (int r = 0; r < rank; ++r) own_offset_ += counts[r];
  own_count_ = counts[rank];
  std::vector<std::int64_t> displs(size);
  for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  append_mpi_ints(counts, call, allgather_ints_);
  append_mpi_ints(displs, call, allgather_ints_);
  reduce_scatter_as_alltoall(counts, rank, call, alltoall_ints_);
  scratch_.resize(static_cast<std::size_t>(size * own_count_ * dtype_bytes(send.dtype())));
  post_alltoall({owner.comm_, rank, size, &owner}, send, alltoall_ints_, scratch_, &phase1_,
                owner.mutable_bytes(send.dtype()).all_reduce, call);
}

DeterministicAllReduce::~DeterministicAllReduce() {
  owner_.forget_all_reduce(this);
}

bool DeterministicAllReduce::phase1_done() {
  int done = 0;
  check_mpi(MPI_Test(&phase1_, &done, MPI_STATUS_IGNORE),
            "MPI_Test(MPI_Ialltoallv, deterministic all_reduce phase 1)");
  return done != 0;
}

void DeterministicAllReduce::advance() {
  advanced_ = true;
  check_mpi(timed_wait(&phase1_, MPI_STATUS_IGNORE, site_),
            "MPI_Wait(MPI_Ialltoallv, deterministic all_reduce phase 1)");
  sum_scratch(scratch_, owner_.size_, recv_.subspan(own_offset_, own_count_));
  scratch_ = {};
  const std::span<const int> ints = allgather_ints_;
  const std::size_t size = static_cast<std::size_t>(owner_.size_);
  const DType dtype = recv_.dtype();
  post_iallgatherv({owner_.phase2_comm_, owner_.rank_, owner_.size_, &owner_}, dtype, MPI_IN_PLACE,
                   recv_ptr(recv_), ints.subspan(0, size), ints.subspan(size, size), &phase2_,
                   owner_.mutable_bytes(dtype).all_reduce,
                   "MPI_Iallgatherv (deterministic all_reduce phase 2)");
}

bool DeterministicAllReduce::test() {
  if (!advanced_ && !owner_.advance_all_reduces_through(this, /*block=*/false)) return false;
  int done = 0;
  check_mpi(MPI_Test(&phase2_, &done, MPI_STATUS_IGNORE),
            "MPI_Test(MPI_Iallgatherv, deterministic all_reduce phase 2)");
  return done != 0;
}

void DeterministicAllReduce::wait() {
  if (!advanced_) owner_.advance_all_reduces_through(this, /*block=*/true);
  check_mpi(timed_wait(&phase2_, MPI_STATUS_IGNORE, site_),
            "MPI_Wait(MPI_Iallgatherv, deterministic all_reduce phase 2)");
}

}  // namespace canzona::comm::detail
