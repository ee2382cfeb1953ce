// Free-order DP candidates (src/plan/algorithms/dp.h, free_order_candidates): owners chosen
// without the monotone-cut limit, then each bucket laid out by owner so the cuts stay on param
// boundaries (docs/design.md section 3, "order inside a bucket is free").
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>

#include "algorithms/dp.h"
#include "algorithms/dp_balance.h"
#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

constexpr double kGridWork = 5e6;  // largest Σ max(1, tasks) x ranks x tp for the grid candidate
// Memory caps of the windowed LPT candidates (x the mean); infinity: time alone.
constexpr double kMemoryCaps[] = {1.1, 1.3, std::numeric_limits<double>::infinity()};

struct Ref {
  int bucket = 0;
  int item = 0;
};

// Atomic items of every bucket, largest time first (ties: bucket, then position).
std::vector<Ref> by_time(const std::vector<std::vector<DpItem>>& items) {
  std::vector<Ref> refs;
  for (std::size_t b = 0; b < items.size(); ++b)
    for (std::size_t i = 0; i < items[b].size(); ++i)
      if (!items[b][i].divisible) refs.push_back({static_cast<int>(b), static_cast<int>(i)});
  std::stable_sort(refs.begin(), refs.end(), [&](const Ref& x, const Ref& y) {
    return items[x.bucket][x.item].time > items[y.bucket][y.item].time;
  });
  return refs;
}

// (0) LPT on time with a min-heap of (time, memory, rank).
void place_lpt(const std::vector<std::vector<DpItem>>& items, int ranks,
               std::vector<std::vector<int>>& owner) {
  using Entry = std::tuple<double, double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int r = 0; r < ranks; ++r) heap.emplace(0.0, 0.0, r);
  for (const Ref& ref : by_time(items)) {
    auto [time, memory, r] = heap.top();
    heap.pop();
    const DpItem& item = items[ref.bucket][ref.item];
    owner[ref.bucket][ref.item] = r;
    heap.emplace(time + item.time, memory + item.memory, r);
  }
}

// Where each bucket's atomic items may go. A bucket whose divisible run holds more than a rank's
// mean memory (the embedding beside a few layers) keeps ranks [0, R - s) free of its atomic
// items, s = ceil(2 R x its share of the atomic time), 1 <= s < R, so lay_out can spread the run
// over them and over rank R - s (the first that may hold its items, which the run may share):
// each of those R - s + 1 ranks is expected to hold run / (R - s + 1).
struct Windows {
  std::vector<int> lo;           // [bucket] lowest rank its atomic items may take
  std::vector<double> reserved;  // [rank] run memory expected there
  bool any = false;              // some bucket has a window
};

Windows run_windows(const std::vector<std::vector<DpItem>>& items, int ranks) {
  const std::size_t buckets = items.size();
  std::vector<double> run(buckets, 0.0), time(buckets, 0.0);
  double total_memory = 0.0, total_time = 0.0;
  for (std::size_t b = 0; b < buckets; ++b)
    for (const DpItem& item : items[b]) {
      total_memory += item.memory;
      if (item.divisible) {
        run[b] += item.memory;
      } else {
        time[b] += item.time;
        total_time += item.time;
      }
    }
  Windows w;
  w.lo.assign(buckets, 0);
  w.reserved.assign(ranks, 0.0);
  if (ranks < 2 || total_time <= 0.0) return w;
  for (std::size_t b = 0; b < buckets; ++b) {
    if (run[b] <= total_memory / ranks || time[b] <= 0.0) continue;
    const double share = 2.0 * ranks * time[b] / total_time;
    const int s = std::clamp(static_cast<int>(std::ceil(share)), 1, ranks - 1);
    w.lo[b] = ranks - s;
    for (int r = 0; r <= ranks - s; ++r) w.reserved[r] += run[b] / (ranks - s + 1);
    w.any = true;
  }
  return w;
}

// (2) LPT on time within the windows, among the ranks whose memory (reserved run memory
// included) stays within cap x the mean of all memory (Megatron's layer-wise optimizer caps numel
// the same way); the least-memory allowed rank when none does. cap = infinity: no cap.
void place_lpt_windowed(const std::vector<std::vector<DpItem>>& items, int ranks,
                        const Windows& windows, double cap, std::vector<std::vector<int>>& owner) {
  double total = 0.0;
  for (const auto& bucket : items)
    for (const DpItem& item : bucket) total += item.memory;
  const double limit = cap * total / ranks;
  std::vector<double> time(ranks, 0.0), memory = windows.reserved;
  for (const Ref& ref : by_time(items)) {
    const DpItem& item = items[ref.bucket][ref.item];
    const int lo = windows.lo[ref.bucket];
    int best = -1, least = lo;
    for (int r = lo; r < ranks; ++r) {
      if (memory[r] < memory[least]) least = r;
      if (memory[r] + item.memory > limit) continue;
      if (best < 0 || time[r] < time[best]) best = r;
    }
    if (best < 0) best = least;
    owner[ref.bucket][ref.item] = best;
    time[best] += item.time;
    memory[best] += item.memory;
  }
}

