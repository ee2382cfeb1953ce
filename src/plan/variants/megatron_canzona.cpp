// Megatron-Canzona's planning code as pure functions (megatron_canzona.h). The arithmetic follows
// upstream's operation order in doubles; upstream computes numel sums in exact Python integers,
// which doubles match while sums stay below 2^53.
#include "variants/megatron_canzona.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>

#include "algorithms/tp_summary.h"
#include "canzona/common/error.h"

namespace canzona::plan::megatron_canzona {
namespace {

void check_layout(const std::vector<std::vector<std::int64_t>>& item_numel,
                  const std::vector<std::vector<std::int64_t>>& item_starts, int ranks) {
  CANZONA_CHECK(ranks > 0, "ranks ", ranks);
  CANZONA_CHECK_EQ(item_numel.size(), item_starts.size());
  for (std::size_t b = 0; b < item_numel.size(); ++b) {
    CANZONA_CHECK_EQ(item_numel[b].size(), item_starts[b].size());
    std::int64_t end = 0;
    for (std::size_t i = 0; i < item_numel[b].size(); ++i) {
      CANZONA_CHECK(item_numel[b][i] >= 1, "bucket ", b, " item ", i, " numel ", item_numel[b][i]);
      CANZONA_CHECK(item_starts[b][i] >= end, "bucket ", b, " item ", i, " overlaps or goes back");
      end = item_starts[b][i] + item_numel[b][i];
    }
  }
}

// Item cuts of positions: rank r's first item is the first whose start is >= pos[r].
ItemCuts items_of_positions(const std::vector<std::int64_t>& starts,
                            const std::vector<std::int64_t>& pos) {
  ItemCuts cuts(pos.size());
  for (std::size_t r = 0; r < pos.size(); ++r)
    cuts[r] =
        static_cast<int>(std::lower_bound(starts.begin(), starts.end(), pos[r]) - starts.begin());
  cuts.back() = static_cast<int>(starts.size());
  return cuts;
}

// global_rank_loads: per bucket in index order, each rank's summed cost (items in order, from
// 0), added to that rank's total.
std::vector<double> rank_loads(const std::vector<ItemCuts>& cuts,
                               const std::vector<std::vector<double>>& cost, int ranks) {
  std::vector<double> load(ranks, 0.0);
  for (std::size_t b = 0; b < cuts.size(); ++b) {
    for (int r = 0; r < ranks; ++r) {
      double bucket_load = 0.0;
      for (int i = cuts[b][r]; i < cuts[b][r + 1]; ++i) bucket_load += cost[b][i];
      load[r] += bucket_load;
    }
  }
  return load;
}

}  // namespace

double balance_ratio(const std::vector<double>& loads) {
  double sum = 0.0;
  for (double l : loads) sum += l;
  if (sum == 0.0 || loads.empty()) return 1.0;
  return *std::max_element(loads.begin(), loads.end()) / (sum / static_cast<double>(loads.size()));
}

std::vector<std::vector<std::int64_t>> greedy_positions(
    const std::vector<std::vector<std::int64_t>>& item_numel,
    const std::vector<std::vector<std::int64_t>>& item_starts, int ranks, double alpha) {
  check_layout(item_numel, item_starts, ranks);
  CANZONA_CHECK(alpha >= 0.0 && alpha <= 1.0, "alpha ", alpha);
  const std::size_t buckets = item_numel.size();
  // bounds[b]: 0 and the item ends, strictly ascending; the last is the bucket's total.
  std::vector<std::vector<std::int64_t>> bounds(buckets);
  std::vector<std::int64_t> total(buckets);
  std::int64_t grand_total = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    bounds[b].push_back(0);
    for (std::size_t i = 0; i < item_numel[b].size(); ++i)
      bounds[b].push_back(item_starts[b][i] + item_numel[b][i]);
    total[b] = bounds[b].back();
    grand_total += total[b];
  }
  const double mu = static_cast<double>(grand_total) / ranks;
  std::vector<std::size_t> order(buckets);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return total[a] > total[b]; });

  std::vector<std::int64_t> load(ranks, 0);  // L_r in positions
  std::vector<double> deficit(ranks), target(ranks);
  std::vector<std::vector<std::int64_t>> result(buckets);
  for (std::size_t b : order) {
    const double bucket_total = static_cast<double>(total[b]);
    const double even = bucket_total / ranks;
    double deficit_sum = 0.0;
    for (int r = 0; r < ranks; ++r) {
      deficit[r] = std::max(0.0, mu - static_cast<double>(load[r]));
      deficit_sum += deficit[r];
    }
    for (int r = 0; r < ranks; ++r) {
      const double greedy = deficit_sum <= 1e-9 ? even : deficit[r] / deficit_sum * bucket_total;
      target[r] = (1 - alpha) * even + alpha * greedy;
    }
    const std::vector<std::int64_t>& bound = bounds[b];
    std::vector<std::int64_t> pos(static_cast<std::size_t>(ranks) + 1, 0);
    pos[ranks] = total[b];
    std::size_t lo = 0;  // index of pos[r] in bound
    double cumulative = 0.0;
    for (int r = 0; r + 1 < ranks; ++r) {
      cumulative += target[r];
      // Upstream scans bound upwards from pos[r] keeping the first strict improvement, i.e. the
      // nearest at or after pos[r], the smaller on ties (|C - v| falls, then rises, along bound).
      const double c = cumulative;
      std::size_t above = static_cast<std::size_t>(
          std::lower_bound(bound.begin() + lo, bound.end(), c,
                           [](std::int64_t v, double x) { return static_cast<double>(v) < x; }) -
          bound.begin());
      if (above == bound.size()) above = bound.size() - 1;
      std::size_t best = above;
      if (above > lo && std::abs(c - static_cast<double>(bound[above - 1])) <=
                            std::abs(c - static_cast<double>(bound[above])))
        best = above - 1;
      pos[r + 1] = bound[best];
      lo = best;
      load[r] += pos[r + 1] - pos[r];
    }
    load[ranks - 1] += pos[ranks] - pos[ranks - 1];
    result[b] = std::move(pos);
  }
  return result;
}

