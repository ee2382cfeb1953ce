// Our DP planner (src/plan/algorithms/dp.h, balanced_cuts). Three phases over the buckets:
//   1. atomic items (dp_placement.cpp), six deterministic ways: per bucket in descending total
//      time by the exact monotone assignment minimising Σ_r (L_r + S_r)^2, or global LPT within
//      the monotone limits (lowest-rank or middle-of-range ties); each with and without caps that
//      keep big divisible items free to span the ranks;
//   2. refinement: while moving a boundary item off the most loaded rank, or swapping it with a
//      cheaper boundary item of another rank, keeps cuts monotone and lowers the pair's maximum,
//      apply the best such change;
//   3. divisible items: each run of adjacent ones, largest first, water-filled over the ranks its
//      atomic neighbours allow, towards equal memory; cut points may fall on any element.
// balanced_cuts keeps the candidate with the lowest max(time, memory) max/mean on the DP axis;
// make_plan judges the candidates on the whole DP x TP grid instead (never_behind.cpp).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "algorithms/dp.h"
#include "algorithms/dp_balance.h"
#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

using detail::BucketState;
using detail::kInf;

constexpr double kGridWork = 5e6;  // largest items x ranks x tp for the grid candidates
// Refinement work (candidate moves and swaps evaluated) of all refined candidates together.
constexpr double kRefineWork = 4e6;
// Largest Σ_items max(1, tasks) x ranks x tp for the grid candidates: place_on_grid tries every
// task of an item on every allowed rank, so an item split into many pieces (a per-head QKV with
// thousands of heads) multiplies its work; beyond this the grid candidates are skipped.
constexpr double kGridTaskWork = 5e7;

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
// (`budget` candidate evaluations; swaps are skipped once they would exceed it) so very large
// models stay fast.
void refine(std::vector<BucketState>& state, const std::vector<std::vector<DpItem>>& items,
            std::vector<double>& load, double budget) {
  const int ranks = static_cast<int>(load.size());
  double work = 0.0;
  while (work < budget) {
    const int top = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
    const std::vector<Boundary> edges = boundaries(state, items, ranks);
    std::vector<const Boundary*> mine;
    for (const auto& e : edges)
      if (e.owner == top) mine.push_back(&e);
    work += static_cast<double>(edges.size());
    const double swap_work = static_cast<double>(edges.size()) * static_cast<double>(mine.size());
    const bool try_swaps = work + swap_work <= budget;
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

}  // namespace

std::vector<double> detail::water_fill(const std::vector<double>& memory, int lo, int hi,
                                       double amount) {
  std::vector<double> levels(memory.begin() + lo, memory.begin() + hi + 1);
  std::sort(levels.begin(), levels.end());
  // The level t with Σ max(0, t - M_r) = amount over r in [lo, hi].
  double level = levels.back() + amount / static_cast<double>(levels.size());
  double below = 0.0;
  for (std::size_t k = 0; k < levels.size(); ++k) {
    below += levels[k];
    const double next = k + 1 < levels.size() ? levels[k + 1] : kInf;
    const double t = (amount + below) / static_cast<double>(k + 1);
    if (t <= next) {
      level = t;
      break;
    }
  }
  std::vector<double> out(static_cast<std::size_t>(hi - lo) + 1, 0.0);
  for (int r = lo; r <= hi; ++r) out[r - lo] = std::max(0.0, level - memory[r]);
  return out;
}

std::vector<double> detail::fill_divisible(std::vector<BucketState>& state,
                                           const std::vector<std::vector<DpItem>>& items,
                                           int ranks) {
  struct Run {
    int bucket = 0, begin = 0, end = 0;  // items [begin, end)
    double memory = 0.0;
  };
  std::vector<double> memory(ranks, 0.0);
  std::vector<Run> runs;
  for (std::size_t b = 0; b < state.size(); ++b) {
    for (int i : state[b].atomic) {
      const int r = state[b].owner[i];
      memory[r] += items[b][i].memory;
      state[b].first_rank[i] = state[b].last_rank[i] = r;
    }
    const int n = static_cast<int>(items[b].size());
    for (int i = 0; i < n;) {
      if (!items[b][i].divisible) {
        ++i;
        continue;
      }
      Run run{static_cast<int>(b), i, i, 0.0};
      for (; run.end < n && items[b][run.end].divisible; ++run.end)
        run.memory += items[b][run.end].memory;
      runs.push_back(run);
      i = run.end;
    }
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Run& a, const Run& b) { return a.memory > b.memory; });
  for (const Run& run : runs) {
    auto& s = state[run.bucket];
    const auto& bucket = items[run.bucket];
    const int lo = run.begin > 0 ? s.owner[run.begin - 1] : 0;
    const int hi = run.end < static_cast<int>(bucket.size()) ? s.owner[run.end] : ranks - 1;
    const std::vector<double> share = water_fill(memory, lo, hi, run.memory);
    // Walk the run's items in order, giving rank r elements until its share is used up.
    int r = lo;
    double left = share[0];
    for (int i = run.begin; i < run.end; ++i) {
      const DpItem& item = bucket[i];
      const double per_element = item.memory / static_cast<double>(item.numel);
      const int first = r;  // parts cover the ranks first ... r this item's walk reaches
      s.parts[i].assign(1, 0);
      s.parts_lo[i] = first;
      std::int64_t remaining = item.numel;
      while (remaining > 0) {
        std::int64_t take = remaining;
        if (r < hi && per_element > 0.0)
          take = std::clamp<std::int64_t>(std::llround(left / per_element), 0, remaining);
        s.parts[i][r - first] += take;
        remaining -= take;
        left -= static_cast<double>(take) * per_element;
        if (remaining > 0 && r < hi) {
          left += share[++r - lo];
          s.parts[i].push_back(0);
        }
      }
      for (int q = first; q <= r; ++q) {
        if (s.parts[i][q - first] == 0) continue;
        memory[q] += per_element * static_cast<double>(s.parts[i][q - first]);
        if (s.first_rank[i] < 0) s.first_rank[i] = q;
        s.last_rank[i] = q;
      }
    }
  }
  return memory;
}

