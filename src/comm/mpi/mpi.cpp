#include "canzona/comm/mpi.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include "canzona/common/error.h"
#include "mpi_internal.h"

namespace canzona::comm {
namespace {

using detail::check_mpi;

// MPI_COMM_WORLD duplicated by the MpiSession that initialized MPI: end_job's channel.
MPI_Comm g_end_job_comm = MPI_COMM_NULL;

bool mpi_usable() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// Splits the world by `color`, ordered by `key`, into a communicator of this rank's group; null
// when color is MPI_UNDEFINED (the rank is in no group; the split is still collective). `name`
// names the group in a timeout's line.
std::unique_ptr<Communicator> split_world(int color, int key, ReduceMode mode, const char* name) {
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &group), "MPI_Comm_split");
  if (group == MPI_COMM_NULL) return nullptr;
  std::unique_ptr<Communicator> communicator;
  try {
    communicator = std::make_unique<MpiCommunicator>(group, mode, name);
  } catch (...) {
    MPI_Comm_free(&group);
    throw;
  }
  check_mpi(MPI_Comm_free(&group), "MPI_Comm_free");
  return communicator;
}

// end_job's line: "canzona: error: " for usage errors (2), "canzona: " for a stop by a signal
// (128 + its number; the message says which), "canzona: failed: " otherwise.
const char* end_job_prefix(int code) {
  return code == 2 ? "canzona: error: " : code > 128 ? "canzona: " : "canzona: failed: ";
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
  if (g_end_job_comm == MPI_COMM_NULL)
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g_end_job_comm), "MPI_Comm_dup");
}

MpiSession::~MpiSession() {
  if (!owns_ || !mpi_usable()) return;
  if (g_end_job_comm != MPI_COMM_NULL) MPI_Comm_free(&g_end_job_comm);
  MPI_Finalize();
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

void end_job(const std::string& message, int code) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (code == 0) code = 1;
  const char* prefix = end_job_prefix(code);
  std::fflush(stdout);
  if (!mpi_usable() || g_end_job_comm == MPI_COMM_NULL) {
    std::fprintf(stderr, "%s%s\n", prefix, line.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
  MPI_Request barrier = MPI_REQUEST_NULL;
  int arrived = 0;
  if (MPI_Ibarrier(g_end_job_comm, &barrier) == MPI_SUCCESS) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kEndJobWaitMs);
    while (!arrived && std::chrono::steady_clock::now() < deadline) {
      if (MPI_Test(&barrier, &arrived, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!arrived) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (!arrived) abort_all(line, code);  // a rank is elsewhere: only an abort ends it
  int rank = 0, size = 1;
  MPI_Comm_rank(g_end_job_comm, &rank);
  MPI_Comm_size(g_end_job_comm, &size);
  // Every rank's code and message; the lowest rank's are the job's.
  int mine[2] = {code, static_cast<int>(line.size())};
  std::vector<int> heads(2 * static_cast<std::size_t>(size));
  MPI_Allgather(mine, 2, MPI_INT, heads.data(), 2, MPI_INT, g_end_job_comm);
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  int total = 0;
  for (int q = 0; q < size; ++q) {
    counts[q] = heads[2 * q + 1];
    displs[q] = total;
    total += counts[q];
  }
  std::vector<char> all(static_cast<std::size_t>(std::max(total, 1)));
  MPI_Allgatherv(line.data(), mine[1], MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR,
                 g_end_job_comm);
  const std::string first(all.data(), static_cast<std::size_t>(counts[0]));
  bool same = true;
  for (int q = 1; q < size; ++q)
    same = same && std::string(all.data() + displs[q], counts[q]) == first;
  const int job_code = heads[0];
  if (rank == 0) {
    std::fprintf(stderr, "%s%s%s\n", end_job_prefix(job_code),
                 same ? "" : "rank 0: ", first.c_str());
    std::fflush(stderr);
  }
  MPI_Comm_free(&g_end_job_comm);
  MPI_Finalize();
  std::_Exit(job_code);
}

std::unique_ptr<Communicator> make_mpi_control_world() {
  if (!mpi_usable())
    throw Error("make_mpi_control_world: MPI is not initialized (create an MpiSession)");
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, ReduceMode::kNative);
}

// The PP group and the embedding group of the rank at `coord` of `dims`, split from the world with
// colors `line` (unique per (dp, tp) coordinates over the world) and keys the pp index (grid.h).
// Collective over the world: middle stages pass MPI_UNDEFINED for the embedding group.
static std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>> split_pipeline(
    const ParallelDims& dims, const GridCoord& coord, int line, ReduceMode mode) {
  auto pp_group = split_world(line, coord.pp, mode, "PP");
  auto embedding = split_world(is_embedding_stage(coord.pp, dims.pp) ? line : MPI_UNDEFINED,
                               coord.pp, mode, "embedding");
  return {std::move(pp_group), std::move(embedding)};
}

std::unique_ptr<Grid> make_mpi_grid(const ParallelDims& dims, ReduceMode mode) {
  if (!mpi_usable()) throw Error("make_mpi_grid: MPI is not initialized (create an MpiSession)");
  int world_size = 0;
  int world_rank = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  dims.check_world(world_size);
  const GridCoord coord = dims.coord(world_rank);
  auto world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, mode);
  auto dp_group =
      split_world(/*color=*/coord.pp * dims.tp + coord.tp, /*key=*/coord.dp, mode, "DP");
  auto tp_group =
      split_world(/*color=*/coord.pp * dims.dp + coord.dp, /*key=*/coord.tp, mode, "TP");
  auto [pp_group, embedding] =
      split_pipeline(dims, coord, /*line=*/coord.dp * dims.tp + coord.tp, mode);
  return std::make_unique<Grid>(dims, coord, std::move(world), std::move(dp_group),
                                std::move(tp_group), std::move(pp_group), std::move(embedding));
}

ExpertGroups make_mpi_expert_groups(const Grid& dense, ReduceMode mode) {
  if (!mpi_usable())
    throw Error("make_mpi_expert_groups: MPI is not initialized (create an MpiSession)");
  const ParallelDims& s = dense.dims();
  s.check();
  const int ep = s.ep, etp = s.etp, edp = s.edp();
  const GridCoord g = dense.coord();
  ExpertGroups out;
  out.coord = s.expert_coord(g.dp, g.tp);
  const ExpertCoord& c = out.coord;
  const ParallelDims dims{.dp = edp, .tp = etp, .pp = s.pp};
  const GridCoord coord{g.pp, c.edp, c.etp};
  // Colors unique per group over the world; keys order each group as grid.h says.
  auto slice =
      split_world(c.ep, dims.rank(coord), mode, "expert slice");  // every stage of this EP rank
  auto edp_group = split_world((g.pp * ep + c.ep) * etp + c.etp, c.edp, mode, "expert DP");
  auto etp_group = split_world((g.pp * edp + c.edp) * ep + c.ep, c.etp, mode, "expert TP");
  out.ep = split_world((g.pp * edp + c.edp) * etp + c.etp, c.ep, mode, "EP");
  auto [pp_group, embedding] =
      split_pipeline(dims, coord, /*line=*/(c.ep * edp + c.edp) * etp + c.etp, mode);
  out.grid =
      std::make_unique<Grid>(dims, coord, std::move(slice), std::move(edp_group),
                             std::move(etp_group), std::move(pp_group), std::move(embedding));
  return out;
}

}  // namespace canzona::comm
