#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"
#include "mpi_internal.h"

namespace canzona::comm {
namespace {

using detail::check_mpi;

bool mpi_usable() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// Splits the world by `color`, ordered by `key`, into a communicator of this rank's group.
std::unique_ptr<Communicator> split_world(int color, int key, ReduceMode mode) {
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &group), "MPI_Comm_split");
  std::unique_ptr<Communicator> communicator;
  try {
    communicator = std::make_unique<MpiCommunicator>(group, mode);
  } catch (...) {
    MPI_Comm_free(&group);
    throw;
  }
  check_mpi(MPI_Comm_free(&group), "MPI_Comm_free");
  return communicator;
}

}  // namespace

std::optional<int> world_rank_if_initialized() noexcept {
  int rank = 0;
  if (!mpi_usable() || MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) return std::nullopt;
  return rank;
}

int launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* text = std::getenv(name);
    if (text == nullptr) continue;
    char* end = nullptr;
    const long size = std::strtol(text, &end, 10);
    return end != text && *end == '\0' && size > 0 && size <= (1L << 24) ? static_cast<int>(size)
                                                                         : 1;
  }
  return 1;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) {
    check_mpi(MPI_Query_thread(&provided_), "MPI_Query_thread");
  } else {
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided_), "MPI_Init_thread");
    owns_ = true;
  }
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

MpiSession::~MpiSession() {
  if (owns_ && mpi_usable()) MPI_Finalize();
}

void abort_all(const std::string& message, int code) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (code == 0) code = 1;
  if (mpi_usable()) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "canzona: rank %d: %s\n", rank, line.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  } else {
    std::fprintf(stderr, "canzona: %s\n", line.c_str());
    std::fflush(stderr);
  }
  std::_Exit(code);
}

std::unique_ptr<Communicator> make_mpi_control_world() {
  if (!mpi_usable())
    throw Error("make_mpi_control_world: MPI is not initialized (create an MpiSession)");
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, ReduceMode::kNative);
}

std::unique_ptr<Grid> make_mpi_grid(int dp, int tp, int pp, ReduceMode mode) {
  if (!mpi_usable()) throw Error("make_mpi_grid: MPI is not initialized (create an MpiSession)");
  const GridShape shape{dp, tp, pp};
  int world_size = 0;
  int world_rank = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  check_grid_shape(shape, world_size);
  const GridCoord coord = grid_coord(shape, world_rank);
  auto world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, mode);
  auto dp_group = split_world(/*color=*/coord.pp * tp + coord.tp, /*key=*/coord.dp, mode);
  auto tp_group = split_world(/*color=*/coord.pp * dp + coord.dp, /*key=*/coord.tp, mode);
  return std::make_unique<Grid>(shape, coord, std::move(world), std::move(dp_group),
                                std::move(tp_group));
}

}  // namespace canzona::comm