DpCuts detail::element_cuts(const std::vector<BucketState>& state,
                            const std::vector<std::vector<DpItem>>& items,
                            const std::vector<std::vector<std::int64_t>>& starts,
                            const std::vector<std::int64_t>& bucket_numel, int ranks) {
  DpCuts result(state.size());
  for (std::size_t b = 0; b < state.size(); ++b) {
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
      for (std::size_t k = 0; k < s.parts[i].size(); ++k) {
        if (s.parts[i][k] == 0) continue;
        mark(offset, s.parts_lo[i] + static_cast<int>(k));
        offset += s.parts[i][k];
      }
    }
  }
  return result;
}

std::vector<BucketState> detail::empty_state(const std::vector<std::vector<DpItem>>& items,
                                             int ranks) {
  std::vector<BucketState> state(items.size());
  for (std::size_t b = 0; b < items.size(); ++b) {
    const std::size_t n = items[b].size();
    state[b].owner.assign(n, -1);
    state[b].parts.assign(n, {});
    state[b].parts_lo.assign(n, 0);
    state[b].first_rank.assign(n, -1);
    state[b].last_rank.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i)
      if (!items[b][i].divisible) state[b].atomic.push_back(static_cast<int>(i));
    state[b].cap_lo.assign(state[b].atomic.size(), 0);
    state[b].cap_hi.assign(state[b].atomic.size(), ranks - 1);
  }
  return state;
}

