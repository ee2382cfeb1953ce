// Clocks for phase timing: wall clock (steady) and this thread's CPU time.
#pragma once

#include <time.h>

#include <chrono>

namespace canzona {

inline double wall_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time of the calling thread (clock_gettime(CLOCK_THREAD_CPUTIME_ID)), ms. Counts only while
// the thread runs, so it measures work even when ranks share cores.
inline double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace canzona
