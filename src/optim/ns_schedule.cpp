// What a Newton–Schulz iteration will do, without running it (muon.h): the coefficient sets, the
// Gram iteration's restarts and where it is used, the FLOP counts. Pure arithmetic on the options
// (canzona_optim_spec: no BLAS), so the planner prices exactly what the kernel runs.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "canzona/common/error.h"
#include "canzona/optim/muon.h"

namespace canzona::optim {
namespace {

constexpr std::array<NsTriple, 1> kSimple = {{{3.4445f, -4.7750f, 2.0315f}}};
constexpr std::array<NsTriple, 5> kQuintic = {{{4.0848f, -6.8946f, 2.9270f},
                                               {3.9505f, -6.3029f, 2.6377f},
                                               {3.7418f, -5.5913f, 2.3037f},
                                               {2.8769f, -3.1427f, 1.2046f},
                                               {2.8366f, -3.0525f, 1.2012f}}};
constexpr std::array<NsTriple, 8> kPolarExpress = {{{8.2051f, -22.9019f, 16.4607f},
                                                    {4.0664f, -2.8612f, 0.5184f},
                                                    {3.9096f, -2.8234f, 0.5250f},
                                                    {3.2856f, -2.4153f, 0.4853f},
                                                    {2.2779f, -1.6198f, 0.3985f},
                                                    {1.8726f, -1.2307f, 0.3585f},
                                                    {1.8564f, -1.2132f, 0.3568f},
                                                    {1.8750f, -1.2500f, 0.3750f}}};

// The restart analysis (gram_restarts in muon.h). The grid: x_0 = 1, x_{k+1} = x_k * kGridRatio,
// 2000 points down to 1e-10; the ratio is 10^(-10/1999) written out, so every machine walks the
// same grid whatever its libm.
constexpr int kGridPoints = 2000;
constexpr double kGridRatio = 0.9885474012575777;
constexpr double kOverflow = 1e300;  // |Q| past this counts as divergence

// max over the grid and the iterations of |Q_t(x)| for the perturbation -delta and these
// restarts (restart[i] true: iteration i begins with a restart); infinity when Q diverges.
double max_q(std::span<const NsTriple> set, int steps, double delta,
             const std::vector<bool>& restart) {
  double worst = 0.0;
  double x0 = 1.0;
  for (int k = 0; k < kGridPoints; ++k, x0 *= kGridRatio) {
    double x = x0, q = 1.0, r = x0 * x0 - delta;
    for (int i = 0; i < steps; ++i) {
      if (restart[static_cast<std::size_t>(i)]) {
        x = q * x;
        r = x * x - delta;
        q = 1.0;
      }
      const NsTriple t = set[std::min<std::size_t>(static_cast<std::size_t>(i), set.size() - 1)];
      const double z = static_cast<double>(t.c) * r * r + static_cast<double>(t.b) * r +
                       static_cast<double>(t.a);
      q *= z;
      r *= z * z;
      if (!std::isfinite(q) || std::fabs(q) > kOverflow || !std::isfinite(r))
        return std::numeric_limits<double>::infinity();
      worst = std::max(worst, std::fabs(q));
    }
  }
  return worst;
}

struct RestartPlan {
  bool stable = false;
  std::vector<int> restarts;
};

// Tries every set of `count` restart positions in 1..steps-1 (lexicographic order, the first of
// equal maxima kept); returns the best and its max |Q|.
std::pair<double, std::vector<int>> best_positions(std::span<const NsTriple> set, int steps,
                                                   double delta, int count) {
  std::vector<int> pick(static_cast<std::size_t>(count));
  for (int j = 0; j < count; ++j) pick[static_cast<std::size_t>(j)] = j + 1;
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> best_pick;
  while (true) {
    std::vector<bool> restart(static_cast<std::size_t>(steps), false);
    for (int p : pick) restart[static_cast<std::size_t>(p)] = true;
    const double m = max_q(set, steps, delta, restart);
    if (m < best) {
      best = m;
      best_pick = pick;
    }
    int j = count - 1;  // next combination
    while (j >= 0 && pick[static_cast<std::size_t>(j)] == steps - count + j) --j;
    if (j < 0) break;
    ++pick[static_cast<std::size_t>(j)];
    for (int k = j + 1; k < count; ++k)
      pick[static_cast<std::size_t>(k)] = pick[static_cast<std::size_t>(k - 1)] + 1;
  }
  return {best, best_pick};
}

RestartPlan analyse(NsCoefficients coefficients, int steps, NsDtype dtype) {
  RestartPlan plan;
  if (steps < 1 || steps > kGramMaxSteps) return plan;
  const std::span<const NsTriple> set = ns_coefficients(coefficients);
  const double delta = dtype == NsDtype::kBF16 ? 0x1p-8 : 0x1p-24;
  const double bound = kGramMaxRoundingError / delta;  // u max |Q| <= kGramMaxRoundingError
  for (int count = steps >= 3 ? 1 : 0; count <= steps - 1; ++count) {
    const auto [m, pick] =
        count == 0 ? std::pair{max_q(set, steps, delta, std::vector<bool>(steps, false)),
                               std::vector<int>{}}
                   : best_positions(set, steps, delta, count);
    if (m <= bound) {
      plan.stable = true;
      plan.restarts = pick;
      return plan;
    }
  }
  return plan;
}

const RestartPlan& restart_plan(const NewtonSchulzOptions& o) {
  static std::mutex mutex;
  static std::map<std::tuple<NsCoefficients, int, NsDtype>, RestartPlan> memo;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::tuple{o.coefficients, o.steps, o.dtype};
  auto it = memo.find(key);
  if (it == memo.end()) it = memo.emplace(key, analyse(o.coefficients, o.steps, o.dtype)).first;
  return it->second;
}

struct Flops {
  double executed = 0.0;
  double counted = 0.0;
};

Flops standard_flops(std::int64_t rows, std::int64_t cols, int steps) {
  const double s = static_cast<double>(std::min(rows, cols));
  const double l = static_cast<double>(std::max(rows, cols));
  return {steps * (3.0 * s * s * l + s * s * s), steps * (4.0 * s * s * l + 2.0 * s * s * s)};
}

Flops gram_flops(std::int64_t rows, std::int64_t cols, int steps,
                 const std::vector<int>& restarts) {
  const double s = static_cast<double>(std::min(rows, cols));
  const double l = static_cast<double>(std::max(rows, cols));
  const auto restarts_at = [&](int i) {
    return std::find(restarts.begin(), restarts.end(), i) != restarts.end();
  };
  double big = 1.0;    // X X^T products (one triangle executed)
  double apply = 1.0;  // Q X products
  double small = 0.0;  // s x s products with a symmetric result
  for (int i = 0; i < steps; ++i) {
    const bool fresh = i == 0 || restarts_at(i);
    if (fresh && i > 0) {
      big += 1.0;
      apply += 1.0;
    }
    small += fresh ? 1.0 : 2.0;                              // R R, and Q Z
    if (i + 1 < steps && !restarts_at(i + 1)) small += 2.0;  // R Z, Z (R Z)
  }
  return {big * s * s * l + apply * 2.0 * s * s * l + small * s * s * s,
          (big + apply) * 2.0 * s * s * l + small * 2.0 * s * s * s};
}

Flops iteration_flops(std::int64_t rows, std::int64_t cols, const NewtonSchulzOptions& o) {
  if (uses_gram(rows, cols, o)) return gram_flops(rows, cols, o.steps, gram_restarts(o));
  return standard_flops(rows, cols, o.steps);
}

}  // namespace

std::span<const NsTriple> ns_coefficients(NsCoefficients set) {
  switch (set) {
    case NsCoefficients::kSimple:
      return kSimple;
    case NsCoefficients::kQuintic:
      return kQuintic;
    case NsCoefficients::kPolarExpress:
      return kPolarExpress;
  }
  throw Error("ns_coefficients: invalid coefficient set");
}

NsDtype parse_ns_dtype(const std::string& name) {
  if (name == "fp32") return NsDtype::kF32;
  if (name == "bf16") return NsDtype::kBF16;
  throw UsageError(str("unknown Newton-Schulz dtype '", name, "' (known: fp32, bf16)"));
}

const char* to_string(NsDtype dtype) {
  return dtype == NsDtype::kBF16 ? "bf16" : "fp32";
}

NsAlgorithm parse_ns_algorithm(const std::string& name) {
  if (name == "standard") return NsAlgorithm::kStandard;
  if (name == "gram") return NsAlgorithm::kGram;
  throw UsageError(str("unknown Newton-Schulz algorithm '", name, "' (known: standard, gram)"));
}

const char* to_string(NsAlgorithm algorithm) {
  return algorithm == NsAlgorithm::kGram ? "gram" : "standard";
}

std::vector<int> gram_restarts(const NewtonSchulzOptions& options) {
  return restart_plan(options).restarts;
}

bool gram_stable(const NewtonSchulzOptions& options) {
  return restart_plan(options).stable;
}

bool uses_gram(std::int64_t rows, std::int64_t cols, const NewtonSchulzOptions& options) {
  if (options.algorithm != NsAlgorithm::kGram || options.steps < 1 || rows * cols == 0)
    return false;
  const RestartPlan& plan = restart_plan(options);
  if (!plan.stable) return false;
  return gram_flops(rows, cols, options.steps, plan.restarts).executed <=
         kGramMaxFlopRatio * standard_flops(rows, cols, options.steps).executed;
}

double newton_schulz_flops(std::int64_t rows, std::int64_t cols, int steps) {
  return standard_flops(rows, cols, steps).counted;
}

double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols, int steps) {
  return standard_flops(rows, cols, steps).executed;
}

double newton_schulz_flops(std::int64_t rows, std::int64_t cols,
                           const NewtonSchulzOptions& options) {
  return iteration_flops(rows, cols, options).counted;
}

double newton_schulz_executed_flops(std::int64_t rows, std::int64_t cols,
                                    const NewtonSchulzOptions& options) {
  return iteration_flops(rows, cols, options).executed;
}

}  // namespace canzona::optim
