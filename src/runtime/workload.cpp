#include "workload.h"

#include <cmath>

#include "canzona/optim/linalg.h"

namespace canzona::runtime {
namespace {

constexpr double kFlopsPerCall = 2.0 * Workload::kSide * Workload::kSide * Workload::kSide;

long calls_for(double flops) {
  return std::lround(flops / kFlopsPerCall);
}

}  // namespace

Workload::Workload() : a_(kSide * kSide), b_(kSide * kSide), c_(kSide * kSide, 0.0f) {
  for (std::size_t i = 0; i < a_.size(); ++i) {
    a_[i] = static_cast<float>(i % 7) * 0.01f;
    b_[i] = static_cast<float>(i % 5) * 0.01f;
  }
}

void Workload::run(double flops, const std::function<void()>& between) {
  const long calls = calls_for(flops);
  const auto a = optim::matrix_view(a_.data(), kSide, kSide);
  const auto b = optim::matrix_view(b_.data(), kSide, kSide);
  const auto c = optim::matrix_view(c_.data(), kSide, kSide);
  for (long i = 0; i < calls; ++i) {
    optim::gemm(optim::Trans::kNo, optim::Trans::kNo, 1.0f, a, b, 0.0f, c);
    if (between) between();
  }
}

double Workload::executed_flops(double flops) {
  return static_cast<double>(calls_for(flops)) * kFlopsPerCall;
}

}  // namespace canzona::runtime