// (1) On the DP x TP grid: hosts[d * tp + h] is host h of DP rank d's load.
void place_grid(const std::vector<std::vector<DpItem>>& items, int ranks, int tp,
                std::vector<std::vector<int>>& owner) {
  std::vector<double> hosts(static_cast<std::size_t>(ranks) * tp, 0.0), dp_load(ranks, 0.0);
  std::vector<double> trial(tp);
  auto add = [&](const DpItem& item, double* h) {
    if (item.tasks.empty()) {
      for (int t = 0; t < tp; ++t) h[t] += item.time / tp;
      return;
    }
    std::vector<double> tasks = item.tasks;
    std::sort(tasks.begin(), tasks.end(), std::greater<>());
    for (double c : tasks) *std::min_element(h, h + tp) += c;
  };
  for (const Ref& ref : by_time(items)) {
    const DpItem& item = items[ref.bucket][ref.item];
    int best = 0;
    double best_peak = detail::kInf;
    for (int d = 0; d < ranks; ++d) {
      std::copy_n(hosts.begin() + static_cast<std::ptrdiff_t>(d) * tp, tp, trial.begin());
      add(item, trial.data());
      const double peak = *std::max_element(trial.begin(), trial.end());
      if (peak < best_peak || (peak == best_peak && dp_load[d] < dp_load[best])) {
        best_peak = peak;
        best = d;
      }
    }
    owner[ref.bucket][ref.item] = best;
    add(item, hosts.data() + static_cast<std::ptrdiff_t>(best) * tp);
    dp_load[best] += item.time;
  }
}

// Lays each bucket out by owner and puts its divisible run where the water-fill is lowest.
FreeOrder lay_out(const std::vector<std::vector<DpItem>>& items, int ranks,
                  const std::vector<std::vector<int>>& owner) {
  const std::size_t buckets = items.size();
  std::vector<double> memory(ranks, 0.0);
  std::vector<std::vector<int>> used(buckets);  // ranks owning atomic items, ascending, unique
  std::vector<double> run_memory(buckets, 0.0);
  for (std::size_t b = 0; b < buckets; ++b) {
    for (std::size_t i = 0; i < items[b].size(); ++i) {
      if (items[b][i].divisible) {
        run_memory[b] += items[b][i].memory;
        continue;
      }
      memory[owner[b][i]] += items[b][i].memory;
      used[b].push_back(owner[b][i]);
    }
    std::sort(used[b].begin(), used[b].end());
    used[b].erase(std::unique(used[b].begin(), used[b].end()), used[b].end());
  }
  // The gap of each bucket's run: after the atomic items of rank `after` (-1: bucket start).
  std::vector<int> after(buckets, -1);
  std::vector<int> runs;
  for (std::size_t b = 0; b < buckets; ++b)
    if (std::any_of(items[b].begin(), items[b].end(), [](const DpItem& i) { return i.divisible; }))
      runs.push_back(static_cast<int>(b));
  std::stable_sort(runs.begin(), runs.end(),
                   [&](int x, int y) { return run_memory[x] > run_memory[y]; });
  for (int b : runs) {
    // Gaps: [0, u0], [u0, u1], ..., [u_last, R-1] (the whole range when no rank is used).
    const std::vector<int>& u = used[b];
    int best_after = -1, best_lo = 0, best_hi = ranks - 1;
    double best_level = detail::kInf;
    for (std::size_t g = 0; g <= u.size(); ++g) {
      const int lo = g == 0 ? 0 : u[g - 1];
      const int hi = g == u.size() ? ranks - 1 : u[g];
      const std::vector<double> share = detail::water_fill(memory, lo, hi, run_memory[b]);
      double level = 0.0;
      for (int r = lo; r <= hi; ++r) level = std::max(level, memory[r] + share[r - lo]);
      if (level < best_level) {
        best_level = level;
        best_after = g == 0 ? -1 : u[g - 1];
        best_lo = lo;
        best_hi = hi;
      }
    }
    after[b] = best_after;
    const std::vector<double> share = detail::water_fill(memory, best_lo, best_hi, run_memory[b]);
    for (int r = best_lo; r <= best_hi; ++r) memory[r] += share[r - best_lo];
  }
  FreeOrder out;
  out.order.resize(buckets);
  out.owner.resize(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const int n = static_cast<int>(items[b].size());
    std::vector<int> atomic;
    for (int i = 0; i < n; ++i)
      if (!items[b][i].divisible) atomic.push_back(i);
    std::stable_sort(atomic.begin(), atomic.end(),
                     [&](int x, int y) { return owner[b][x] < owner[b][y]; });
    auto& order = out.order[b];
    auto add_run = [&] {
      for (int i = 0; i < n; ++i)
        if (items[b][i].divisible) order.push_back(i);
    };
    if (after[b] < 0) add_run();
    for (std::size_t k = 0; k < atomic.size(); ++k) {
      order.push_back(atomic[k]);
      const bool last_of_rank =
          k + 1 == atomic.size() || owner[b][atomic[k + 1]] != owner[b][atomic[k]];
      if (last_of_rank && owner[b][atomic[k]] == after[b]) add_run();
    }
    for (int i : order) out.owner[b].push_back(items[b][i].divisible ? -1 : owner[b][i]);
  }
  return out;
}

}  // namespace

