#include "mpi_calls.h"

#include "canzona/comm/communicator.h"
#include "mpi_internal.h"

namespace canzona::comm::detail {
namespace {

constexpr std::int64_t kFloatBytes = sizeof(float);

std::int64_t sum_except(std::span<const int> counts, int rank) {
  std::int64_t total = 0;
  for (int r = 0; r < std::ssize(counts); ++r) {
    if (r != rank) total += counts[r];
  }
  return total;
}

}  // namespace

std::int64_t alltoallv_bytes(std::span<const int> send_counts, int rank) {
  return kFloatBytes * sum_except(send_counts, rank);
}

std::int64_t allgatherv_bytes(std::span<const int> recv_counts, int rank) {
  const std::int64_t others = std::ssize(recv_counts) - 1;
  return kFloatBytes * others * recv_counts[rank];
}

std::int64_t byte_allgatherv_bytes(std::span<const int> recv_counts, int rank) {
  return (std::ssize(recv_counts) - 1) * recv_counts[rank];
}

std::int64_t reduce_scatter_bytes(std::span<const int> recv_counts, int rank) {
  return kFloatBytes * sum_except(recv_counts, rank);
}

std::int64_t allreduce_bytes(int count, int size, int rank) {
  const std::int64_t own = even_split(count, size)[rank];
  return kFloatBytes * ((count - own) + (size - 1) * own);
}

std::int64_t isend_bytes(int count, int dest, int rank) {
  return dest == rank ? 0 : count;
}

void post_ialltoallv(const MpiGroup& group, const void* send, std::span<const int> send_counts,
                     std::span<const int> send_displs, void* recv, std::span<const int> recv_counts,
                     std::span<const int> recv_displs, MPI_Request* request, std::int64_t& counter,
                     const char* call) {
  check_mpi(MPI_Ialltoallv(send, send_counts.data(), send_displs.data(), MPI_FLOAT, recv,
                           recv_counts.data(), recv_displs.data(), MPI_FLOAT, group.comm, request),
            call);
  counter += alltoallv_bytes(send_counts, group.rank);
}

void post_iallgatherv(const MpiGroup& group, const void* send, void* recv,
                      std::span<const int> recv_counts, std::span<const int> recv_displs,
                      MPI_Request* request, std::int64_t& counter, const char* call) {
  check_mpi(MPI_Iallgatherv(send, recv_counts[group.rank], MPI_FLOAT, recv, recv_counts.data(),
                            recv_displs.data(), MPI_FLOAT, group.comm, request),
            call);
  counter += allgatherv_bytes(recv_counts, group.rank);
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

void post_ireduce_scatter(const MpiGroup& group, const void* send, void* recv,
                          std::span<const int> recv_counts, MPI_Request* request,
                          std::int64_t& counter, const char* call) {
  check_mpi(
      MPI_Ireduce_scatter(send, recv, recv_counts.data(), MPI_FLOAT, MPI_SUM, group.comm, request),
      call);
  counter += reduce_scatter_bytes(recv_counts, group.rank);
}

void post_iallreduce(const MpiGroup& group, const void* send, void* recv, int count,
                     MPI_Request* request, std::int64_t& counter, const char* call) {
  check_mpi(MPI_Iallreduce(send, recv, count, MPI_FLOAT, MPI_SUM, group.comm, request), call);
  counter += allreduce_bytes(count, group.size, group.rank);
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
