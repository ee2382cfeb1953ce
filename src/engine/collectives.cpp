#include "collectives.h"

#include "canzona/common/clock.h"

namespace canzona::engine {

comm::ScopedOpLabel CollectiveWaits::label(Pending& pending, std::string name) {
  pending.name = std::move(name);
  pending.posted_us = trace_.now_us();
  return comm::ScopedOpLabel(pending.name);
}

void CollectiveWaits::wait(Pending& pending, double& exposed_ms) {
  if (!pending.request.pending()) return;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  pending.request.wait();
  exposed_ms += wall_ms() - wall0;
  wait_cpu_ms_ += thread_cpu_ms() - cpu0;
  trace_.span(kCollectiveTrack, "collective", pending.name, pending.posted_us, trace_.now_us());
}

}  // namespace canzona::engine
