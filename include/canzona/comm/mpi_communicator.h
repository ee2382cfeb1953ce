// Communicator over an MPI communicator (design.md section 4).
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
//     MPI_Iallgatherv of the summed segments. Phase 1 overlaps with the caller's compute; phase 2
//     is posted inside wait() and runs on a second duplicate communicator, in posting order of the
//     all-reduces (waiting a later all-reduce first advances the earlier ones), so ranks may wait
//     in any order without mismatching collectives.
// all_gather and all_to_all involve no sums and are the same in both modes. Counts and
// displacements must fit MPI's int (canzona::Error otherwise). Not thread-safe: one thread per
// process calls it (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <deque>

#include "canzona/comm/communicator.h"

namespace canzona::comm {

namespace detail {
class DeterministicAllReduce;
}

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm` (MPI_Comm_dup). Throws canzona::Error when MPI fails.
  MpiCommunicator(MPI_Comm comm, ReduceMode mode);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ReduceMode mode() const { return mode_; }

  void barrier() override;
  std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) override;

 protected:
  Request do_reduce_scatter(std::span<const float> send, std::span<float> recv,
                            std::span<const std::int64_t> counts) override;
  Request do_all_gather(std::span<const float> send, std::span<float> recv,
                        std::span<const std::int64_t> counts,
                        std::span<const std::int64_t> displs) override;
  Request do_all_to_all(std::span<const float> send, std::span<const std::int64_t> send_counts,
                        std::span<const std::int64_t> send_displs, std::span<float> recv,
                        std::span<const std::int64_t> recv_counts,
                        std::span<const std::int64_t> recv_displs) override;
  Request do_all_reduce(std::span<const float> send, std::span<float> recv) override;

 private:
  friend class detail::DeterministicAllReduce;

  // Advances queued deterministic all-reduces (oldest first) up to and including `target`.
  void advance_all_reduces_through(const detail::DeterministicAllReduce* target);
  void forget_all_reduce(const detail::DeterministicAllReduce* target) noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm phase2_comm_ = MPI_COMM_NULL;  // kDeterministic only: all-reduce phase 2
  ReduceMode mode_;
  int rank_ = 0;
  int size_ = 1;
  std::deque<detail::DeterministicAllReduce*> unadvanced_all_reduces_;  // posting order
};

}  // namespace canzona::comm
