// Compute/communication stream schedules (timeline.h).
#include "timeline.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::sim {

double exposed_after_window(const std::vector<double>& ready_s, const std::vector<double>& comm_s,
                            double window_s) {
  CANZONA_CHECK_EQ(ready_s.size(), comm_s.size());
  double stream_free = 0.0;
  for (std::size_t i = 0; i < comm_s.size(); ++i) {
    stream_free = std::max(stream_free, ready_s[i]) + comm_s[i];
  }
  return comm_s.empty() ? 0.0 : std::max(0.0, stream_free - window_s);
}

double stall_before_needs(const std::vector<double>& comm_s, const std::vector<double>& need_s) {
  CANZONA_CHECK_EQ(comm_s.size(), need_s.size());
  double end = 0.0;
  double stall = 0.0;
  for (std::size_t i = 0; i < comm_s.size(); ++i) {
    end += comm_s[i];
    stall = std::max(stall, end - need_s[i]);
  }
  return stall;
}

PassTimeline run_prefetched_pass(const std::vector<double>& compute_s,
                                 const std::vector<double>& gather_s,
                                 const std::vector<double>& after_s) {
  CANZONA_CHECK_EQ(compute_s.size(), gather_s.size());
  CANZONA_CHECK_EQ(compute_s.size(), after_s.size());
  PassTimeline out;
  if (compute_s.empty()) return out;
  double stream_free = gather_s[0];
  double gathered = stream_free;  // end of the gather the next segment waits for
  double t = 0.0;
  for (std::size_t i = 0; i < compute_s.size(); ++i) {
    const double start = std::max(t, gathered);
    if (i + 1 < compute_s.size()) {
      stream_free = std::max(stream_free, start) + gather_s[i + 1];
      gathered = stream_free;
    }
    t = start + compute_s[i];
    out.compute_s += compute_s[i];
    if (after_s[i] > 0.0) stream_free = std::max(stream_free, t) + after_s[i];
  }
  out.compute_end_s = t;
  out.stream_end_s = stream_free;
  return out;
}

namespace {

// A collective on the shared comm stream: starts when every rank posted it and the stream is free.
double run_collective(double& stream_free, const std::vector<double>& posted, double duration) {
  double start = stream_free;
  for (double t : posted) start = std::max(start, t);
  stream_free = start + duration;
  return stream_free;
}

// Makespan of the micro groups; with_comm = false runs every collective in zero time. The
// schedule is a max-plus system, so the makespan never decreases when a duration grows.
double makespan(const std::vector<GroupCost>& groups, bool pipelined, bool with_comm) {
  const std::size_t hosts = groups.front().compute_s.size();
  const double comm = with_comm ? 1.0 : 0.0;
  double stream_free = 0.0;
  std::vector<double> compute_free(hosts, 0.0);  // [host] end of its last compute
  std::vector<double> posted(hosts, 0.0);
  double gather_end = run_collective(stream_free, posted, comm * groups[0].gather_s);
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const GroupCost& g = groups[k];
    std::vector<double> start(hosts);
    for (std::size_t h = 0; h < hosts; ++h) start[h] = std::max(compute_free[h], gather_end);
    double next_gather_end = 0.0;
    if (pipelined && k + 1 < groups.size()) {
      next_gather_end = run_collective(stream_free, start, comm * groups[k + 1].gather_s);
    }
    for (std::size_t h = 0; h < hosts; ++h) compute_free[h] = start[h] + g.compute_s[h];
    double scatter_end = run_collective(stream_free, compute_free, comm * g.scatter_s);
    if (k + 1 < groups.size()) {
      if (pipelined) {
        gather_end = next_gather_end;
      } else {
        std::fill(posted.begin(), posted.end(), scatter_end);
        gather_end = run_collective(stream_free, posted, comm * groups[k + 1].gather_s);
      }
    }
  }
  double total = stream_free;
  for (double t : compute_free) total = std::max(total, t);
  return total;
}

}  // namespace

TpTimeline run_micro_groups(const std::vector<GroupCost>& groups, bool pipelined) {
  TpTimeline out;
  if (groups.empty()) return out;
  for (const auto& g : groups)
    CANZONA_CHECK_EQ(g.compute_s.size(), groups.front().compute_s.size());
  out.total_s = makespan(groups, pipelined, true);
  out.compute_s = makespan(groups, pipelined, false);
  return out;
}

}  // namespace canzona::sim