std::vector<FreeOrder> free_order_candidates(const std::vector<std::vector<DpItem>>& items,
                                             int ranks, int tp) {
  CANZONA_CHECK(ranks > 0 && tp > 0);
  std::vector<std::vector<int>> owner(items.size());
  double grid_work = 0.0;
  for (std::size_t b = 0; b < items.size(); ++b) {
    owner[b].assign(items[b].size(), -1);
    for (const DpItem& item : items[b])
      if (!item.divisible)
        grid_work += static_cast<double>(std::max<std::size_t>(1, item.tasks.size()));
  }
  std::vector<FreeOrder> out;
  std::vector<std::vector<std::vector<int>>> placed;  // owners of the candidates so far
  auto add = [&] {
    if (std::find(placed.begin(), placed.end(), owner) != placed.end()) return;
    placed.push_back(owner);
    out.push_back(lay_out(items, ranks, owner));
  };
  place_lpt(items, ranks, owner);
  add();
  // Past kLargeWork (atomic items x ranks) only LPT and, with windows, the windowed 1.1 cap.
  std::size_t atomic = 0;
  for (const auto& bucket : items)
    for (const DpItem& item : bucket) atomic += !item.divisible;
  const bool large = static_cast<double>(atomic) * ranks > detail::kLargeWork;
  Windows open;  // no windows
  open.lo.assign(items.size(), 0);
  open.reserved.assign(ranks, 0.0);
  const Windows windows = run_windows(items, ranks);
  const Windows* const choices[] = {&open, &windows};
  for (const Windows* w : choices) {
    if ((w == &windows && !windows.any) || (large && w == &open)) continue;
    for (double cap : kMemoryCaps) {
      if (large && cap != kMemoryCaps[0]) break;
      place_lpt_windowed(items, ranks, *w, cap, owner);
      add();
    }
  }
  if (!large && tp > 1 && grid_work * ranks * tp <= kGridWork) {
    place_grid(items, ranks, tp, owner);
    add();
  }
  return out;
}

FreeOrder free_order_for_owners(const std::vector<std::vector<DpItem>>& items, int ranks,
                                const std::vector<std::vector<int>>& owner) {
  CANZONA_CHECK(ranks > 0 && owner.size() == items.size());
  for (std::size_t b = 0; b < items.size(); ++b) {
    CANZONA_CHECK(owner[b].size() == items[b].size());
    for (std::size_t i = 0; i < items[b].size(); ++i)
      CANZONA_CHECK(items[b][i].divisible || (owner[b][i] >= 0 && owner[b][i] < ranks), "bucket ",
                    b, " item ", i, ": owner ", owner[b][i], " not a DP rank");
  }
  return lay_out(items, ranks, owner);
}

DpCuts cuts_for_owners(const std::vector<std::vector<DpItem>>& items,
                       const std::vector<std::vector<int>>& owner,
                       const std::vector<std::vector<std::int64_t>>& starts,
                       const std::vector<std::int64_t>& bucket_numel, int ranks) {
  std::vector<detail::BucketState> state = detail::empty_state(items, ranks);
  for (std::size_t b = 0; b < items.size(); ++b) {
    int previous = 0;
    for (int i : state[b].atomic) {
      const int r = owner[b][i];
      CANZONA_CHECK(r >= previous && r < ranks, "bucket ", b, ": owners not monotone");
      state[b].owner[i] = previous = r;
    }
  }
  detail::fill_divisible(state, items, ranks);
  return detail::element_cuts(state, items, starts, bucket_numel, ranks);
}

}  // namespace canzona::plan