DpResult dp_item_cuts(const std::vector<std::vector<std::int64_t>>& item_numel,
                      const std::vector<std::vector<std::int64_t>>& item_starts,
                      const std::vector<std::int64_t>& bucket_numel, int ranks, double alpha,
                      const std::vector<std::vector<double>>& compare_cost) {
  check_layout(item_numel, item_starts, ranks);
  CANZONA_CHECK_EQ(bucket_numel.size(), item_numel.size());
  CANZONA_CHECK_EQ(compare_cost.size(), item_numel.size());
  const std::size_t buckets = item_numel.size();
  DpResult result;
  std::vector<ItemCuts> greedy(buckets);
  const auto positions = greedy_positions(item_numel, item_starts, ranks, alpha);
  for (std::size_t b = 0; b < buckets; ++b) {
    CANZONA_CHECK_EQ(compare_cost[b].size(), item_numel[b].size());
    CANZONA_CHECK(
        item_numel[b].empty() || item_starts[b].back() + item_numel[b].back() <= bucket_numel[b],
        "bucket ", b, " items run past its numel ", bucket_numel[b]);
    result.cuts.push_back(start_index_cuts(item_starts[b], bucket_numel[b], ranks));
    greedy[b] = items_of_positions(item_starts[b], positions[b]);
  }
  result.start_index_ratio = balance_ratio(rank_loads(result.cuts, compare_cost, ranks));
  result.greedy_ratio = balance_ratio(rank_loads(greedy, compare_cost, ranks));
  // "Stick with the original plan if the new plan isn't strictly better."
  if (result.greedy_ratio < result.start_index_ratio) {
    result.cuts = std::move(greedy);
    result.greedy_kept = true;
  }
  return result;
}

DpResult dp_item_cuts(const std::vector<std::vector<std::int64_t>>& item_numel,
                      const std::vector<std::vector<std::int64_t>>& item_starts,
                      const std::vector<std::int64_t>& bucket_numel, int ranks, double alpha) {
  std::vector<std::vector<double>> numel_cost(item_numel.size());
  for (std::size_t b = 0; b < item_numel.size(); ++b)
    numel_cost[b].assign(item_numel[b].begin(), item_numel[b].end());
  return dp_item_cuts(item_numel, item_starts, bucket_numel, ranks, alpha, numel_cost);
}

std::vector<TpGroup> tp_groups_by_key(const std::vector<TpTask>& tasks,
                                      const std::vector<double>& key, int hosts, double capacity) {
  CANZONA_CHECK(hosts > 0, "hosts ", hosts);
  CANZONA_CHECK_EQ(key.size(), tasks.size());
  for (double k : key) CANZONA_CHECK(k >= 0.0, "TP key ", k, " is negative or NaN");
  const int n = static_cast<int>(tasks.size());
  // Upstream's meta_items order: (key, index) descending.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (key[a] != key[b]) return key[a] > key[b];
    return a > b;
  });
  // The tasks renumbered by that order, for lpt_hosts: its (cost desc, index asc) order on them
  // is upstream's order, and its heap of (load, host) is partition_solve's.
  std::vector<TpTask> by_position(n);
  for (int k = 0; k < n; ++k) by_position[k].cost = key[order[k]];

  std::vector<TpGroup> groups;
  detail::Summariser summarise(hosts);
  auto close = [&](int first, int last) {  // positions [first, last) form a group
    std::vector<int> which(last - first);
    std::iota(which.begin(), which.end(), first);
    TpGroup group;
    group.hosts = lpt_hosts(by_position, which, std::vector<double>(hosts, 0.0));
    for (int k : which) group.tasks.push_back(order[k]);
    summarise(tasks, group);
    groups.push_back(std::move(group));
  };

  // The candidate group's LPT loads. LPT is prefix-stable in this order, so adding the next task
  // to the least-loaded host equals partition_solve re-solving the whole candidate.
  std::priority_queue<double, std::vector<double>, std::greater<double>> loads;
  double max_load = 0.0;
  double key_sum = 0.0;
  int first = 0;
  auto reset = [&] {
    loads = {};
    for (int h = 0; h < hosts; ++h) loads.push(0.0);
    max_load = 0.0;
    key_sum = 0.0;
  };
  reset();
  int k = 0;
  while (k < n) {
    const double c = key[order[k]];
    const bool overflow =
        (key_sum + c) / hosts > capacity || std::max(max_load, loads.top() + c) > capacity;
    if (overflow) {
      if (first == k) {  // alone over capacity (upstream raised before getting here)
        close(k, k + 1);
        ++k;
      } else {
        close(first, k);
      }
      first = k;
      reset();
      continue;
    }
    const double least = loads.top();
    loads.pop();
    loads.push(least + c);
    max_load = std::max(max_load, least + c);
    key_sum += c;
    ++k;
  }
  if (first < n) close(first, n);
  return groups;
}

std::vector<TpGroup> tp_groups(const std::vector<TpTask>& tasks,
                               const std::vector<std::int64_t>& shard_elements, int hosts,
                               std::int64_t capacity_elements) {
  std::vector<double> key(shard_elements.begin(), shard_elements.end());
  return tp_groups_by_key(tasks, key, hosts, static_cast<double>(capacity_elements));
}

}  // namespace canzona::plan::megatron_canzona
