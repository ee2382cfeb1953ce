// comm_wire_bytes_check MODE REPEATS PREFIX [BASELINE_PREFIX BASELINE_REPEATS]
//
// Cross-checks the byte counters against what Open MPI actually sent. Run under mpirun with
//   --mca pml_monitoring_enable 2 --mca pml_monitoring_enable_output 3
//   --mca pml_monitoring_filename PREFIX
// so that at MPI_Finalize every rank writes PREFIX.<rank>.prof, whose "POINT TO POINT" section
// lists, per destination rank, the bytes of every message handed to the PML (the layer below the
// collective algorithms): user messages ("E") and collectives' internal ones ("I"). The report
// covers the whole run, communicator creation included, so wire_bytes_check.cmake runs this
// program twice with the same setup and different REPEATS of the workload (workload.h). Given the
// baseline run's PREFIX and REPEATS, each rank compares after MPI_Finalize the difference of its
// reported bytes to other ranks with the difference of its counters, prints one line and exits 1
// on a mismatch or an unreadable report.
//
// MODE deterministic posts every kind. MODE native posts all_gather and all_to_all only: native
// reduce-scatter and all-reduce move whatever Open MPI's algorithms choose (see
// mpi_communicator.h), so their wire bytes are not the counted ones.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "canzona/comm/mpi.h"
#include "mpi_communicator.h"
#include "workload.h"

namespace {

using canzona::comm::CommBytes;

// Bytes the report at `path` lists as sent by `rank` to other ranks; -1 when it cannot be read.
std::int64_t reported_bytes_to_others(const std::string& path, int rank) {
  std::ifstream in(path);
  if (!in) return -1;
  std::int64_t total = 0;
  bool point_to_point = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      point_to_point = line == "# POINT TO POINT";
      continue;
    }
    char kind = 0;
    int src = -1;
    int dst = -1;
    long long bytes = 0;
    if (!point_to_point ||
        std::sscanf(line.c_str(), "%c %d %d %lld bytes", &kind, &src, &dst, &bytes) != 4) {
      continue;
    }
    if ((kind == 'E' || kind == 'I') && src == rank && dst != rank) total += bytes;
  }
  return total;
}

int usage() {
  std::fprintf(stderr,
               "usage: comm_wire_bytes_check deterministic|native REPEATS PREFIX "
               "[BASELINE_PREFIX BASELINE_REPEATS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace canzona::comm;
  if (argc != 4 && argc != 6) return usage();
  const std::string mode_name = argv[1];
  if (mode_name != "deterministic" && mode_name != "native") return usage();
  const ReduceMode mode = mode_name == "native" ? ReduceMode::kNative : ReduceMode::kDeterministic;
  testing_util::WorkloadKinds kinds;
  if (mode == ReduceMode::kNative) kinds.reduce_scatter = kinds.all_reduce = false;
  const int repeats = std::atoi(argv[2]);
  const std::string prefix = argv[3];

  int rank = 0;
  CommBytes per_workload;
  CommBytes counted;
  {
    MpiSession session(&argc, &argv);
    try {
      MpiCommunicator comm(MPI_COMM_WORLD, mode);
      rank = comm.rank();
      for (int i = 0; i < repeats; ++i) {
        testing_util::run_workload(comm, kinds);
        if (i == 0) per_workload = comm.bytes();
      }
      counted = comm.bytes();
    } catch (const std::exception& e) {
      abort_all(e.what(), 1);
    }
  }  // MPI_Finalize: the monitoring PML writes PREFIX.<rank>.prof
  if (counted.total() != repeats * per_workload.total()) {
    std::printf("rank %d: counters grew unevenly: %lld after %d workloads, %lld after the first\n",
                rank, static_cast<long long>(counted.total()), repeats,
                static_cast<long long>(per_workload.total()));
    return 1;
  }
  if (argc == 4) return 0;

  const std::string baseline_prefix = argv[4];
  const int baseline_repeats = std::atoi(argv[5]);
  const std::string report = prefix + "." + std::to_string(rank) + ".prof";
  const std::string baseline_report = baseline_prefix + "." + std::to_string(rank) + ".prof";
  const std::int64_t sent = reported_bytes_to_others(report, rank);
  const std::int64_t baseline_sent = reported_bytes_to_others(baseline_report, rank);
  if (sent < 0 || baseline_sent < 0) {
    std::printf("rank %d: cannot read %s or %s (is the monitoring PML enabled?)\n", rank,
                report.c_str(), baseline_report.c_str());
    return 1;
  }
  const std::int64_t wire = sent - baseline_sent;
  const std::int64_t expected = (repeats - baseline_repeats) * per_workload.total();
  std::printf("rank %d: %d %s workloads sent %lld bytes to other ranks, counters say %lld: %s\n",
              rank, repeats - baseline_repeats, mode_name.c_str(), static_cast<long long>(wire),
              static_cast<long long>(expected), wire == expected ? "equal" : "MISMATCH");
  return wire == expected ? 0 : 1;
}
