// The MPI launch protocol both CLIs share (launch.h).
#include "launch.h"

#include <exception>
#include <memory>

#include "canzona/common/error.h"
#include "canzona/launch/plan_check.h"

namespace canzona::apps {

int run_launched(const LaunchSteps& steps) {
  launch::Settings settings;
  std::string launch_error;
  try {
    settings = steps.prepare();
  } catch (const UsageError& e) {
    if (comm::launched_world_size() <= 1) throw;
    launch_error = e.what();
  }
  comm::MpiSession mpi;
  try {
    {
      const auto world = comm::make_mpi_control_world();
      if (const int code = launch::agree_on_launch_error(*world, launch_error)) return code;
      launch::check_agreement(*world, settings);
    }
    std::unique_ptr<comm::Grid> grid;
    try {
      grid = comm::make_mpi_grid(steps.grid_dims(), steps.reduce_mode());
    } catch (const UsageError& e) {
      throw launch::PlanAgreementError(e.what());  // the world size: the same on every rank
    }
    return steps.run(*grid);
  } catch (const UsageError& e) {
    comm::end_job(e.what(), 2);
  } catch (const std::exception& e) {
    comm::end_job(e.what(), 1);
  }
  return 1;
}

int launch_error_exit(const std::string& error) {
  comm::MpiSession mpi;
  try {
    const auto world = comm::make_mpi_control_world();
    return launch::agree_on_launch_error(*world, error);
  } catch (const std::exception& e) {
    comm::abort_all(e.what(), 1);
  }
}

}  // namespace canzona::apps
