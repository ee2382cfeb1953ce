// The bandwidth MPI achieves between hosts in a direct exchange: every rank sends every other
// rank a block at once (MPI_Alltoall), as the runtime's deterministic Reduce-Scatter does
// (bench/cluster/sim-vs-net.sh calibrates the simulator's link with it).
//
//   mpirun -np P canzona_exchange_bench BYTES_PER_RANK RANKS_PER_HOST REPEATS
//
// Ranks are placed RANKS_PER_HOST consecutive ones per host. A host of g ranks sends
// g x (P - g) x BYTES_PER_RANK / P bytes to the other hosts per exchange (and receives as many);
// rank 0 prints, per repeat, the slowest rank's time and that many bytes over it, then the
// median, as JSON on the last line: {"node_bytes": B, "median_s": T, "bandwidth_Bps": B / T}.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0)
      std::fprintf(stderr, "usage: %s BYTES_PER_RANK RANKS_PER_HOST REPEATS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const long bytes = std::atol(argv[1]);
  const int per_host = std::atoi(argv[2]);
  const int repeats = std::atoi(argv[3]);
  if (bytes < size || per_host < 1 || size % per_host != 0 || repeats < 1) {
    if (rank == 0) std::fprintf(stderr, "bad arguments\n");
    MPI_Finalize();
    return 2;
  }
  const int block = static_cast<int>(bytes / size);
  std::vector<char> send(static_cast<std::size_t>(block) * size, 1), recv(send.size());
  std::vector<double> times;
  for (int k = 0; k <= repeats; ++k) {  // the first is a warm-up (connections)
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Alltoall(send.data(), block, MPI_CHAR, recv.data(), block, MPI_CHAR, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (k > 0) times.push_back(slowest);
  }
  if (rank == 0) {
    const double node_bytes =
        static_cast<double>(per_host) * (size - per_host) * static_cast<double>(block);
    for (double t : times)
      std::printf("exchange %.1f ms: %.0f Mbit/s per host\n", t * 1e3, node_bytes * 8 / t / 1e6);
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("{\"node_bytes\": %.0f, \"median_s\": %.6f, \"bandwidth_Bps\": %.0f}\n", node_bytes,
                median, node_bytes / median);
  }
  MPI_Finalize();
  return 0;
}
