#include "algorithms/bounds.h"

#include <algorithm>
#include <limits>

namespace canzona::plan {
namespace {

// Relative round-down of the summed bound (c), see bounds.h.
constexpr double kSumSlack = 1e-12;

}  // namespace

double MakespanBound::value() const {
  return std::max({mean, largest, pigeonhole});
}

double MakespanBound::relative() const {
  return mean > 0.0 ? value() / mean : 1.0;
}

MakespanBound makespan_lower_bound(std::vector<BoundItem> items, double divisible,
                                   std::int64_t bins) {
  MakespanBound bound;
  if (bins < 1) bins = 1;
  std::erase_if(items, [](const BoundItem& i) { return i.count <= 0 || !(i.size > 0.0); });
  std::sort(items.begin(), items.end(),
            [](const BoundItem& a, const BoundItem& b) { return a.size > b.size; });
  // first[i]: rank (0-based, descending order) of the first copy of items[i]; sum[i]: the sizes
  // of all copies before it.
  std::vector<std::int64_t> first(items.size() + 1, 0);
  // sums in long double: (c) is a difference of two prefix sums, whose rounding error is
  // subtracted below so the bound stays a bound.
  std::vector<long double> sum(items.size() + 1, 0.0L);
  for (std::size_t i = 0; i < items.size(); ++i) {
    first[i + 1] = first[i] + items[i].count;
    sum[i + 1] = sum[i] + static_cast<long double>(items[i].size) * items[i].count;
  }
  const std::int64_t n = first.back();
  bound.mean =
      static_cast<double>((sum.back() + std::max(0.0, divisible)) / static_cast<long double>(bins));
  if (n == 0) return bound;
  bound.largest = items.front().size;
  // Σ of the items at ranks [0, r) in descending order.
  auto prefix = [&](std::int64_t r) -> long double {
    const auto at = std::upper_bound(first.begin(), first.end(), r) - first.begin() - 1;
    if (static_cast<std::size_t>(at) >= items.size()) return sum.back();
    return sum[at] + static_cast<long double>(items[at].size) * (r - first[at]);
  };
  const long double unit = std::numeric_limits<long double>::epsilon();
  for (std::int64_t k = 1; k <= (n - 1) / bins; ++k) {
    const std::int64_t top = k * bins + 1;  // the k·m + 1 largest items
    const long double upper = prefix(top);
    // Each prefix carries at most (terms + 1) · unit relative error, terms <= distinct items.
    const long double error = 4.0L * (static_cast<long double>(items.size()) + 2) * unit * upper;
    const double smallest = static_cast<double>(upper - prefix(top - (k + 1)) - error);
    if (smallest > bound.pigeonhole) {
      bound.pigeonhole = smallest;
      bound.pigeonhole_k = k;
    }
  }
  bound.pigeonhole *= 1.0 - kSumSlack;
  return bound;
}

MakespanBound makespan_lower_bound(const std::vector<double>& sizes, double divisible,
                                   std::int64_t bins) {
  std::vector<BoundItem> items;
  items.reserve(sizes.size());
  for (double s : sizes) items.push_back({s, 1});
  return makespan_lower_bound(std::move(items), divisible, bins);
}

}  // namespace canzona::plan
