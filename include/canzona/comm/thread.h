// The thread backend: an in-process Communicator, N threads of one process, each thread one rank.
// It runs the engine without MPI (the engine tests use it) and links no MPI (canzona_comm_thread).
//
// Terms. A *thread group* is P ThreadCommunicators that talk to each other through shared memory;
// communicator r of the group has rank r and belongs to exactly one thread. Each collective a rank
// posts gets the next *sequence number* of its communicator; since every rank posts the same
// collectives in the same order, equal sequence numbers name the same collective on every rank.
// Posting copies this rank's contribution (the send data destined to other ranks, and its own
// share) into the group's *slot* for that sequence number and never blocks; wait() blocks until
// every rank of the group has posted that sequence number, then computes this rank's result from
// all contributions and writes it into the receive buffer; test() says whether every rank has
// posted. Requests may therefore be waited in any order, on each rank independently.
//
// Semantics are those of communicator.h. Sums are formed in rank order in both ReduceModes,
// out[j] = x_0[j]; out[j] += x_1[j]; ...; out[j] += x_{P-1}[j], the order in which the MPI
// backend's kDeterministic mode sums (sum_in_rank_order in src/comm/mpi/), so kDeterministic
// results are bitwise those of MpiCommunicator. Byte counters follow MpiCommunicator's
// definitions (mpi_communicator.h), all counted when the operation is posted:
//   reduce_scatter(counts)  4 * (sum(counts) - counts[me])
//   all_gather(counts)      4 * (P - 1) * counts[me]
//   all_to_all(send_counts) 4 * sum over r != me of send_counts[r]
//   all_reduce(n)           4 * ((n - c[me]) + (P - 1) * c[me]), c = even_split(n, P), both modes
//   all_gather_bytes(bytes) (P - 1) * bytes.size(), into the all_gather counter
//   isend(data, peer)       data.size() when peer != me (into p2p)
// barrier() and all_gather_u64() are not counted.
//
// Point-to-point: each group has a *mailbox*, a FIFO per (source, dest, tag). isend copies its
// bytes into the FIFO when posted and completes when the matching irecv is posted (as
// MPI_Issend: a program that waits for a send before posting the receive it depends on hangs
// here, as it may under MPI with a large message, instead of passing); the k-th
// irecv a rank posts for (source, tag) takes the k-th message of that FIFO: its test() says whether
// that message has been sent, its wait() blocks until it has, then copies its bytes into the
// receive buffer. A message whose size differs from the receive buffer's makes wait() throw
// canzona::Error naming both sizes (the message is consumed).
//
// Failures instead of hangs: wait() (and the blocking collectives) throw canzona::Error when the
// ranks posted different kinds of collective under one sequence number, when their counts do not
// match (reduce_scatter, all_gather, all_to_all, all_reduce sizes), when a rank's communicator
// was destroyed before it posted the collective being waited for (its thread ended or threw), or
// when an irecv's source was destroyed before sending the message it waits for. A wait made while
// an exception unwinds the calling thread (a pending Request abandoned by a failing rank)
// completes normally if every rank has posted (the message has been sent) and otherwise returns
// at once without writing the receive buffer, so a failing rank never blocks on ranks that wait
// for it elsewhere.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "canzona/comm/communicator.h"
#include "canzona/comm/grid.h"

namespace canzona::comm {

// A thread group of `size` ranks (>= 1): element r is rank r. Hand each communicator to its own
// thread; a communicator is not thread-safe, but different ones of the group may be used
// concurrently. The communicators may outlive each other in any order.
std::vector<std::unique_ptr<comm::Communicator>> make_thread_communicators(int size,
                                                                           comm::ReduceMode mode);

// One Grid per world rank of `dims` (element w is world rank w), with thread groups formed as
// make_mpi_grid forms its MPI communicators: the world group in world-rank order; for each
// (pp, tp) a DP group ordered by dp index; for each (pp, dp) a TP group ordered by tp index; for
// each (dp, tp) a PP group ordered by pp index and an embedding group of its first and last stage
// (grid.h). Throws canzona::UsageError as ParallelDims::check().
std::vector<std::unique_ptr<comm::Grid>> make_thread_grids(const ParallelDims& dims,
                                                           comm::ReduceMode mode);

// The expert groups (grid.h) of every world rank of `dims` (element w is world rank w; ep and etp
// from dims), with thread groups formed as make_mpi_expert_groups forms its MPI communicators.
// Throws as ParallelDims::check().
std::vector<comm::ExpertGroups> make_thread_expert_groups(const ParallelDims& dims,
                                                          comm::ReduceMode mode);

// Runs body(grid) on dp * tp * pp threads, one per world rank, each with its own Grid from
// make_thread_grids, and joins them. A rank's Grid is destroyed when its body returns or throws,
// so ranks still waiting for it fail instead of hanging. After joining, rethrows the first
// exception any body threw (in time order; exceptions that other ranks then see because of it come
// later). Throws canzona::UsageError as ParallelDims::check().
void run_on_thread_grid(const ParallelDims& dims, comm::ReduceMode mode,
                        const std::function<void(comm::Grid&)>& body);

}  // namespace canzona::comm
