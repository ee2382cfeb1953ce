// Phase 1 of our DP planner (dp_balance.h): placing the atomic items (matrix params).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "algorithms/dp_balance.h"

namespace canzona::plan::detail {
namespace {

constexpr double kExactBudget = 4e6;  // largest R·m² of one bucket solved by dynamic programming
constexpr double kExactTotal = 2e7;   // summed R·m² over the buckets solved exactly

// Exact monotone assignment of `costs` (in order) to ranks 0..R-1 minimising Σ (L_r + S_r)^2.
// Item k may only go to ranks [cap_lo[k], cap_hi[k]].
std::vector<int> assign_exact(const std::vector<double>& costs, const std::vector<double>& load,
                              const std::vector<int>& cap_lo, const std::vector<int>& cap_hi) {
  const int m = static_cast<int>(costs.size());
  const int ranks = static_cast<int>(load.size());
  std::vector<double> phi(m + 1, 0.0);
  for (int i = 0; i < m; ++i) phi[i + 1] = phi[i] + costs[i];
  // best[r][j]: least cost placing the first j items on ranks 0..r; from[r][j]: first item of
  // rank r's segment (j when rank r is empty). Row-major in one allocation each (ranks may be
  // 2^20 with a handful of items, where one vector per rank would dominate the time).
  const std::size_t stride = static_cast<std::size_t>(m) + 1;
  std::vector<double> best(static_cast<std::size_t>(ranks) * stride, kInf);
  std::vector<int> from(static_cast<std::size_t>(ranks) * stride, 0);
  for (int r = 0; r < ranks; ++r) {
    double* row = &best[static_cast<std::size_t>(r) * stride];
    const double* above = r == 0 ? nullptr : row - stride;
    int* row_from = &from[static_cast<std::size_t>(r) * stride];
    for (int j = 0; j <= m; ++j) {
      // Segment [i, j) on rank r, i descending while every item in it allows r; on ties the
      // smallest i wins.
      for (int i = j; i >= 0; --i) {
        if (i < j && (r < cap_lo[i] || r > cap_hi[i])) break;
        const double before = r == 0 ? (i == 0 ? 0.0 : kInf) : above[i];
        if (before == kInf) continue;
        const double s = phi[j] - phi[i];
        const double value = before + s * (2.0 * load[r] + s);
        if (value <= row[j]) {
          row[j] = value;
          row_from[j] = i;
        }
      }
    }
  }
  std::vector<int> owner(m, 0);
  int j = m;
  for (int r = ranks - 1; r >= 0; --r) {
    const int i = from[static_cast<std::size_t>(r) * stride + j];
    for (int k = i; k < j; ++k) owner[k] = r;
    j = i;
  }
  return owner;
}

// Algorithm 1 targeting with α = 1 for buckets too large for the exact solver.
std::vector<int> assign_targeting(const std::vector<double>& costs, const std::vector<double>& load,
                                  double mu) {
  const int m = static_cast<int>(costs.size());
  const int ranks = static_cast<int>(load.size());
  const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
  double deficit_sum = 0.0;
  for (double l : load) deficit_sum += std::max(0.0, mu - l);
  std::vector<int> owner(m, ranks - 1);
  double target = 0.0, cumulative = 0.0;
  int r = 0;
  for (int i = 0; i < m; ++i) {
    // Advance to the rank whose cumulative target window holds this item's midpoint.
    const double mid = cumulative + costs[i] / 2.0;
    while (r < ranks - 1) {
      const double share =
          deficit_sum > 0.0 ? std::max(0.0, mu - load[r]) / deficit_sum : 1.0 / ranks;
      if (mid <= target + total * share) break;
      target += total * share;
      ++r;
    }
    owner[i] = r;
    cumulative += costs[i];
  }
  return owner;
}

// Range-minimum over rank loads with point updates; ties go to the lowest rank (argmin) or to the
// rank nearest the middle of the range (argmin_middle), which leaves room on both sides for the
// item's neighbours in its bucket.
class LoadTree {
 public:
  explicit LoadTree(int ranks) : size_(1) {
    while (size_ < ranks) size_ *= 2;
    low_.assign(2 * size_, {kInf, 0});
    high_.assign(2 * size_, {kInf, 0});
    for (int r = 0; r < ranks; ++r) {
      low_[size_ + r] = {0.0, r};
      high_[size_ + r] = {0.0, -r};
    }
    for (int i = size_ - 1; i > 0; --i) {
      low_[i] = std::min(low_[2 * i], low_[2 * i + 1]);
      high_[i] = std::min(high_[2 * i], high_[2 * i + 1]);
    }
  }
  void add(int rank, double value) {
    int i = size_ + rank;
    low_[i].first += value;
    high_[i].first += value;
    for (i /= 2; i > 0; i /= 2) {
      low_[i] = std::min(low_[2 * i], low_[2 * i + 1]);
      high_[i] = std::min(high_[2 * i], high_[2 * i + 1]);
    }
  }
  int argmin(int lo, int hi) const { return query(low_, lo, hi).second; }  // inclusive
  int argmin_middle(int lo, int hi) const {
    const int mid = lo + (hi - lo) / 2;
    const auto right = query(low_, mid, hi);
    if (mid == lo) return right.second;
    const auto left = query(high_, lo, mid - 1);
    if (left.first < right.first) return -left.second;
    if (right.first < left.first) return right.second;
    return right.second - mid <= mid + left.second ? right.second : -left.second;
  }
  double load(int rank) const { return low_[size_ + rank].first; }

