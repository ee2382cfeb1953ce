// Communicator over an MPI communicator (docs/design.md section 4).
//
// Terms. The MpiCommunicator duplicates the MPI communicator it is given (so its collectives never
// match anyone else's), sets MPI_ERRORS_RETURN on the duplicate and converts every MPI return code
// into canzona::Error naming the MPI call. It frees the duplicate in its destructor, which must
// therefore run before MPI_Finalize (destroy Grids and communicators before the MpiSession).
//
// ReduceMode::kNative maps each collective onto one MPI nonblocking call: MPI_Ireduce_scatter,
// MPI_Iallgatherv, MPI_Ialltoallv, MPI_Iallreduce. ReduceMode::kDeterministic forms every sum
// locally in rank order:
//   reduce_scatter: MPI_Ialltoallv sends block r of `send` to rank r; wait() sums the P received
//     blocks in rank order into `recv`.
//   all_reduce: phase 1 is that reduce-scatter over even_split(n, P); phase 2 an in-place
//     MPI_Iallgatherv of the summed segments on a second duplicate communicator. Phase 2 is posted
//     as soon as a test() or wait() finds phase 1 complete, so both phases progress while the
//     caller computes and calls test(), like the reduce-scatter. Phase-2 collectives are posted
//     in posting order of the all-reduces on every rank: an all-reduce advances only after every
//     earlier one has, and test() or wait() on a later one advances the earlier ones first (test()
//     only as far as their phase 1 has completed, never blocking). Ranks may therefore test and
//     wait in any order without mismatching collectives.
// all_gather and all_to_all involve no sums and are the same in both modes. isend and irecv are
// MPI_Isend and MPI_Irecv of MPI_BYTE on the same duplicate as the collectives: MPI guarantees
// that messages of collective calls are never confused with point-to-point messages on one
// communicator (MPI 3.1, section 5.1), and point-to-point messages between one pair on one
// communicator with one tag do not overtake each other (section 3.5). An irecv's wait() checks
// the received size from its MPI_Status (a receive from this rank itself through a scratch buffer
// one byte longer: Open MPI 4.1 truncates a message to self silently; see MpiRecvRequest). Counts
// and displacements must fit MPI's int (canzona::Error otherwise). Not thread-safe: one thread per
// process calls it (MPI_THREAD_FUNNELED).
//
// Dtypes. fp32 moves as MPI_FLOAT, bf16 as MPI_UINT16_T; kNative sums bf16 with a user MPI_Op
// that adds each pair in fp32 and rounds to bf16 (mpi_calls.h: sum_op), kDeterministic sums in
// fp32 in rank order and rounds once (canzona::sum_in_rank_order).
//
// Byte counters (Communicator::bytes()) are counted here, when each MPI call is made, from the
// int counts handed to MPI: for each MPI nonblocking call, e bytes (4 for MPI_FLOAT, 2 for bf16's
// MPI_UINT16_T) times the elements of this rank's send arguments destined to other ranks, under
// the call's dtype, with P = size() and me = rank():
//   MPI_Ialltoallv       sum over r != me of sendcounts[r]
//   MPI_Iallgatherv      (P - 1) * sendcount, sendcount = recvcounts[me] (also when in place)
//   MPI_Ireduce_scatter  sum over r != me of recvcounts[r]
//   MPI_Iallreduce       (n - c[me]) + (P - 1) * c[me], c = even_split(n, P)
// and added to the counter of the Communicator operation the call serves:
//   reduce_scatter  kNative: its MPI_Ireduce_scatter; kDeterministic: its MPI_Ialltoallv.
//                   Either way e * (sum(counts) - counts[me]).
//   all_gather      its MPI_Iallgatherv: e * (P - 1) * counts[me].
//   all_to_all      its MPI_Ialltoallv: e * sum over r != me of send_counts[r].
//   all_gather_bytes   its MPI_Allgatherv of MPI_BYTE, into the all_gather counter:
//                      (P - 1) * bytes.size() (the MPI_Allgather of the sizes before it is control
//                      traffic, like all_gather_u64, and not counted).
//   isend           its MPI_Isend, into the p2p counter: data.size() when peer != me, else 0.
//   all_reduce      kDeterministic: phase 1 (MPI_Ialltoallv, n - c[me] elements) plus phase 2
//                   (MPI_Iallgatherv, (P - 1) * c[me]), phase 2 counted when it is posted (by
//                   test() or wait()). kNative: MPI_Iallreduce's arguments do not say how the
//                   library moves the data, so it counts the same amount the deterministic mode
//                   hands MPI: summed over ranks 2 (P - 1) n elements, the least any all-reduce
//                   algorithm must send, and equal in both modes.
// Once every request is waited, the counters hold the bytes of all calls made so far. Checked
// against Open MPI 4.1 (tests/comm): the coll monitoring component's per-peer record of every
// collective call equals the counters in both modes (native all_reduce aside: it records the whole
// vector for each peer); the bytes the monitoring PML sees sent equal the counters for every
// deterministic collective and for all_gather and all_to_all in both modes (libnbc's linear
// algorithms). Native MPI_Ireduce_scatter and MPI_Iallreduce move what the library's algorithms
// choose: libnbc's reduce-scatter reduces to rank 0 and then scatters, (P - 1) n + (n - counts[0])
// elements summed over ranks against the counted (P - 1) n (n = sum(counts); measured at P = 3, 4);
// its all-reduce moved exactly the count for P = 3, 4 and n = 1003, 100000.
#pragma once

