// Starting, using and stopping MPI from a `main` (docs/design.md section 4, "Errors"): the
// public entry points of the MPI backend (src/comm/mpi/); callers need no <mpi.h>.
//
// Terms. The *caller* (an application's main or a test main) owns MPI's lifetime through one
// MpiSession; everything MPI-backed (Grid, MpiCommunicator) must be destroyed before it. A *fatal
// error* is one after which ranks cannot continue consistently; abort_all() reports it in one line
// naming the rank and takes down every rank of the job, so none hangs in a collective.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "canzona/comm/grid.h"

namespace canzona::comm {

// RAII for MPI_Init_thread / MPI_Finalize. Requests MPI_THREAD_FUNNELED (only the main thread
// calls MPI) and accepts any level the library provides (SINGLE suffices: no other thread calls
// MPI). Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD. If MPI is already initialized the session
// neither initializes nor finalizes it. Throws canzona::Error when MPI_Init_thread fails; the
// destructor never throws.
class MpiSession {
 public:
  explicit MpiSession(int* argc = nullptr, char*** argv = nullptr);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int provided_thread_level() const { return provided_; }

 private:
  bool owns_ = false;
  int provided_ = 0;
};

// Prints "canzona: rank R: <message>" as one line on stderr (newlines in message become spaces)
// and calls MPI_Abort(MPI_COMM_WORLD, code), which ends every rank with a non-zero status. Without
// an initialized MPI it prints "canzona: <message>" and exits the process. code 0 is replaced by 1.
[[noreturn]] void abort_all(const std::string& message, int code);

// How long end_job() waits for every rank to reach it before it gives up on an orderly end.
inline constexpr int kEndJobWaitMs = 3000;

// Ends the job after an error, without Open MPI's MPI_ABORT banner when it can. Each rank that
// calls it enters a barrier on a communicator reserved for this (MPI_COMM_WORLD duplicated by
// MpiSession, so it never matches a collective the error interrupted) and waits up to
// kEndJobWaitMs:
//   * every rank arrived (they raised the error at the same point, e.g. from the same flags or
//     file): the ranks exchange their messages, the lowest rank prints one line, "canzona: error:
//     <message>" (code 2), "canzona: <message>" (codes above 128: stopped by signal code - 128)
//     or "canzona: failed: <message>", prefixed "rank 0: " when the ranks' messages differ; every
//     rank finalizes MPI and exits with the lowest rank's code;
//   * some rank did not arrive (it is blocked in a collective the others left): abort_all().
// Without an initialized MPI it prints the line and exits. code 0 is replaced by 1.
[[noreturn]] void end_job(const std::string& message, int code);

// This process's rank in MPI_COMM_WORLD while MPI is running (initialized and not finalized);
// std::nullopt otherwise. Never throws.
std::optional<int> world_rank_if_initialized() noexcept;

// The number of ranks the MPI launcher started, read from its environment before MPI is
// initialized (Open MPI's OMPI_COMM_WORLD_SIZE, else PMI_SIZE of MPICH's Hydra); 1 when the
// process was not started by a launcher (or the value is not a positive integer).
int launched_world_size();

// A communicator over every rank of MPI_COMM_WORLD for control traffic (barrier, all_gather_u64)
// made before the grid exists, e.g. runtime::check_agreement. Its construction is the same
// collective on every rank whatever the flags (it does not depend on a ReduceMode ranks may
// disagree on), and its traffic never matches the grid's (a duplicate of the world). Its float
// collectives use MPI's native reductions; use the grid's communicators for those. Collective over
// the world; throws canzona::Error when MPI is not initialized or fails.
std::unique_ptr<Communicator> make_mpi_control_world();

// Builds the DP x TP x PP grid of `dims` (its ep and etp too: Grid::dims()) over MPI_COMM_WORLD
// with MPI_Comm_split: the DP, TP, PP and embedding groups of grid.h; collective over the world
// (ranks of middle stages take part in the embedding groups' split without joining one). Throws
// canzona::UsageError (before any communication, identically on every rank) as
// ParallelDims::check_world(world size), e.g. "world size 6 != dp 2 x tp 2 x pp 1 (launch with
// mpirun -np 4)"; canzona::Error when MPI is not initialized or fails.
std::unique_ptr<Grid> make_mpi_grid(const ParallelDims& dims, ReduceMode mode);

// The expert groups (grid.h) of this rank of `dense` (a grid of make_mpi_grid), with ep and etp
// from dense.dims(); collective over the world. Throws as ParallelDims::check().
ExpertGroups make_mpi_expert_groups(const Grid& dense, ReduceMode mode);

}  // namespace canzona::comm
