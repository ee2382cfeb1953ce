// The collective timeout (Megatron's --distributed-timeout-minutes, torch.distributed's process
// group timeout) and the labels a timed-out wait names (docs/cluster.md).
//
// Terms. A *wait* is Request::wait() or a blocking collective of a Communicator. The *collective
// timeout* bounds every wait of the MPI backend: a wait that has not completed after that many
// seconds ends the process with exit status 2 and one line on stderr,
//   canzona: error: rank 0 (host h0): collective timeout: bucket 3 reduce-scatter, MPI_Ialltoallv
//   (deterministic reduce_scatter), on the DP group did not complete within 600 s; waiting for
//   world rank 2 (--collective-timeout)
// naming the MPI call, the *operation label* current when the operation was posted, the group and
// the world ranks it waited for (every other member of a collective's group; the peer of a
// point-to-point message). The process ends without MPI_Finalize or MPI_Abort (either could block
// on a peer that is gone); the launcher then ends the other ranks, or they time out the same way.
// The thread backend (tests in one process) has no timeout.
#pragma once

#include <string>

namespace canzona::comm {

// The default, generous: a slow but live link never takes this long for one operation.
inline constexpr double kDefaultCollectiveTimeoutS = 600.0;
inline constexpr double kMaxCollectiveTimeoutS = 7.0 * 24 * 3600;

// Sets the timeout of every later wait, process-wide. Throws UsageError naming `flag` unless
// 0 < seconds <= kMaxCollectiveTimeoutS.
void set_collective_timeout(double seconds, const char* flag = "--collective-timeout");
double collective_timeout();

// The operation label operations posted on this thread take while the scope lives, e.g.
// "bucket 3 reduce-scatter"; scopes nest (the inner one wins, the outer one is restored at its
// end). Outside every scope the label is empty.
class ScopedOpLabel {
 public:
  explicit ScopedOpLabel(std::string label);
  ~ScopedOpLabel();
  ScopedOpLabel(const ScopedOpLabel&) = delete;
  ScopedOpLabel& operator=(const ScopedOpLabel&) = delete;

 private:
  std::string saved_;
};

const std::string& current_op_label();

}  // namespace canzona::comm