#include <mpi.h>

#include <deque>
#include <string>
#include <vector>

#include "canzona/comm/communicator.h"

namespace canzona::comm {

namespace detail {
class DeterministicAllReduce;
}

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm` (MPI_Comm_dup). `name` names the group in a timeout's line ("DP",
  // "TP", ...). Throws canzona::Error when MPI fails.
  MpiCommunicator(MPI_Comm comm, ReduceMode mode, std::string name = "world");
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ReduceMode mode() const { return mode_; }
  const std::string& name() const { return name_; }
  // The MPI_COMM_WORLD rank of group rank r.
  int world_rank(int r) const { return world_ranks_[static_cast<std::size_t>(r)]; }

  void barrier() override;
  std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) override;
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> bytes) override;

 protected:
  Request do_reduce_scatter(ConstTypedSpan send, TypedSpan recv,
                            std::span<const std::int64_t> counts) override;
  Request do_all_gather(ConstTypedSpan send, TypedSpan recv, std::span<const std::int64_t> counts,
                        std::span<const std::int64_t> displs) override;
  Request do_all_to_all(ConstTypedSpan send, std::span<const std::int64_t> send_counts,
                        std::span<const std::int64_t> send_displs, TypedSpan recv,
                        std::span<const std::int64_t> recv_counts,
                        std::span<const std::int64_t> recv_displs) override;
  Request do_all_reduce(ConstTypedSpan send, TypedSpan recv) override;
  Request do_isend(std::span<const std::byte> data, int peer, int tag) override;
  Request do_irecv(std::span<std::byte> data, int peer, int tag) override;

 private:
  friend class detail::DeterministicAllReduce;

  // Advances queued deterministic all-reduces (oldest first) up to and including `target`. With
  // `block`, waits for each one's phase 1; without, stops (returning false) at the first whose
  // phase 1 has not completed. Returns true once `target` has been advanced.
  bool advance_all_reduces_through(const detail::DeterministicAllReduce* target, bool block);
  void forget_all_reduce(const detail::DeterministicAllReduce* target) noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm phase2_comm_ = MPI_COMM_NULL;  // kDeterministic only: all-reduce phase 2
  ReduceMode mode_;
  int rank_ = 0;
  int size_ = 1;
  std::string name_;
  std::vector<int> world_ranks_;                                        // by group rank
  std::deque<detail::DeterministicAllReduce*> unadvanced_all_reduces_;  // posting order
};

}  // namespace canzona::comm
