// Our DP planner (include/canzona/plan/dp.h, balanced_cuts). Three phases over the buckets:
//   1. atomic items, two ways, keeping the one with the lower maximum after phase 2:
//      (a) buckets in descending total time, each by the monotone assignment minimising
//      Σ_r (L_r + S_r)^2 (S_r = time rank r receives from this bucket), solved exactly by dynamic
//      programming over (items, ranks) while R·m² is small (per bucket and summed), else by
//      Algorithm 1 targeting (α = 1);
//      (b) global LPT: items by descending time, each to the least-loaded rank its bucket's
//      already-placed neighbours allow;
//   2. refinement: while moving a boundary item off the most loaded rank, or swapping it with a
//      cheaper boundary item of another rank, keeps cuts monotone and lowers the pair's maximum,
//      apply the best such change;
//   3. divisible items, largest memory first: water-filled over the ranks their neighbours allow,
//      towards equal memory; their cut points may fall on any element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "canzona/common/error.h"
#include "canzona/plan/dp.h"

namespace canzona::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kExactBudget = 4e6;  // largest R·m² of one bucket solved by dynamic programming
constexpr double kExactTotal = 2e7;   // summed R·m² over the buckets solved exactly

struct BucketState {
  std::vector<int> atomic;                       // item indices of atomic items, in order
  std::vector<int> owner;                        // [item] owner of an atomic item, -1 for divisible
  std::vector<std::vector<std::int64_t>> parts;  // [item] element counts per rank (divisible)
  std::vector<int> first_rank, last_rank;        // [item] ranks holding the item, -1 if unplaced
  std::vector<int> cap_lo, cap_hi;               // [atomic position] ranks the item may ever go to
};