namespace {

struct Candidate {
  DpCuts cuts;
  double score = 0.0;  // max(time max/mean, memory max/mean) on the DP axis
};

std::vector<Candidate> run_candidates(const std::vector<std::vector<DpItem>>& items,
                                      const std::vector<std::vector<std::int64_t>>& starts,
                                      const std::vector<std::int64_t>& bucket_numel, int ranks,
                                      int tp) {
  CANZONA_CHECK(ranks > 0);
  CANZONA_CHECK(items.size() == starts.size() && items.size() == bucket_numel.size());
  const std::size_t buckets = items.size();
  std::vector<BucketState> state = detail::empty_state(items, ranks);
  std::vector<double> totals(buckets, 0.0);
  double grand_total = 0.0;
  for (std::size_t b = 0; b < buckets; ++b) {
    for (int i : state[b].atomic) totals[b] += items[b][i].time;
    grand_total += totals[b];
  }
  const double mu = grand_total / ranks;

  // Phase 1 six ways, each followed by phases 2 and 3; with TP, two more on the grid (with and
  // without caps), not refined on DP time (that would undo their host packing). A capped twin
  // whose caps change nothing is skipped; past kLargeWork only candidates 2 and 3 run.
  std::size_t atomic_items = 0;
  double atomic_tasks = 0.0;
  for (std::size_t b = 0; b < buckets; ++b) {
    atomic_items += state[b].atomic.size();
    for (int i : state[b].atomic)
      atomic_tasks += static_cast<double>(std::max<std::size_t>(1, items[b][i].tasks.size()));
  }
  const bool grid = tp > 1 && static_cast<double>(atomic_items) * ranks * tp <= kGridWork &&
                    atomic_tasks * ranks * tp <= kGridTaskWork;
  // Past kLargeWork only the global LPT with lowest-rank ties (and its capped twin) runs.
  const bool large = static_cast<double>(atomic_items) * ranks > detail::kLargeWork;
  std::vector<Candidate> candidates;
  for (int candidate = 0; candidate < (grid ? 8 : 6); ++candidate) {
    if (large && candidate != 2 && candidate != 3) continue;
    std::vector<BucketState> trial = state;
    // The grid candidate's capped items get at least R/8 ranks, so they need not crowd one DP
    // rank's TP hosts. Caps that change nothing would repeat the candidate before.
    if (candidate % 2 == 1) {
      detail::cap_around_big_divisible(trial, items, ranks, candidate == 7 ? (ranks + 7) / 8 : 1);
      bool capped = false;
      for (std::size_t b = 0; b < buckets && !capped; ++b)
        capped = trial[b].cap_lo != state[b].cap_lo || trial[b].cap_hi != state[b].cap_hi;
      if (!capped) continue;
    }
    std::vector<double> load =
        candidate < 2   ? detail::place_per_bucket(trial, items, totals, ranks, mu)
        : candidate < 6 ? detail::place_by_lpt(trial, items, ranks, candidate >= 4)
                        : detail::place_on_grid(trial, items, ranks, tp);
    if (candidate < 6) refine(trial, items, load, large ? kRefineWork / 8 : kRefineWork / 6);
    const std::vector<double> memory = detail::fill_divisible(trial, items, ranks);
    const double time_mean = std::accumulate(load.begin(), load.end(), 0.0) / ranks;
    const double memory_mean = std::accumulate(memory.begin(), memory.end(), 0.0) / ranks;
    Candidate c;
    c.score = std::max(
        time_mean > 0 ? *std::max_element(load.begin(), load.end()) / time_mean : 1.0,
        memory_mean > 0 ? *std::max_element(memory.begin(), memory.end()) / memory_mean : 1.0);
    c.cuts = detail::element_cuts(trial, items, starts, bucket_numel, ranks);
    candidates.push_back(std::move(c));
  }
  return candidates;
}

}  // namespace

std::vector<DpCuts> balanced_cut_candidates(const std::vector<std::vector<DpItem>>& items,
                                            const std::vector<std::vector<std::int64_t>>& starts,
                                            const std::vector<std::int64_t>& bucket_numel,
                                            int ranks, int tp) {
  std::vector<DpCuts> out;
  for (auto& c : run_candidates(items, starts, bucket_numel, ranks, tp))
    out.push_back(std::move(c.cuts));
  return out;
}

DpCuts balanced_cuts(const std::vector<std::vector<DpItem>>& items,
                     const std::vector<std::vector<std::int64_t>>& starts,
                     const std::vector<std::int64_t>& bucket_numel, int ranks) {
  std::vector<Candidate> candidates = run_candidates(items, starts, bucket_numel, ranks, 1);
  std::size_t best = 0;
  for (std::size_t k = 1; k < candidates.size(); ++k)
    if (candidates[k].score < candidates[best].score * (1.0 - 1e-12)) best = k;
  return std::move(candidates[best].cuts);
}

}  // namespace canzona::plan