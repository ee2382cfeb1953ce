// A collective in flight and the one place the engine waits for one: the exposed wall time goes
// to the caller's phase, the CPU time spent polling to wait_cpu_ms() (a client's busy time
// excludes it), and the span to the trace's collective track.
#pragma once

#include <string>

#include "canzona/comm/request.h"
#include "canzona/comm/timeout.h"
#include "canzona/engine/trace.h"

namespace canzona::engine {

struct Pending {
  comm::Request request;
  std::string name;        // trace label
  double posted_us = 0.0;  // trace clock when posted
};

class CollectiveWaits {
 public:
  explicit CollectiveWaits(Trace& trace) : trace_(trace) {}

  // Labels `pending` and stamps its post time: call right before posting its collective, and keep
  // the returned scope until it is posted (a timed-out wait names the operation by this label,
  // canzona/comm/timeout.h).
  [[nodiscard]] comm::ScopedOpLabel label(Pending& pending, std::string name);
  // Waits for `pending` if in flight, adds the wall time to exposed_ms and traces it.
  void wait(Pending& pending, double& exposed_ms);
  double wait_cpu_ms() const { return wait_cpu_ms_; }
  Trace& trace() { return trace_; }

 private:
  Trace& trace_;
  double wait_cpu_ms_ = 0.0;
};

}  // namespace canzona::engine
