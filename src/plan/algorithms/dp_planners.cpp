// DP planners (src/plan/algorithms/dp.h). The paper's Algorithm 1 and the start-index rule are
// implemented exactly as published; balanced_cuts is our improvement (docs/design.md section 3).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "algorithms/dp.h"
#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

// Buckets in descending total cost, ties by index (Algorithm 1's visiting order).
std::vector<int> descending_order(const std::vector<double>& totals) {
  std::vector<int> order(totals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  return order;
}

std::vector<double> prefix_sums(const std::vector<double>& costs) {
  std::vector<double> phi(costs.size() + 1, 0.0);
  for (std::size_t i = 0; i < costs.size(); ++i) phi[i + 1] = phi[i] + costs[i];
  return phi;
}

// Smallest u in [lo, n] minimising |Φ(u) - target| (Φ is non-decreasing).
int closest_boundary(const std::vector<double>& phi, int lo, double target) {
  const int n = static_cast<int>(phi.size()) - 1;
  const auto first = phi.begin() + lo;
  int above = static_cast<int>(std::lower_bound(first, phi.end(), target) - phi.begin());
  if (above > n) above = n;
  int best = above;
  if (above - 1 >= lo && std::abs(phi[above - 1] - target) <= std::abs(phi[above] - target))
    best = above - 1;
  return static_cast<int>(std::lower_bound(first, phi.begin() + best + 1, phi[best]) - phi.begin());
}

}  // namespace

ItemCuts start_index_cuts(const std::vector<std::int64_t>& starts, std::int64_t bucket_numel,
                          int ranks) {
  CANZONA_CHECK(ranks > 0 && bucket_numel > 0);
  const int n = static_cast<int>(starts.size());
  ItemCuts cuts(static_cast<std::size_t>(ranks) + 1, n);
  cuts[0] = 0;
  int i = 0;
  for (int r = 1; r < ranks; ++r) {
    // First item whose start lies at or beyond r * S, S = bucket_numel / ranks.
    while (i < n && starts[i] * ranks < static_cast<std::int64_t>(r) * bucket_numel) ++i;
    cuts[r] = i;
  }
  return cuts;
}

std::vector<ItemCuts> alpha_balanced_cuts(const std::vector<std::vector<double>>& costs, int ranks,
                                          double alpha) {
  CANZONA_CHECK(ranks > 0);
  std::vector<double> totals;
  double grand_total = 0.0;
  for (const auto& bucket : costs) {
    totals.push_back(std::accumulate(bucket.begin(), bucket.end(), 0.0));
    grand_total += totals.back();
  }
  const double mu = grand_total / ranks;
  std::vector<double> load(ranks, 0.0);
  std::vector<ItemCuts> result(costs.size());
  std::vector<double> deficit(ranks), share(ranks);
  for (int b : descending_order(totals)) {
    const std::vector<double> phi = prefix_sums(costs[b]);
    const int n = static_cast<int>(costs[b].size());
    double deficit_sum = 0.0;
    for (int r = 0; r < ranks; ++r) {
      deficit[r] = std::max(0.0, mu - load[r]);
      deficit_sum += deficit[r];
    }
    for (int r = 0; r < ranks; ++r) {
      const double fill = deficit_sum > 0.0 ? deficit[r] / deficit_sum : 1.0 / ranks;
      share[r] = (1.0 - alpha) / ranks + alpha * fill;
    }
    ItemCuts cuts(static_cast<std::size_t>(ranks) + 1, 0);
    double cumulative = 0.0;
    for (int r = 0; r + 1 < ranks; ++r) {
      cumulative += totals[b] * share[r];
      cuts[r + 1] = closest_boundary(phi, cuts[r], cumulative);
    }
    cuts[ranks] = n;
    for (int r = 0; r < ranks; ++r) load[r] += phi[cuts[r + 1]] - phi[cuts[r]];
    result[b] = std::move(cuts);
  }
  return result;
}

std::vector<int> layerwise_owners(const std::vector<double>& costs, int ranks) {
  CANZONA_CHECK(ranks > 0);
  std::vector<int> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return costs[a] > costs[b]; });
  std::vector<int> owner(costs.size(), 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int round = static_cast<int>(k / ranks);
    const int pos = static_cast<int>(k % ranks);
    owner[order[k]] = round % 2 == 0 ? pos : ranks - 1 - pos;
  }
  return owner;
}

std::vector<std::vector<int>> layerwise_lpt_ranks(
    const std::vector<std::vector<double>>& cost,
    const std::vector<std::vector<std::int64_t>>& numel, int ranks, double numel_cap) {
  CANZONA_CHECK(ranks > 0 && cost.size() == numel.size());
  std::vector<double> load(ranks, 0.0);
  std::vector<std::vector<int>> out(cost.size());
  for (std::size_t b = 0; b < cost.size(); ++b) {
    const std::size_t n = cost[b].size();
    CANZONA_CHECK(numel[b].size() == n);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return cost[b][x] > cost[b][y]; });
    const double total = std::accumulate(numel[b].begin(), numel[b].end(), 0.0);
    const double cap = numel_cap * total / ranks;
    std::vector<std::int64_t> held(ranks, 0);
    out[b].assign(n, 0);
    for (int i : order) {
      int best = -1;
      for (int r = 0; r < ranks; ++r) {
        if (static_cast<double>(held[r] + numel[b][i]) > cap) continue;
        if (best < 0 || load[r] < load[best]) best = r;
      }
      if (best < 0)  // no rank stays within the cap: plain LPT
        best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      out[b][i] = best;
      held[best] += numel[b][i];
      load[best] += cost[b][i];
    }
  }
  return out;
}

std::vector<std::int64_t> equal_chunk_cuts(std::int64_t bucket_numel, int ranks) {
  CANZONA_CHECK(ranks > 0);
  std::vector<std::int64_t> cuts(static_cast<std::size_t>(ranks) + 1);
  // floor(bucket_numel * r / ranks) without forming the product, which overflows int64 for a
  // padded layerwise bucket at the largest DP (bucket_numel = q * ranks + m, m < ranks).
  const std::int64_t q = bucket_numel / ranks, m = bucket_numel % ranks;
  for (int r = 0; r <= ranks; ++r) cuts[r] = q * r + m * r / ranks;
  return cuts;
}

}  // namespace canzona::plan