 private:
  using Node = std::pair<double, int>;
  Node query(const std::vector<Node>& tree, int lo, int hi) const {
    Node best{kInf, 0};
    for (int l = lo + size_, r = hi + size_ + 1; l < r; l /= 2, r /= 2) {
      if (l & 1) best = std::min(best, tree[l++]);
      if (r & 1) best = std::min(best, tree[--r]);
    }
    return best;
  }
  int size_;
  std::vector<Node> low_, high_;  // (load, rank) and (load, -rank)
};

}  // namespace

// Phase 1 per bucket: buckets in descending total time (ties by index), each assigned by the
// exact monotone solver (or Algorithm 1 targeting when too large). Returns the loads.
std::vector<double> place_per_bucket(std::vector<BucketState>& state,
                                     const std::vector<std::vector<DpItem>>& items,
                                     const std::vector<double>& totals, int ranks, double mu) {
  std::vector<int> order(state.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  std::vector<double> load(ranks, 0.0);
  double exact_work = 0.0;
  for (int b : order) {
    auto& s = state[b];
    if (s.atomic.empty()) continue;
    std::vector<double> costs;
    for (int i : s.atomic) costs.push_back(items[b][i].time);
    const double m = static_cast<double>(costs.size());
    const double work = static_cast<double>(ranks) * m * m;
    const bool exact = work <= kExactBudget && exact_work + work <= kExactTotal;
    if (exact) exact_work += work;
    const std::vector<int> owner =
        exact ? assign_exact(costs, load, s.cap_lo, s.cap_hi) : assign_targeting(costs, load, mu);
    for (std::size_t k = 0; k < costs.size(); ++k) {
      s.owner[s.atomic[k]] = owner[k];
      load[owner[k]] += costs[k];
    }
  }
  return load;
}

// Keeps each divisible item holding at least a quarter of a rank's mean memory (an embedding, an
// output layer) free to span most ranks: the atomic items before it in its bucket may only go to
// the first ranks (as many as their time needs with 25% slack, at least min_edge) and those after
// it to the last.
void cap_around_big_divisible(std::vector<BucketState>& state,
                              const std::vector<std::vector<DpItem>>& items, int ranks,
                              int min_edge) {
  double total_memory = 0.0, total_time = 0.0;
  for (const auto& bucket : items)
    for (const auto& item : bucket) {
      total_memory += item.memory;
      if (!item.divisible) total_time += item.time;
    }
  const double big = 0.25 * total_memory / ranks;
  const double mean_time = total_time / ranks;
  // Ranks at one end that can take `time` with 25% slack (at least min_edge).
  const int floor_edge = std::clamp(min_edge, 1, ranks);
  auto edge_for = [&](double time) {
    if (mean_time <= 0.0) return floor_edge;
    return std::clamp(static_cast<int>(std::ceil(1.25 * time / mean_time)), floor_edge, ranks);
  };
  for (std::size_t b = 0; b < state.size(); ++b) {
    auto& s = state[b];
    int first_big = -1, last_big = -1;
    for (std::size_t i = 0; i < items[b].size(); ++i)
      if (items[b][i].divisible && items[b][i].memory >= big) {
        if (first_big < 0) first_big = static_cast<int>(i);
        last_big = static_cast<int>(i);
      }
    if (first_big < 0) continue;
    double before = 0.0, after = 0.0;
    for (int i : s.atomic) {
      if (i < first_big) before += items[b][i].time;
      if (i > last_big) after += items[b][i].time;
    }
    const int edge_before = edge_for(before);
    const int edge_after = edge_for(after);
    for (std::size_t k = 0; k < s.atomic.size(); ++k) {
      if (s.atomic[k] < first_big) s.cap_hi[k] = edge_before - 1;
      if (s.atomic[k] > last_big) s.cap_lo[k] = ranks - edge_after;
    }
  }
}

// Phase 1 globally: all atomic items by descending time (ties by bucket, position), each to the
// least-loaded rank within its caps that keeps its bucket's cuts monotone given the items already
// placed.
std::vector<double> place_by_lpt(std::vector<BucketState>& state,
                                 const std::vector<std::vector<DpItem>>& items, int ranks,
                                 bool middle_ties) {
  struct Entry {
    double time;
    int bucket, pos;
  };
  std::vector<Entry> order;
  for (std::size_t b = 0; b < state.size(); ++b)
    for (std::size_t k = 0; k < state[b].atomic.size(); ++k)
      order.push_back(
          {items[b][state[b].atomic[k]].time, static_cast<int>(b), static_cast<int>(k)});
  std::stable_sort(order.begin(), order.end(),
                   [](const Entry& a, const Entry& b) { return a.time > b.time; });
  std::vector<std::set<int>> placed(state.size());
  LoadTree tree(ranks);
  for (const Entry& e : order) {
    auto& s = state[e.bucket];
    auto& set = placed[e.bucket];
    const auto after = set.upper_bound(e.pos);
    const int hi = after == set.end() ? ranks - 1 : s.owner[s.atomic[*after]];
    const int lo = after == set.begin() ? 0 : s.owner[s.atomic[*std::prev(after)]];
    const int to = std::max(lo, std::min(hi, s.cap_hi[e.pos]));
    const int from = std::min(to, std::max(lo, s.cap_lo[e.pos]));
    const int r = middle_ties ? tree.argmin_middle(from, to) : tree.argmin(from, to);
    s.owner[s.atomic[e.pos]] = r;
    tree.add(r, e.time);
    set.insert(e.pos);
  }
  std::vector<double> load(ranks);
  for (int r = 0; r < ranks; ++r) load[r] = tree.load(r);
  return load;
}

std::vector<double> place_on_grid(std::vector<BucketState>& state,
                                  const std::vector<std::vector<DpItem>>& items, int ranks,
                                  int tp) {
  struct Entry {
    double time;
    int bucket, pos;
  };
  // Capped items first (their ranks are fixed in advance, so the rest packs around them), then
  // by descending time.
  std::vector<Entry> order;
  auto capped = [&](const Entry& e) {
    const auto& s = state[e.bucket];
    return s.cap_lo[e.pos] > 0 || s.cap_hi[e.pos] < ranks - 1;
  };
  for (std::size_t b = 0; b < state.size(); ++b)
    for (std::size_t k = 0; k < state[b].atomic.size(); ++k)
      order.push_back(
          {items[b][state[b].atomic[k]].time, static_cast<int>(b), static_cast<int>(k)});
  std::stable_sort(order.begin(), order.end(), [&](const Entry& a, const Entry& b) {
    if (capped(a) != capped(b)) return capped(a);
    return a.time > b.time;
  });
  std::vector<std::set<int>> placed(state.size());
  std::vector<std::vector<double>> host(ranks, std::vector<double>(tp, 0.0));
  std::vector<double> load(ranks, 0.0);
  std::vector<double> trial(tp);
  std::vector<double> tasks;  // the current item's task costs, largest first
  // Adds `item` to `hosts` (tasks largest first, each to the least-loaded host, lowest on ties).
  auto add = [&](const DpItem& item, std::vector<double>& hosts) {
    if (item.tasks.empty()) {
      for (double& h : hosts) h += item.time / tp;
      return;
    }
    for (double c : tasks) *std::min_element(hosts.begin(), hosts.end()) += c;
  };
  for (const Entry& e : order) {
    auto& s = state[e.bucket];
    auto& set = placed[e.bucket];
    const DpItem& item = items[e.bucket][s.atomic[e.pos]];
    tasks = item.tasks;  // sorted once per item, not once per rank tried
    std::sort(tasks.begin(), tasks.end(), std::greater<>());
    const auto after = set.upper_bound(e.pos);
    const int hi = after == set.end() ? ranks - 1 : s.owner[s.atomic[*after]];
    const int lo = after == set.begin() ? 0 : s.owner[s.atomic[*std::prev(after)]];
    const int to = std::max(lo, std::min(hi, s.cap_hi[e.pos]));
    const int from = std::min(to, std::max(lo, s.cap_lo[e.pos]));
    int best = from;
    double best_peak = kInf, best_load = kInf;
    for (int r = from; r <= to; ++r) {
      trial = host[r];
      add(item, trial);
      const double peak = *std::max_element(trial.begin(), trial.end());
      const double after = load[r] + item.time;
      if (peak < best_peak || (peak == best_peak && after < best_load)) {
        best = r;
        best_peak = peak;
        best_load = after;
      }
    }
    s.owner[s.atomic[e.pos]] = best;
    add(item, host[best]);
    load[best] += item.time;
    set.insert(e.pos);
  }
  return load;
}

}  // namespace canzona::plan::detail
