// Minimum-movement re-planning (replan.h). Notation as there and in docs/design.md section 3: R DP
// ranks; per bucket, *positions* q_0 < ... < q_m are the element offsets a cut may take and
// *atom* j is [q_j, q_{j+1}); T, M and S are prefix sums of the atoms' DP load, DP memory and
// state bytes; K_r the prefix sums of the state bytes old DP rank r already holds in each atom.
// Rank r's segment [q_v, q_u) then receives S(v, u) - K_r(v, u) bytes.
#include "canzona/plan/replan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "algorithms/holdings.h"
#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"
#include "replan/replan_tp.h"

namespace canzona::plan {
namespace {

using detail::Holdings;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxDpWork = 5e7;   // R x m^2 per bucket, beyond which P*'s cuts are kept
constexpr double kMaxDpCells = 4e6;  // R x (m + 1) table cells per bucket
constexpr double kSlack = 1e-9;      // relative slack of cap comparisons (rounding)

bool divisible_items(const PlanOptions& o) {
  return o.strategy == Strategy::kLbAsc && o.variant == PlannerVariant::kCanzona;
}

double adam_time(std::int64_t numel, const PlanOptions& o) {
  return cost::task_cost(cost::kElementwiseOptimizer, numel, 1, o.cost) * o.dims.tp;
}

double adam_memory(std::int64_t numel, const PlanOptions& o) {
  return cost::state_bytes(cost::kElementwiseOptimizer, numel, 1, o.cost) * o.dims.tp;
}

// DP load and memory of each matrix param (its tasks' full cost, x tp when replicated).
struct ParamLoads {
  std::vector<double> time, memory;  // [model param]
};

ParamLoads matrix_loads(const model::ModelSpec& model, const PlanOptions& o,
                        const StagePlan& stage) {
  ParamLoads pl{std::vector<double>(model.params.size(), 0.0),
                std::vector<double>(model.params.size(), 0.0)};
  for (const Task& t : stage.tasks) {
    const int copies = model.params[t.param].tp_split_dim >= 0 ? 1 : o.dims.tp;
    pl.time[t.param] += t.cost * copies;
    pl.memory[t.param] += t.state_bytes * copies;
  }
  return pl;
}

struct RankLoads {
  std::vector<double> time, memory;  // [DP rank]
  double max_time() const { return *std::max_element(time.begin(), time.end()); }
  double max_memory() const { return *std::max_element(memory.begin(), memory.end()); }
};

RankLoads rank_loads(const model::ModelSpec& model, const PlanOptions& o, const StagePlan& stage,
                     const ParamLoads& pl) {
  RankLoads l{std::vector<double>(o.dims.dp, 0.0), std::vector<double>(o.dims.dp, 0.0)};
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b)
    for (const layout::Slot& slot : stage.layout.buckets[b].slots) {
      if (model.params[slot.param].is_matrix()) {
        const int owner = stage.owner[slot.param];
        CANZONA_CHECK(owner >= 0 && owner < o.dims.dp);
        l.time[owner] += pl.time[slot.param];
        l.memory[owner] += pl.memory[slot.param];
        continue;
      }
      const RankRange dps = slot_dp_ranks(stage, static_cast<int>(b), slot, o.dims.dp);
      for (int d = dps.begin; d < dps.end; ++d) {
        const auto [a, e] = slot_part(stage, static_cast<int>(b), slot, d);
        if (a >= e) continue;
        l.time[d] += adam_time(e - a, o);
        l.memory[d] += adam_memory(e - a, o);
      }
    }
  return l;
}

// One bucket's cut problem (see the file comment).
struct BucketProblem {
  std::vector<std::int64_t> pos;       // m + 1 positions
  std::vector<double> T, M, S;         // prefix sums, m + 1 each
  std::vector<std::vector<double>> K;  // [r][m + 1]
  std::vector<int> star;               // [r] index of P*'s cut r in pos, R + 1
  int atoms() const { return static_cast<int>(pos.size()) - 1; }
};

struct Context {
  const model::ModelSpec& model;
  const PlanOptions& o;
  const Holdings& old;
  int stage = 0;
  double per_element = 0.0;  // AdamW state bytes per element
};

// State bytes of the local elements [a, b) of element-wise param p (TP-local, this plan's tp) that
// old DP rank r held, summed over TP ranks.
double kept_elementwise(const Context& c, int p, int r, std::int64_t numel, std::int64_t a,
                        std::int64_t b) {
  if (c.old.stage_of(p) != c.stage) return 0.0;
  std::int64_t held = 0;
  for (int t = 0; t < std::min(c.o.dims.tp, c.old.tp()); ++t)
    held += c.old.held(c.model.params[p], p, r, t, c.o.dims.tp, numel, a, b);
  return static_cast<double>(held) * c.per_element;
}

// Builds the problem of bucket b of `star` (P*'s stage). False when it is too large for the
// dynamic program (the caller keeps P*'s cuts).
bool build_problem(const Context& c, const StagePlan& star, int b, const ParamLoads& pl,
                   BucketProblem& bp) {
  const PlanOptions& o = c.o;
  const int R = o.dims.dp;
  const layout::Bucket& bucket = star.layout.buckets[b];
  const bool divisible = divisible_items(o);
  auto atomic = [&](const layout::Slot& s) {
    return c.model.params[s.param].is_matrix() || !divisible;
  };
  std::vector<std::int64_t> pos{0, bucket.numel};
  for (std::int64_t x : star.cuts[b]) pos.push_back(x);
  for (const layout::Slot& slot : bucket.slots) {
    pos.push_back(slot.offset);
    if (atomic(slot) || c.old.stage_of(slot.param) != c.stage ||
        c.old.local_numel(slot.param) != slot.numel)
      continue;
    for (std::int64_t x : c.old.interior_cuts(slot.param)) pos.push_back(slot.offset + x);
  }
  std::sort(pos.begin(), pos.end());
  pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
  std::erase_if(pos, [&](std::int64_t x) {
    for (const layout::Slot& slot : bucket.slots)
      if (x > slot.offset && x < slot.end() && atomic(slot)) return true;
    return false;
  });
  const double m = static_cast<double>(pos.size()) - 1;
  if (R * m * m > kMaxDpWork || R * (m + 1) > kMaxDpCells) return false;
  bp.pos = pos;
  const int atoms = bp.atoms();
  bp.T.assign(atoms + 1, 0.0);
  bp.M.assign(atoms + 1, 0.0);
  bp.S.assign(atoms + 1, 0.0);
  bp.K.assign(R, std::vector<double>(atoms + 1, 0.0));
  std::vector<double> kept(R, 0.0);
  std::size_t k = 0;  // the last slot starting at or before the atom
  for (int j = 0; j < atoms; ++j) {
    while (k + 1 < bucket.slots.size() && bucket.slots[k + 1].offset <= pos[j]) ++k;
    double time = 0.0, memory = 0.0;
    std::fill(kept.begin(), kept.end(), 0.0);
    const layout::Slot* slot = bucket.slots.empty() ? nullptr : &bucket.slots[k];
    if (slot != nullptr && slot->offset <= pos[j] && pos[j] < slot->end()) {
      const int p = slot->param;
      const model::ParamSpec& spec = c.model.params[p];
      const bool same_stage = c.old.stage_of(p) == c.stage;
      if (spec.is_matrix()) {
        time = pl.time[p];
        memory = pl.memory[p];
        const int owner = c.old.owner(p);
        for (int r = 0; r < R && same_stage; ++r)
          if (owner == kEveryone || owner == r) kept[r] = memory;
      } else {
        const std::int64_t a = atomic(*slot) ? 0 : pos[j] - slot->offset;
        const std::int64_t e =
            atomic(*slot) ? slot->numel : std::min(pos[j + 1], slot->end()) - slot->offset;
        time = adam_time(e - a, o);
        memory = adam_memory(e - a, o);
        for (int r = 0; r < std::min(R, c.old.dp()) && same_stage; ++r)
          kept[r] = kept_elementwise(c, p, r, slot->numel, a, e);
      }
    }
    bp.T[j + 1] = bp.T[j] + time;
    bp.M[j + 1] = bp.M[j] + memory;
    bp.S[j + 1] = bp.S[j] + memory;
    for (int r = 0; r < R; ++r) bp.K[r][j + 1] = bp.K[r][j] + std::min(kept[r], memory);
  }
  bp.star.assign(R + 1, -1);
  for (int r = 0; r <= R; ++r) {
    const auto at = std::lower_bound(pos.begin(), pos.end(), star.cuts[b][r]);
    if (at != pos.end() && *at == star.cuts[b][r]) bp.star[r] = static_cast<int>(at - pos.begin());
  }
  return true;
}

// Minimum-movement monotone cuts (position indices of cuts 0..R) with every rank within the caps
// given its running loads; ties on moved bytes (within rounding) go to fewer cuts off P*'s. Empty
// when no cuts fit. With `bottleneck`, instead returns in `*peak` the smallest achievable maximum
// over ranks of max(load / cap_time, memory / cap_memory) (cuts unused).
std::vector<int> solve(const BucketProblem& bp, const RankLoads& l, double cap_time,
                       double cap_memory, bool bottleneck = false, double* peak = nullptr) {
  const int R = static_cast<int>(l.time.size());
  const int m = bp.atoms();
  const double eps = 1e-12 * (bp.S[m] + 1.0);
  auto ratio = [](double x, double cap) { return cap > 0 ? x / cap : (x > 0 ? kInf : 0.0); };
  auto fits = [&](int r, int v, int u) {
    return l.time[r] + (bp.T[u] - bp.T[v]) <= cap_time * (1 + kSlack) &&
           l.memory[r] + (bp.M[u] - bp.M[v]) <= cap_memory * (1 + kSlack);
  };
  std::vector<double> prev(m + 1, kInf), cur(m + 1, kInf);
  std::vector<int> prev_dev(m + 1, 0), cur_dev(m + 1, 0);
  std::vector<std::vector<int>> from(R, std::vector<int>(m + 1, -1));
  for (int r = 0; r < R; ++r) {
    const int u_lo = r == R - 1 ? m : 0;
    for (int u = u_lo; u <= m; ++u) {
      const int dev = r < R - 1 && u != bp.star[r + 1] ? 1 : 0;
      cur[u] = kInf;
      const int v_hi = r == 0 ? 0 : u;
      for (int v = 0; v <= v_hi; ++v) {
        const double before = r == 0 ? 0.0 : prev[v];
        if (before == kInf) continue;
        double value = 0.0;
        int devs = (r == 0 ? 0 : prev_dev[v]) + dev;
        if (bottleneck) {
          value = std::max({before, ratio(l.time[r] + (bp.T[u] - bp.T[v]), cap_time),
                            ratio(l.memory[r] + (bp.M[u] - bp.M[v]), cap_memory)});
          devs = 0;
        } else {
          if (!fits(r, v, u)) continue;
          value = before + (bp.S[u] - bp.S[v]) - (bp.K[r][u] - bp.K[r][v]);
        }
        const bool better = value < cur[u] - eps || (value <= cur[u] + eps && devs < cur_dev[u]);
        if (cur[u] == kInf || better) {
          cur[u] = value;
          cur_dev[u] = devs;
          from[r][u] = v;
        }
      }
    }
    std::swap(prev, cur);
    std::swap(prev_dev, cur_dev);
    std::fill(cur.begin(), cur.end(), kInf);
  }
  if (bottleneck) {
    *peak = prev[m];
    return {};
  }
  if (prev[m] == kInf) return {};
  std::vector<int> cuts(R + 1, 0);
  cuts[R] = m;
  for (int r = R - 1; r > 0; --r) cuts[r] = from[r][cuts[r + 1]];
  return cuts;
}

// The DP pass over one stage with the given caps: writes `stage.cuts`, the owners and the tasks'
// DP owners. A bucket too large for the dynamic program keeps P*'s cuts (and does not count
// towards the running loads; the caller checks the finished stage).
void cut_stage(const Context& c, const StagePlan& star, const ParamLoads& pl, double cap_time,
               double cap_memory, StagePlan& stage) {
  const int R = c.o.dims.dp;
  const std::size_t buckets = star.layout.buckets.size();
  std::vector<BucketProblem> problems(buckets);
  std::vector<bool> solvable(buckets);
  std::vector<double> totals(buckets, 0.0);
  for (std::size_t b = 0; b < buckets; ++b) {
    solvable[b] = build_problem(c, star, static_cast<int>(b), pl, problems[b]);
    if (solvable[b]) totals[b] = problems[b].T.back();
  }
  std::vector<int> order(buckets);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  RankLoads l{std::vector<double>(R, 0.0), std::vector<double>(R, 0.0)};
  stage.cuts = star.cuts;
  for (int b : order) {
    if (!solvable[b]) continue;
    const BucketProblem& bp = problems[b];
    std::vector<int> cuts = solve(bp, l, cap_time, cap_memory);
    if (cuts.empty()) {
      double peak = 1.0;
      solve(bp, l, cap_time, cap_memory, true, &peak);
      const double scale = std::max(1.0, peak) * (1 + 1e-6);
      cuts = solve(bp, l, cap_time * scale, cap_memory * scale);
    }
    if (cuts.empty()) cuts = bp.star;  // every entry is a position (build_problem adds them)
    for (int r = 0; r < R; ++r) {
      l.time[r] += bp.T[cuts[r + 1]] - bp.T[cuts[r]];
      l.memory[r] += bp.M[cuts[r + 1]] - bp.M[cuts[r]];
      stage.cuts[b][r] = bp.pos[cuts[r]];
    }
    stage.cuts[b][0] = 0;
    stage.cuts[b][R] = star.layout.buckets[b].numel;
  }
  // Owners from the cuts (as make_plan): the rank whose shard holds the slot's start, or kDivided.
  for (std::size_t b = 0; b < buckets; ++b) {
    const auto& cuts = stage.cuts[b];
    for (const layout::Slot& slot : stage.layout.buckets[b].slots) {
      const int r =
          static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), slot.offset) - cuts.begin()) -
          1;
      const bool straddles = slot.end() > cuts[r + 1];
      CANZONA_CHECK(!straddles || !c.model.params[slot.param].is_matrix());
      stage.owner[slot.param] = straddles ? kDivided : r;
    }
  }
  for (Task& t : stage.tasks) t.dp_owner = stage.owner[t.param];
}

}  // namespace