// Exact monotone assignment of `costs` (in order) to ranks 0..R-1 minimising Σ (L_r + S_r)^2.
// Item k may only go to ranks [cap_lo[k], cap_hi[k]].
std::vector<int> assign_exact(const std::vector<double>& costs, const std::vector<double>& load,
                              const std::vector<int>& cap_lo, const std::vector<int>& cap_hi) {
  const int m = static_cast<int>(costs.size());
  const int ranks = static_cast<int>(load.size());
  std::vector<double> phi(m + 1, 0.0);
  for (int i = 0; i < m; ++i) phi[i + 1] = phi[i] + costs[i];
  // best[r][j]: least cost placing the first j items on ranks 0..r; from[r][j]: first item of
  // rank r's segment (j when rank r is empty).
  std::vector<std::vector<double>> best(ranks, std::vector<double>(m + 1, kInf));
  std::vector<std::vector<int>> from(ranks, std::vector<int>(m + 1, 0));
  for (int r = 0; r < ranks; ++r) {
    for (int j = 0; j <= m; ++j) {
      // Segment [i, j) on rank r, i descending while every item in it allows r; on ties the
      // smallest i wins.
      for (int i = j; i >= 0; --i) {
        if (i < j && (r < cap_lo[i] || r > cap_hi[i])) break;
        const double before = r == 0 ? (i == 0 ? 0.0 : kInf) : best[r - 1][i];
        if (before == kInf) continue;
        const double s = phi[j] - phi[i];
        const double value = before + s * (2.0 * load[r] + s);
        if (value <= best[r][j]) {
          best[r][j] = value;
          from[r][j] = i;
        }
      }
    }
  }
  std::vector<int> owner(m, 0);
  int j = m;
  for (int r = ranks - 1; r >= 0; --r) {
    const int i = from[r][j];
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

// An atomic item at the edge of its owner's segment in a bucket, and the ranks [lo, hi] it may
// move to without breaking monotone cuts.
struct Boundary {
  int bucket = 0;
  int item = 0;
  int owner = 0;
  int lo = 0;
  int hi = 0;
  double cost = 0.0;
};

std::vector<Boundary> boundaries(const std::vector<BucketState>& state,
                                 const std::vector<std::vector<DpItem>>& items, int ranks) {
  std::vector<Boundary> out;
  for (std::size_t b = 0; b < state.size(); ++b) {
    const auto& atomic = state[b].atomic;
    const auto& owner = state[b].owner;
    const std::size_t m = atomic.size();
    for (std::size_t k = 0; k < m; ++k) {
      const int o = owner[atomic[k]];
      const bool first = k == 0 || owner[atomic[k - 1]] != o;
      const bool last = k + 1 == m || owner[atomic[k + 1]] != o;
      if (!first && !last) continue;
      Boundary e{static_cast<int>(b), atomic[k], o, o, o, items[b][atomic[k]].time};
      if (first) e.lo = std::max(state[b].cap_lo[k], k == 0 ? 0 : owner[atomic[k - 1]]);
      if (last) e.hi = std::min(state[b].cap_hi[k], k + 1 == m ? ranks - 1 : owner[atomic[k + 1]]);
      if (e.lo < e.hi) out.push_back(e);
    }
  }
  return out;
}

// Local search on the time maximum: move one boundary item off the most loaded rank, or swap a
// boundary item of that rank with a cheaper boundary item of another rank (different buckets),
// whichever lowers the pair's maximum most; stop when nothing lowers it. The work is bounded
// (kRefineWork candidate evaluations; swaps are skipped once they would exceed it) so very large
// models stay fast.
void refine(std::vector<BucketState>& state, const std::vector<std::vector<DpItem>>& items,
            std::vector<double>& load) {
  constexpr double kRefineWork = 4e6;
  const int ranks = static_cast<int>(load.size());
  double work = 0.0;
  while (work < kRefineWork) {
    const int top = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
    const std::vector<Boundary> edges = boundaries(state, items, ranks);
    std::vector<const Boundary*> mine;
    for (const auto& e : edges)
      if (e.owner == top) mine.push_back(&e);
    work += static_cast<double>(edges.size());
    const double swap_work = static_cast<double>(edges.size()) * static_cast<double>(mine.size());
    const bool try_swaps = work + swap_work <= kRefineWork;
    if (try_swaps) work += swap_work;
    double best_peak = load[top] * (1.0 - 1e-12);
    const Boundary* move = nullptr;
    const Boundary* partner = nullptr;
    int target = -1;
    for (const Boundary* a : mine) {
      for (int r = a->lo; r <= a->hi; ++r) {
        if (r == top) continue;
        const double peak = std::max(load[top] - a->cost, load[r] + a->cost);
        if (peak < best_peak) {
          best_peak = peak;
          move = a;
          partner = nullptr;
          target = r;
        }
      }
    }
    for (const auto& b : edges) {
      if (!try_swaps) break;
      if (b.owner == top || top < b.lo || top > b.hi) continue;
      for (const Boundary* a : mine) {
        if (a->bucket == b.bucket || a->cost <= b.cost || b.owner < a->lo || b.owner > a->hi)
          continue;
        const double delta = a->cost - b.cost;
        const double peak = std::max(load[top] - delta, load[b.owner] + delta);
        if (peak < best_peak) {
          best_peak = peak;
          move = a;
          partner = &b;
          target = b.owner;
        }
      }
    }
    if (move == nullptr) return;
    state[move->bucket].owner[move->item] = target;
    load[top] -= move->cost;
    load[target] += move->cost;
    if (partner != nullptr) {
      state[partner->bucket].owner[partner->item] = top;
      load[target] -= partner->cost;
      load[top] += partner->cost;
    }
  }
}

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

// Keeps each divisible item holding at least a quarter of a rank's mean memory (an embedding, an
// output layer) free to span most ranks: the atomic items before it in its bucket may only go to
// the first ranks (as many as their time needs with 25% slack) and those after it to the last.
void cap_around_big_divisible(std::vector<BucketState>& state,
                              const std::vector<std::vector<DpItem>>& items, int ranks) {
  double total_memory = 0.0, total_time = 0.0;
  for (const auto& bucket : items)
    for (const auto& item : bucket) {
      total_memory += item.memory;
      if (!item.divisible) total_time += item.time;
    }
  const double big = 0.25 * total_memory / ranks;
  const double mean_time = total_time / ranks;
  // Ranks at one end that can take `time` with 25% slack (at least one).
  auto edge_for = [&](double time) {
    if (mean_time <= 0.0) return 1;
    return std::clamp(static_cast<int>(std::ceil(1.25 * time / mean_time)), 1, ranks);
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

// Element counts per rank in [lo, hi] that raise memory towards a common level (water-filling),
// summing to `numel`, contiguous in rank order.
std::vector<std::int64_t> water_fill(const std::vector<double>& memory, int lo, int hi,
                                     double item_memory, std::int64_t numel) {
  const int ranks = static_cast<int>(memory.size());
  std::vector<std::int64_t> parts(ranks, 0);
  std::vector<double> levels(memory.begin() + lo, memory.begin() + hi + 1);
  std::sort(levels.begin(), levels.end());
  // Find the level t with Σ max(0, t - M_r) = item_memory over r in [lo, hi].
  double level = levels.back() + item_memory / levels.size();
  double below = 0.0;
  for (std::size_t k = 0; k < levels.size(); ++k) {
    below += levels[k];
    const double next = k + 1 < levels.size() ? levels[k + 1] : kInf;
    const double t = (item_memory + below) / static_cast<double>(k + 1);
    if (t <= next) {
      level = t;
      break;
    }
  }
  double cumulative = 0.0;
  std::int64_t assigned = 0;
  for (int r = lo; r <= hi; ++r) {
    cumulative += std::max(0.0, level - memory[r]);
    const double fraction = item_memory > 0.0 ? cumulative / item_memory : 1.0;
    const std::int64_t end =
        r == hi
            ? numel
            : std::min<std::int64_t>(numel, std::llround(fraction * static_cast<double>(numel)));
    parts[r] = std::max<std::int64_t>(0, end - assigned);
    assigned += parts[r];
  }
  return parts;
}

// Phase 3: divisible items, largest memory first, water-filled towards equal memory over the ranks
// their placed neighbours allow. Returns the memory per rank.
std::vector<double> fill_divisible(std::vector<BucketState>& state,
                                   const std::vector<std::vector<DpItem>>& items, int ranks) {
  std::vector<double> memory(ranks, 0.0);
  std::vector<std::pair<int, int>> divisible;  // (bucket, item)
  for (std::size_t b = 0; b < state.size(); ++b) {
    for (int i : state[b].atomic) {
      const int r = state[b].owner[i];
      memory[r] += items[b][i].memory;
      state[b].first_rank[i] = state[b].last_rank[i] = r;
    }
    for (std::size_t i = 0; i < items[b].size(); ++i)
      if (items[b][i].divisible) divisible.emplace_back(static_cast<int>(b), static_cast<int>(i));
  }
  std::stable_sort(divisible.begin(), divisible.end(), [&](auto a, auto b) {
    return items[a.first][a.second].memory > items[b.first][b.second].memory;
  });
  for (auto [b, i] : divisible) {
    auto& s = state[b];
    int lo = 0, hi = ranks - 1;
    for (int k = i - 1; k >= 0; --k)
      if (s.last_rank[k] >= 0) {
        lo = s.last_rank[k];
        break;
      }
    for (int k = i + 1; k < static_cast<int>(items[b].size()); ++k)
      if (s.first_rank[k] >= 0) {
        hi = s.first_rank[k];
        break;
      }
    const DpItem& item = items[b][i];
    s.parts[i] = water_fill(memory, lo, hi, item.memory, item.numel);
    for (int r = lo; r <= hi; ++r) {
      if (s.parts[i][r] == 0) continue;
      memory[r] += item.memory * static_cast<double>(s.parts[i][r]) / item.numel;
      if (s.first_rank[i] < 0) s.first_rank[i] = r;
      s.last_rank[i] = r;
    }
    if (s.first_rank[i] < 0) s.first_rank[i] = s.last_rank[i] = lo;  // zero-size safety
  }

  return memory;
}

}  // namespace

std::vector<DpBucketResult> balanced_cuts(const std::vector<std::vector<DpItem>>& items,
                                          const std::vector<std::vector<std::int64_t>>& starts,
                                          const std::vector<std::int64_t>& bucket_numel,
                                          int ranks) {
  CANZONA_CHECK(ranks > 0);
  CANZONA_CHECK(items.size() == starts.size() && items.size() == bucket_numel.size());
  const std::size_t buckets = items.size();
  std::vector<BucketState> state(buckets);
  std::vector<double> totals(buckets, 0.0);
  double grand_total = 0.0;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t n = items[b].size();
    state[b].owner.assign(n, -1);
    state[b].parts.assign(n, {});
    state[b].first_rank.assign(n, -1);
    state[b].last_rank.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      if (items[b][i].divisible) continue;
      state[b].atomic.push_back(static_cast<int>(i));
      totals[b] += items[b][i].time;
    }
    state[b].cap_lo.assign(state[b].atomic.size(), 0);
    state[b].cap_hi.assign(state[b].atomic.size(), ranks - 1);
    grand_total += totals[b];
  }
  const double mu = grand_total / ranks;

  // Phase 1 four ways (per bucket or global LPT, each with and without caps that keep big divisible
  // items free), each followed by phases 2 and 3; the lowest max(time max/mean, memory max/mean)
  // wins, earlier candidates on ties.
  double best_score = kInf;
  std::vector<BucketState> best;
  for (int candidate = 0; candidate < 6; ++candidate) {
    std::vector<BucketState> trial = state;
    if (candidate % 2 == 1) cap_around_big_divisible(trial, items, ranks);
    std::vector<double> load = candidate < 2 ? place_per_bucket(trial, items, totals, ranks, mu)
                                             : place_by_lpt(trial, items, ranks, candidate >= 4);
    refine(trial, items, load);
    const std::vector<double> memory = fill_divisible(trial, items, ranks);
    const double time_mean = std::accumulate(load.begin(), load.end(), 0.0) / ranks;
    const double memory_mean = std::accumulate(memory.begin(), memory.end(), 0.0) / ranks;
    const double score = std::max(
        time_mean > 0 ? *std::max_element(load.begin(), load.end()) / time_mean : 1.0,
        memory_mean > 0 ? *std::max_element(memory.begin(), memory.end()) / memory_mean : 1.0);
    if (score < best_score * (1.0 - 1e-12)) {
      best_score = score;
      best = std::move(trial);
    }
  }
  state = std::move(best);

  // Element cuts: cut[r] = first element owned by a rank >= r.
  std::vector<DpBucketResult> result(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    auto& cuts = result[b].element_cuts;
    cuts.assign(static_cast<std::size_t>(ranks) + 1, bucket_numel[b]);
    cuts[0] = 0;
    int next_rank = 1;
    auto mark = [&](std::int64_t position, int owner) {
      while (next_rank <= owner && next_rank < ranks) cuts[next_rank++] = position;
    };
    const auto& s = state[b];
    for (std::size_t i = 0; i < items[b].size(); ++i) {
      if (!items[b][i].divisible) {
        mark(starts[b][i], s.owner[i]);
        continue;
      }
      std::int64_t offset = starts[b][i];
      for (int r = 0; r < ranks; ++r) {
        if (s.parts[i].empty() || s.parts[i][r] == 0) continue;
        mark(offset, r);
        offset += s.parts[i][r];
      }
    }
  }
  return result;
}

}  // namespace canzona::plan
