// A fixed mix of collectives for the byte-accounting cross-checks: every kind, counts with zeros,
// in-place and out-of-place variants, several requests outstanding at once and driven by test()
// before wait(). Values sent are irrelevant (zeros); only the amounts matter. Needs no GoogleTest.
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/comm/communicator.h"

namespace canzona::comm::testing_util {

// Which kinds the workload posts.
struct WorkloadKinds {
  bool reduce_scatter = true;
  bool all_gather = true;
  bool all_to_all = true;
  bool all_reduce = true;
};

// Posts the mix on `comm` (collective: every rank calls it with the same kinds), drives the
// requests with test() for a bounded number of rounds, then waits all of them.
inline void run_workload(Communicator& comm, const WorkloadKinds& kinds) {
  const int P = comm.size();
  const int me = comm.rank();
  std::vector<Request> requests;

  // Reduce-scatter: zeros on odd ranks, then an even split of a non-divisible size.
  std::vector<std::int64_t> rs_counts(P);
  for (int r = 0; r < P; ++r) rs_counts[r] = r % 2 == 1 ? 0 : 3 * r + 5;
  std::int64_t rs_total = 0;
  for (std::int64_t c : rs_counts) rs_total += c;
  const std::vector<std::int64_t> rs_even = even_split(1003, P);
  std::vector<float> rs_send(rs_total), rs_recv(rs_counts[me]);
  std::vector<float> rs_send_even(1003), rs_recv_even(rs_even[me]);

  // All-gather: counts r % 3 * 7 (zero for every third rank), out of place and in place.
  std::vector<std::int64_t> ag_counts(P), ag_displs(P);
  std::int64_t ag_total = 0;
  for (int r = 0; r < P; ++r) {
    ag_counts[r] = r % 3 * 7;
    ag_displs[r] = ag_total;
    ag_total += ag_counts[r];
  }
  std::vector<float> ag_send(ag_counts[me]), ag_recv(ag_total), ag_in_place(ag_total);

  // All-to-all: rank q sends (q + 2r) % 3 * 5 elements to rank r, so this rank receives
  // (q + 2 me) % 3 * 5 from rank q.
  std::vector<std::int64_t> a2a_send_counts(P), a2a_send_displs(P), a2a_recv_counts(P),
      a2a_recv_displs(P);
  std::int64_t a2a_send_total = 0;
  std::int64_t a2a_recv_total = 0;
  for (int r = 0; r < P; ++r) {
    a2a_send_counts[r] = (me + 2 * r) % 3 * 5;
    a2a_send_displs[r] = a2a_send_total;
    a2a_send_total += a2a_send_counts[r];
    a2a_recv_counts[r] = (r + 2 * me) % 3 * 5;
    a2a_recv_displs[r] = a2a_recv_total;
    a2a_recv_total += a2a_recv_counts[r];
  }
  std::vector<float> a2a_send(a2a_send_total), a2a_recv(a2a_recv_total);

  // All-reduce: sizes 0, 1, P + 1 and 1003, in place and out of place.
  const std::vector<std::int64_t> ar_sizes = {0, 1, P + 1, 1003};
  std::vector<std::vector<float>> ar_send, ar_recv;
  for (std::int64_t n : ar_sizes) {
    ar_send.emplace_back(n);
    ar_recv.emplace_back(n);
  }

  if (kinds.all_reduce) requests.push_back(comm.all_reduce(ar_send[0], ar_recv[0]));
  if (kinds.reduce_scatter) requests.push_back(comm.reduce_scatter(rs_send, rs_recv, rs_counts));
  if (kinds.all_reduce) requests.push_back(comm.all_reduce(ar_send[1], ar_send[1]));
  if (kinds.all_gather) {
    requests.push_back(comm.all_gather(ag_send, ag_recv, ag_counts, ag_displs));
    const std::span<const float> own(ag_in_place.data() + ag_displs[me], ag_counts[me]);
    requests.push_back(comm.all_gather(own, ag_in_place, ag_counts, ag_displs));
  }
  if (kinds.all_to_all) {
    requests.push_back(comm.all_to_all(a2a_send, a2a_send_counts, a2a_send_displs, a2a_recv,
                                       a2a_recv_counts, a2a_recv_displs));
  }
  if (kinds.all_reduce) {
    requests.push_back(comm.all_reduce(ar_send[2], ar_recv[2]));
    requests.push_back(comm.all_reduce(ar_send[3], ar_send[3]));
  }
  if (kinds.reduce_scatter) {
    requests.push_back(comm.reduce_scatter(rs_send_even, rs_recv_even, rs_even));
  }
  bool all_done = false;
  for (int round = 0; round < 100'000 && !all_done; ++round) {
    all_done = true;
    for (Request& request : requests) all_done = request.test() && all_done;
  }
  for (Request& request : requests) request.wait();
}

}  // namespace canzona::comm::testing_util
