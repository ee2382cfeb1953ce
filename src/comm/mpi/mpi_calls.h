// The MPI nonblocking collectives the MPI backend posts, and the bytes it counts for each.
//
// Terms. A call goes to an MpiGroup: an MPI communicator of P = size ranks in which this process
// is `me` = rank. Every nonblocking collective moves one dtype: fp32 as MPI_FLOAT (e = 4 bytes),
// bf16 as MPI_UINT16_T (e = 2 bytes; its sums through sum_op()). The *bytes to other ranks*
// of a call are e times the elements of this rank's send arguments that are destined to ranks
// other than me, read from the int counts exactly as they are handed to MPI:
//   MPI_Ialltoallv       sum over r != me of sendcounts[r]
//   MPI_Iallgatherv      (P - 1) * sendcount, where sendcount = recvcounts[me] (the wrapper hands
//                        MPI exactly that, also with MPI_IN_PLACE, where MPI reads the own block
//                        of recv)
//   MPI_Ireduce_scatter  sum over r != me of recvcounts[r] (the blocks of send that other ranks'
//                        sums need)
//   MPI_Iallreduce       (n - c[me]) + (P - 1) * c[me] with n = count and c = even_split(n, P):
//                        the arguments do not say how the library moves the n elements, so this
//                        counts what ReduceMode::kDeterministic hands MPI for the same n (a
//                        reduce-scatter then an all-gather over the even split). Summed over ranks
//                        it is 2 (P - 1) n, the least any all-reduce algorithm must send.
//   MPI_Allgatherv       (blocking, MPI_BYTE: 1 byte per element) (P - 1) * recvcounts[me]
//   MPI_Isend            (MPI_BYTE) count when dest != me, 0 when a rank sends to itself
//   MPI_Irecv            0 (the sender counts)
// Every wrapper makes its MPI call, converts the return code (canzona::Error naming `call`) and,
// once MPI accepted the call, adds the call's bytes to `counter`: the counter of the Communicator
// operation the call belongs to (CommBytes in communicator.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>

#include "canzona/comm/timeout.h"
#include "canzona/common/dtype.h"

namespace canzona::comm {
class MpiCommunicator;
}

namespace canzona::comm::detail {

struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;                            // me
  int size = 1;                            // P
  const MpiCommunicator* owner = nullptr;  // names the group when a wait times out
};

// What a wait names when it times out (canzona/comm/timeout.h): the MPI call that posted the
// operation, the operation label current then, the communicator, and the group rank of a
// point-to-point peer (-1: every other member).
struct WaitSite {
  const char* call = "";
  std::string label;
  const MpiCommunicator* group = nullptr;
  int peer = -1;
};
WaitSite wait_site(const char* call, const MpiCommunicator* group, int peer = -1);

// MPI_Wait bounded by collective_timeout(): MPI_Test until the request completes (driving
// progress as MPI_Wait does) and returns MPI_Test's code. Past the timeout it prints the line of
// timeout.h naming `site` and ends the process with status 2.
int timed_wait(MPI_Request* request, MPI_Status* status, const WaitSite& site);

// Bytes to other ranks, as defined above. Counts have P = size() entries; rank is me.
std::int64_t alltoallv_bytes(DType dtype, std::span<const int> send_counts, int rank);
std::int64_t allgatherv_bytes(DType dtype, std::span<const int> recv_counts, int rank);
std::int64_t byte_allgatherv_bytes(std::span<const int> recv_counts, int rank);  // MPI_BYTE
std::int64_t reduce_scatter_bytes(DType dtype, std::span<const int> recv_counts, int rank);
std::int64_t allreduce_bytes(DType dtype, int count, int size, int rank);
std::int64_t isend_bytes(int count, int dest, int rank);  // MPI_BYTE

// The MPI datatype that moves `dtype`: MPI_FLOAT or MPI_UINT16_T.
MPI_Datatype mpi_type(DType dtype);
// The MPI_Op that sums bf16 values (MPI_UINT16_T): each pair added in fp32 and rounded to nearest
// even; created on first use (after MPI_Init), never freed. MPI_SUM for fp32.
MPI_Op sum_op(DType dtype);

// MPI_Ialltoallv of `dtype`; each span has group.size entries.
void post_ialltoallv(const MpiGroup& group, DType dtype, const void* send,
                     std::span<const int> send_counts, std::span<const int> send_displs, void* recv,
                     std::span<const int> recv_counts, std::span<const int> recv_displs,
                     MPI_Request* request, std::int64_t& counter, const char* call);

// MPI_Iallgatherv of `dtype` with sendcount = recv_counts[group.rank]; `send` may be MPI_IN_PLACE.
void post_iallgatherv(const MpiGroup& group, DType dtype, const void* send, void* recv,
                      std::span<const int> recv_counts, std::span<const int> recv_displs,
                      MPI_Request* request, std::int64_t& counter, const char* call);

// Blocking MPI_Allgatherv of MPI_BYTE with sendcount = recv_counts[group.rank] (posted as
// MPI_Iallgatherv and waited with timed_wait).
void allgatherv_bytes_blocking(const MpiGroup& group, const void* send, void* recv,
                               std::span<const int> recv_counts, std::span<const int> recv_displs,
                               std::int64_t& counter, const char* call);

// MPI_Ireduce_scatter of `dtype` with sum_op(dtype).
void post_ireduce_scatter(const MpiGroup& group, DType dtype, const void* send, void* recv,
                          std::span<const int> recv_counts, MPI_Request* request,
                          std::int64_t& counter, const char* call);

// MPI_Iallreduce of `count` elements of `dtype` with sum_op(dtype); `send` may be MPI_IN_PLACE.
void post_iallreduce(const MpiGroup& group, DType dtype, const void* send, void* recv, int count,
                     MPI_Request* request, std::int64_t& counter, const char* call);

// MPI_Isend of `count` MPI_BYTEs to rank `dest` of group.comm with `tag`.
void post_isend(const MpiGroup& group, const void* send, int count, int dest, int tag,
                MPI_Request* request, std::int64_t& counter, const char* call);

// MPI_Irecv of `count` MPI_BYTEs from rank `source` of group.comm with `tag`; counts nothing.
void post_irecv(const MpiGroup& group, void* recv, int count, int source, int tag,
                MPI_Request* request, const char* call);

}  // namespace canzona::comm::detail
