// Chrome trace (Trace Event Format, "X" complete events) of one run, one track per rank.
//
// Terms. Each world rank is a process (pid = world rank, named "rank R (dp D, tp T)") with two
// threads: tid 0 "compute" holds the phases (forward, backward, gradient sync, optimizer, micro
// groups, parameter sync), tid 1 "collectives" holds one span per collective from the moment it
// is posted to the moment its wait() returned. Times are microseconds since the run's epoch
// (steady clock, taken right after a barrier so ranks line up). Perfetto and chrome://tracing
// open the file.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"

namespace canzona::engine {

inline constexpr int kComputeTrack = 0;
inline constexpr int kCollectiveTrack = 1;
// The trainer's 1F1B timeline under PP > 1: each micro-batch's forward ("F3") and backward
// ("B3"), and the waits for a neighbour stage between them ("wait").
inline constexpr int kPipelineTrack = 2;

class Trace {
 public:
  // A disabled trace records nothing (every call is a no-op).
  explicit Trace(bool enabled = false);

  bool enabled() const { return enabled_; }
  // Sets time zero for this rank.
  void reset_epoch();
  // Microseconds since the epoch.
  double now_us() const;
  // Records a span [start_us, end_us) on `track` in category `category`.
  void span(int track, const std::string& category, const std::string& name, double start_us,
            double end_us);
  // Events recorded so far, as comma-separated JSON objects without the pid field (added when
  // the trace is written).
  std::string events_json(int pid) const;
  std::size_t size() const { return events_.size(); }

 private:
  struct Event {
    int track;
    std::string category;
    std::string name;
    double start_us;
    double duration_us;
  };
  bool enabled_;
  std::chrono::steady_clock::time_point epoch_;
  std::vector<Event> events_;
};

// RAII span on the compute track.
class TraceScope {
 public:
  TraceScope(Trace& trace, const char* category, std::string name);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace& trace_;
  const char* category_;
  std::string name_;
  double start_us_;
};

// Collective over grid.world(): sends every rank's events to world rank 0, which writes the
// whole trace to `path` (throws UsageError when it cannot). The event text travels as raw bytes in
// an All-to-All on the world communicator, whose bytes are not part of any reported phase.
void write_chrome_trace(comm::Grid& grid, const Trace& trace, const std::string& path);

}  // namespace canzona::engine