void validate_replan_options(const ReplanOptions& options) {
  CANZONA_REQUIRE(std::isfinite(options.tolerance) && options.tolerance >= 0.0 &&
                      options.tolerance <= kMaxMoveTolerance,
                  "--move-tolerance must be finite and in [0, ", kMaxMoveTolerance, "] (got ",
                  options.tolerance, ")");
}

namespace {

Plan replan_buffer(const model::ModelSpec& model, const PlanOptions& options, Plan fresh,
                   const Plan& old_plan, const ReplanOptions& replan_options) {
  if (options.strategy != Strategy::kAsc && options.strategy != Strategy::kLbAsc) return fresh;
  const Holdings old(model, old_plan, "old plan");
  const double tol = replan_options.tolerance;
  // Candidates: our cuts with kept hosts, P*'s cuts with kept hosts, P* itself; the one that
  // moves least wins (earliest on ties), so the re-plan never moves more than P*.
  Plan out = fresh, star_cuts = fresh;
  bool balanced[2] = {true, true};  // within the TP-axis tolerance in every stage
  for (std::size_t s = 0; s < fresh.stages.size(); ++s) {
    const StagePlan& star = fresh.stages[s];
    Context c{model, options, old, static_cast<int>(s),
              cost::state_bytes(cost::kElementwiseOptimizer, 1, 1, options.cost)};
    const ParamLoads pl = matrix_loads(model, options, star);
    const RankLoads star_loads = rank_loads(model, options, star, pl);
    const double time_cap = star_loads.max_time() * (1 + tol);
    const double memory_cap = star_loads.max_memory() * (1 + tol);
    StagePlan& stage = out.stages[s];
    bool done = false;
    for (double f : {1.0, 0.5, 0.25, 0.0}) {
      StagePlan trial = star;
      cut_stage(c, star, pl, star_loads.max_time() * (1 + tol * f),
                star_loads.max_memory() * (1 + tol * f), trial);
      const RankLoads l = rank_loads(model, options, trial, pl);
      if (l.max_time() <= time_cap * (1 + kSlack) && l.max_memory() <= memory_cap * (1 + kSlack)) {
        stage = std::move(trial);
        done = true;
        break;
      }
    }
    if (!done) stage = star;
    const double tp_cap = detail::tp_axis_ratio(model, options, star) * (1 + tol) * (1 + kSlack);
    const bool check_tp = options.strategy == Strategy::kLbAsc && options.dims.tp > 1;
    for (int k = 0; k < 2; ++k) {
      StagePlan& candidate = k == 0 ? stage : star_cuts.stages[s];
      // The most DP ranks (a prefix) that may keep hosts with the TP axis within tolerance; the
      // ranks after them are relabelled towards the TP axis's balance (binary search).
      auto fits = [&](int keep_ranks) {
        detail::host_stage(model, options, old, c.stage, tol, keep_ranks, candidate);
        return !check_tp || detail::tp_axis_ratio(model, options, candidate) <= tp_cap;
      };
      if (!fits(options.dims.dp)) {
        int lo = 0, hi = options.dims.dp;  // fits(lo) assumed, !fits(hi)
        while (hi - lo > 1) {
          const int mid = lo + (hi - lo) / 2;
          (fits(mid) ? lo : hi) = mid;
        }
        balanced[k] = fits(lo);
      }
    }
  }
  const Plan* candidates[] = {&out, &star_cuts, &fresh};
  const Plan* best = &fresh;
  double best_moved = state_movement(model, old_plan, fresh).moved_state_bytes;
  const double eps = 1e-12 * (best_moved + 1.0);
  for (int k = 1; k >= 0; --k) {
    if (!balanced[k]) continue;
    const double moved = state_movement(model, old_plan, *candidates[k]).moved_state_bytes;
    if (moved <= best_moved + eps) {
      best = candidates[k];
      best_moved = moved;
    }
  }
  return *best;
}

}  // namespace

Plan replan(const model::ModelSpec& model, const PlanOptions& options, const Plan& old_plan,
            const ReplanOptions& replan_options) {
  validate_replan_options(replan_options);
  Plan fresh = make_plan(model, options);
  std::shared_ptr<const ExpertPlan> expert = fresh.expert;
  fresh.expert = nullptr;
  Plan out = replan_buffer(model, options, std::move(fresh), old_plan, replan_options);
  if (expert) {
    // A MoE model's two buffers are re-planned each against its own old plan.
    const ExpertPlan* old = old_plan.expert.get();
    CANZONA_REQUIRE(old != nullptr && old->ep == expert->ep && old->etp == expert->etp,
                    "re-planning a mixture of experts needs the old plan's --ep and --etp (",
                    old ? str("old --ep ", old->ep, " --etp ", old->etp)
                        : std::string("old plan has no experts"),
                    ", now --ep ", expert->ep, " --etp ", expert->etp, ")");
    auto e = std::make_shared<ExpertPlan>(*expert);
    e->plan = replan_buffer(e->model, e->plan.options, e->plan, old->plan, replan_options);
    out.expert = std::move(e);
  }
  return out;
}

}  // namespace canzona::plan
