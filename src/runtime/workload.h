// The simulated forward/backward compute: real sgemm work of a requested FLOP count, so the DP
// collectives posted during the backward overlap something real (RunOptions file comment).
#pragma once

#include <functional>
#include <vector>

namespace canzona::runtime {

class Workload {
 public:
  static constexpr int kSide = 128;  // each call is a kSide^3 sgemm, 2 kSide^3 FLOPs

  Workload();
  // Runs round(flops / (2 kSide^3)) sgemms; 0 does nothing. The result is kept in a scratch
  // matrix nobody reads (the work is what matters). `between`, when set, runs after each sgemm
  // (the caller drives its collectives in flight there).
  void run(double flops, const std::function<void()>& between = {});
  // FLOPs actually executed for a request.
  static double executed_flops(double flops);

 private:
  std::vector<float> a_, b_, c_;  // (kSide, kSide) each
};

}  // namespace canzona::runtime
