// The MPI launch protocol both CLIs share (`canzona run`/`compare` in cmd_run.cpp and `canzona
// train` in train/main.cpp), so bad input gives one line and every rank exits the same way:
//   1. everything that can be checked before MPI starts is checked (prepare); a usage error there
//      ends a single process at once (main prints it), and under a launcher is kept;
//   2. MPI starts; on a control world the ranks agree on the launch error (the lowest rank's is
//      printed once, every rank exits 2) and then on the settings (launch/agreement.h);
//   3. the grid is built (a world size that does not match dp x tp x pp is the same error on
//      every rank) and the command runs on it;
//   4. an error the ranks raise alike (UsageError) ends the job with exit 2, any other with 1,
//      through comm::end_job (one line, no abort banner when every rank agrees).
#pragma once

#include <functional>
#include <string>

#include "canzona/comm/grid.h"
#include "canzona/comm/mpi.h"
#include "canzona/launch/agreement.h"

namespace canzona::apps {

struct LaunchSteps {
  // Step 1: checks the flags and loads the inputs; returns the settings ranks must agree on.
  std::function<launch::Settings()> prepare;
  // Step 3: the grid to build (called after prepare succeeded).
  std::function<ParallelDims()> grid_dims;
  std::function<comm::ReduceMode()> reduce_mode;
  // Step 3: runs the command on the grid; returns the exit code.
  std::function<int(comm::Grid&)> run;
};

// Runs the four steps; returns the exit code (or ends the job).
int run_launched(const LaunchSteps& steps);

// For a command-line error under an MPI launcher with more than one rank: starts MPI so that the
// ranks agree on the error and it is printed once (launch::agree_on_launch_error); returns the
// exit code (2).
int launch_error_exit(const std::string& error);

}  // namespace canzona::apps
