#include "mpi_calls.h"

#include "canzona/comm/communicator.h"
#include "mpi_internal.h"

namespace canzona::comm::detail {
namespace {

std::int64_t sum_except(std::span<const int> counts, int rank) {
  std::int64_t total = 0;
  for (int r = 0; r < std::ssize(counts); ++r) {
    if (r != rank) total += counts[r];
  }
  return total;
}

// inout[i] = bf16(float(in[i]) + float(inout[i])).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

}  // namespace

MPI_Datatype mpi_type(DType dtype) {
  return dtype == DType::kBF16 ? MPI_UINT16_T : MPI_FLOAT;
}

MPI_Op sum_op(DType dtype) {
  if (dtype == DType::kF32) return MPI_SUM;
  static const MPI_Op op = [] {
    MPI_Op created = MPI_OP_NULL;
    check_mpi(MPI_Op_create(&bf16_sum, /*commute=*/1, &created), "MPI_Op_create (bf16 sum)");
    return created;
  }();
  return op;
}

std::int64_t alltoallv_bytes(DType dtype, std::span<const int> send_counts, int rank) {
  return dtype_bytes(dtype) * sum_except(send_counts, rank);
}

std::int64_t allgatherv_bytes(DType dtype, std::span<const int> recv_counts, int rank) {
  const std::int64_t others = std::ssize(recv_counts) - 1;
  return dtype_bytes(dtype) * others * recv_counts[rank];
}

std::int64_t byte_allgatherv_bytes(std::span<const int> recv_counts, int rank) {
  return (std::ssize(recv_counts) - 1) * recv_counts[rank];
}

std::int64_t reduce_scatter_bytes(DType dtype, std::span<const int> recv_counts, int rank) {
  return dtype_bytes(dtype) * sum_except(recv_counts, rank);
}

std::int64_t allreduce_bytes(DType dtype, int count, int size, int rank) {
  const std::int64_t own = even_split(count, size)[rank];
  return dtype_bytes(dtype) * ((count - own) + (size - 1) * own);
}

std::int64_t isend_bytes(int count, int dest, int rank) {
  return dest == rank ? 0 : count;
}

void post_ialltoallv(const MpiGroup& group, DType dtype, const void* send,
                     std::span<const int> send_counts, std::span<const int> send_displs, void* recv,
                     std::span<const int> recv_counts, std::span<const int> recv_displs,
                     MPI_Request* request, std::int64_t& counter, const char* call) {
  const MPI_Datatype type = mpi_type(dtype);
  check_mpi(MPI_Ialltoallv(send, send_counts.data(), send_displs.data(), type, recv,
                           recv_counts.data(), recv_displs.data(), type, group.comm, request),
            call);
  counter += alltoallv_bytes(dtype, send_counts, group.rank);
}

void post_iallgatherv(const MpiGroup& group, DType dtype, const void* send, void* recv,
                      std::span<const int> recv_counts, std::span<const int> recv_displs,
                      MPI_Request* request, std::int64_t& counter, const char* call) {
  const MPI_Datatype type = mpi_type(dtype);
  check_mpi(MPI_Iallgatherv(send, recv_counts[group.rank], type, recv, recv_counts.data(),
                            recv_displs.data(), type, group.comm, request),
            call);
  counter += allgatherv_bytes(dtype, recv_counts, group.rank);
}

void allgatherv_bytes_blocking(const MpiGroup& group, const void* send, void* recv,
                               std::span<const int> recv_counts, std::span<const int> recv_displs,
                               std::int64_t& counter, const char* call) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgatherv(send, recv_counts[group.rank], MPI_BYTE, recv, recv_counts.data(),
                            recv_displs.data(), MPI_BYTE, group.comm, &request),
            call);
  check_mpi(timed_wait(&request, MPI_STATUS_IGNORE, wait_site(call, group.owner)), call);
  counter += byte_allgatherv_bytes(recv_counts, group.rank);
}

void post_ireduce_scatter(const MpiGroup& group, DType dtype, const void* send, void* recv,
                          std::span<const int> recv_counts, MPI_Request* request,
                          std::int64_t& counter, const char* call) {
  check_mpi(MPI_Ireduce_scatter(send, recv, recv_counts.data(), mpi_type(dtype), sum_op(dtype),
                                group.comm, request),
            call);
  counter += reduce_scatter_bytes(dtype, recv_counts, group.rank);
}

void post_iallreduce(const MpiGroup& group, DType dtype, const void* send, void* recv, int count,
                     MPI_Request* request, std::int64_t& counter, const char* call) {
  check_mpi(MPI_Iallreduce(send, recv, count, mpi_type(dtype), sum_op(dtype), group.comm, request),
            call);
  counter += allreduce_bytes(dtype, count, group.size, group.rank);
}

void post_isend(const MpiGroup& group, const void* send, int count, int dest, int tag,
                MPI_Request* request, std::int64_t& counter, const char* call) {
  check_mpi(MPI_Isend(send, count, MPI_BYTE, dest, tag, group.comm, request), call);
  counter += isend_bytes(count, dest, group.rank);
}

void post_irecv(const MpiGroup& group, void* recv, int count, int source, int tag,
                MPI_Request* request, const char* call) {
  check_mpi(MPI_Irecv(recv, count, MPI_BYTE, source, tag, group.comm, request), call);
}

}  // namespace canzona::comm::detail
