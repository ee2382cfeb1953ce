// make_plan: ties model, layout, cost and the DP/TP planners together per pipeline stage.
#include "canzona/plan/plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/model/load.h"
#include "canzona/plan/dp.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/rank_plan.h"
#include "canzona/plan/tp.h"
#include "megatron_canzona.h"
#include "megatron_layerwise.h"
#include "stage_groups.h"
#include "tp_summary.h"

namespace canzona::plan {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Megatron-LM's layer-wise optimizer: a rank's elements in a bucket stay within 1.3x the mean.
constexpr double kLayerwiseNumelCap = 1.3;

}  // namespace

// Each message names the flag the field maps to (CLI flags map one-to-one onto PlanOptions) and
// the limit (plan.h). NaN fails every comparison, so each test is written to reject it.
void validate_options(const PlanOptions& o) {
  CANZONA_REQUIRE(o.dp > 0, "--dp must be positive (got ", o.dp, ")");
  CANZONA_REQUIRE(o.tp > 0, "--tp must be positive (got ", o.tp, ")");
  CANZONA_REQUIRE(o.pp > 0, "--pp must be positive (got ", o.pp, ")");
  // Each factor is bounded first, so the product (<= 2^60) cannot overflow.
  const bool grid_fits = o.dp <= kMaxRanks && o.tp <= kMaxRanks && o.pp <= kMaxRanks &&
                         std::int64_t{o.dp} * o.tp * o.pp <= kMaxRanks;
  CANZONA_REQUIRE(grid_fits, "--dp x --tp x --pp = ", o.dp, " x ", o.tp, " x ", o.pp,
                  " ranks is more than ", kMaxRanks, " (kMaxRanks)");
  CANZONA_REQUIRE(std::isfinite(o.alpha) && o.alpha >= 0.0 && o.alpha <= 1.0,
                  "--alpha must be in [0, 1] and finite (got ", o.alpha, ")");
  CANZONA_REQUIRE(!std::isnan(o.cmax_mb) && o.cmax_mb > 0.0,
                  "--cmax-mb must be positive and finite (got ", o.cmax_mb, ")");
  CANZONA_REQUIRE(o.cmax_mb * kMiB >= 1.0 && o.cmax_mb <= kMaxCmaxMb, "--cmax-mb must be between ",
                  1.0 / kMiB, " (one byte) and ", kMaxCmaxMb, " MiB (kMaxCmaxMb; got ", o.cmax_mb,
                  ")");
  CANZONA_REQUIRE(o.asc_group_tasks >= 0, "asc group size must be >= 0 (got ", o.asc_group_tasks,
                  ")");
  cost::check_options(o.cost);
}

namespace {

// C_max in bytes: cmax_mb is validated finite and in [2^-20, kMaxCmaxMb], so the product is at
// most 2^50 and the conversion exact enough and in range.
std::int64_t capacity_bytes(const PlanOptions& o) {
  const double bytes = o.cmax_mb * kMiB;
  CANZONA_CHECK(std::isfinite(bytes) && bytes >= 1.0 && bytes <= 0x1p62);
  return static_cast<std::int64_t>(bytes);
}

bool tp_hosted(const model::ParamSpec& p, const PlanOptions& o) {
  const bool hosting =
      o.strategy == Strategy::kAsc || o.strategy == Strategy::kLbAsc ||
      (o.strategy == Strategy::kLayerwise && o.layerwise_tp == LayerwiseTp::kLayerSharded);
  return o.tp > 1 && p.tp_split_dim >= 0 && hosting;
}

layout::LayoutOptions stage_layout_options(const PlanOptions& o) {
  layout::LayoutOptions options = o.layout;
  options.dp = o.dp;
  options.tp = o.tp;
  return options;
}

// The optimizer's price of a rows x cols task: cost, FLOPs, state bytes.
struct TaskPrice {
  double cost = 0.0, flops = 0.0, state_bytes = 0.0;
};
// Prices by shape within one stage: a model repeats few shapes (every head of a per-head split),
// and each price re-reads the optimizer's options.
using PriceCache = std::map<std::pair<std::int64_t, std::int64_t>, TaskPrice>;

// Matrix tasks of one param: the whole matrix or one per piece, full (un-TP-split) shapes.
void add_tasks(const model::ParamSpec& p, int index, const PlanOptions& o, PriceCache& prices,
               std::vector<Task>& tasks) {
  auto what = [&] { return str("param '", p.name, "': fp32 gradient bytes"); };
  auto add = [&](int piece, std::int64_t rows, std::int64_t cols) {
    Task t;
    t.param = index;
    t.piece = piece;
    t.rows = rows;
    t.cols = cols;
    auto [it, fresh] = prices.try_emplace({rows, cols});
    if (fresh)
      it->second = {cost::task_cost(o.cost.matrix_optimizer, rows, cols, o.cost),
                    cost::optimizer_flops(o.cost.matrix_optimizer, rows, cols, o.cost),
                    cost::state_bytes(o.cost.matrix_optimizer, rows, cols, o.cost)};
    t.cost = it->second.cost;
    t.flops = it->second.flops;
    t.state_bytes = it->second.state_bytes;
    CANZONA_REQUIRE(std::isfinite(t.cost) && std::isfinite(t.flops) && std::isfinite(t.state_bytes),
                    "param '", p.name, "': optimizer cost of a ", rows, " x ", cols,
                    " matrix is not a finite number (shape too large)");
    t.gather_bytes =
        checked_mul(checked_mul(rows, cols, what), static_cast<std::int64_t>(sizeof(float)), what);
    tasks.push_back(t);
  };
  if (p.pieces.empty()) {
    add(-1, p.rows(), p.cols());
    return;
  }
  for (std::size_t k = 0; k < p.pieces.size(); ++k)
    add(static_cast<int>(k), p.pieces[k].rows(), p.cols());
}

// Element-wise (AdamW) cost and memory of `numel` elements.
double adam_cost(std::int64_t numel, const PlanOptions& o) {
  return cost::task_cost(cost::kElementwiseOptimizer, numel, 1, o.cost);
}

// The owner of every param from element cuts: the rank whose shard holds the slot's start, or
// kDivided when an element-wise slot straddles a cut.
void owners_from_cuts(const layout::Layout& layout,
                      const std::vector<std::vector<std::int64_t>>& cuts,
                      const model::ModelSpec& model, std::vector<int>& owner) {
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const auto& c = cuts[b];
    for (const layout::Slot& slot : layout.buckets[b].slots) {
      const int r =
          static_cast<int>(std::upper_bound(c.begin(), c.end(), slot.offset) - c.begin()) - 1;
      const bool straddles = slot.end() > c[r + 1];
      CANZONA_CHECK(!straddles || !model.params[slot.param].is_matrix(), "matrix param '",
                    model.params[slot.param].name, "' split by a DP cut");
      owner[slot.param] = straddles ? kDivided : r;
    }
  }
}

using StageCuts = std::vector<std::vector<std::int64_t>>;  // [bucket] R+1 element offsets

// Element cuts of item cuts: each cut at its item's slot start, the bucket end past the last.
std::vector<std::int64_t> item_to_element_cuts(const layout::Bucket& bucket, const ItemCuts& u,
                                               int ranks) {
  std::vector<std::int64_t> c;
  for (int r = 0; r <= ranks; ++r)
    c.push_back(u[r] < static_cast<int>(bucket.slots.size()) ? bucket.slots[u[r]].offset
                                                             : bucket.numel);
  c[0] = 0;
  return c;
}

// A DP candidate: the stage's layout (re-laid or as built) and its cuts.
struct LaidCuts {
  layout::Layout layout;
  StageCuts cuts;
};

// Our planner's DP items of a layout: full-task cost summed over the TP group that runs it;
// element-wise params divisible.
struct StageItems {
  std::vector<std::vector<DpItem>> items;  // [bucket][slot]
  std::vector<std::vector<std::int64_t>> starts;
  std::vector<std::int64_t> numel;
};

StageItems canzona_items(const model::ModelSpec& model, const layout::Layout& layout,
                         const std::vector<Task>& tasks, const PlanOptions& o) {
  std::vector<double> matrix_cost(model.params.size(), 0.0);
  std::vector<double> matrix_memory(model.params.size(), 0.0);
  std::vector<std::vector<double>> task_costs(model.params.size());
  for (const Task& t : tasks) {
    matrix_cost[t.param] += t.cost;
    matrix_memory[t.param] += t.state_bytes;
    task_costs[t.param].push_back(t.cost);
  }
  StageItems s;
  for (const auto& bucket : layout.buckets) {
    s.items.emplace_back();
    s.starts.emplace_back();
    s.numel.push_back(bucket.numel);
    for (const auto& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      DpItem item;
      item.numel = slot.numel;
      const int copies = p.tp_split_dim >= 0 ? 1 : o.tp;  // replicated: every TP rank computes
      if (p.is_matrix()) {
        item.time = matrix_cost[slot.param] * copies;
        item.memory = matrix_memory[slot.param] * copies;
        if (tp_hosted(p, o)) item.tasks = task_costs[slot.param];
      } else {
        item.divisible = true;
        item.time = adam_cost(slot.numel, o) * o.tp;
        item.memory = cost::state_bytes(cost::kElementwiseOptimizer, slot.numel, 1, o.cost) * o.tp;
      }
      s.items.back().push_back(item);
      s.starts.back().push_back(slot.offset);
    }
  }
  return s;
}

// A free-order candidate (dp.h): the buckets re-laid by owner and cut there.
LaidCuts laid_cuts(const layout::Layout& layout, const StageItems& s, const FreeOrder& f,
                   const PlanOptions& o) {
  LaidCuts c;
  c.layout = layout::reorder_buckets(layout, f.order, stage_layout_options(o));
  StageItems laid;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = c.layout.buckets[b];
    laid.items.emplace_back();
    laid.starts.emplace_back();
    laid.numel.push_back(bucket.numel);
    for (std::size_t k = 0; k < bucket.slots.size(); ++k) {
      laid.items.back().push_back(s.items[b][f.order[b][k]]);
      laid.starts.back().push_back(bucket.slots[k].offset);
    }
  }
  for (auto& bucket : cuts_for_owners(laid.items, f.owner, laid.starts, laid.numel, o.dp))
    c.cuts.push_back(std::move(bucket.element_cuts));
  return c;
}

// Megatron-LM's layer-wise optimizer (layer_wise_optimizer.py): the DP rank of every param of
// every bucket, by LPT on max·min² of its TP-shard shape under the 1.3x numel cap.
std::vector<std::vector<int>> layerwise_ranks(const model::ModelSpec& model,
                                              const layout::Layout& layout, const PlanOptions& o) {
  std::vector<std::vector<double>> costs;
  std::vector<std::vector<std::int64_t>> numel;
  for (const layout::Bucket& bucket : layout.buckets) {
    costs.emplace_back();
    numel.emplace_back();
    for (const layout::Slot& slot : bucket.slots) {
      const auto shape = model.params[slot.param].local_shape(o.tp);
      const double a = static_cast<double>(shape[0]);
      const double b = shape.size() > 1 ? static_cast<double>(shape[1]) : 1.0;
      costs.back().push_back(std::max(a, b) * std::min(a, b) * std::min(a, b));
      numel.back().push_back(slot.numel);
    }
  }
  return layerwise_lpt_ranks(costs, numel, o.dp, kLayerwiseNumelCap);
}

// Megatron-LM's layer-wise optimizer as it ships (megatron_layerwise.h): the params Muon
// orthogonalises in a buffer of soft-minimum shard-aligned buckets, every other param in the
// regular distributed optimizer's buffer (fixed buckets, equal element shards, #4771). The two
// buffers' buckets are merged in the order backward completes them (a bucket is ready when its
// last param in backprop order is), the order the engine posts them and the simulator times them.
// Every bucket is dp equal shards, so the cuts are equal_chunk_cuts.
layout::Layout upstream_layerwise_layout(const model::ModelSpec& model,
                                         const std::vector<int>& params, const PlanOptions& o) {
  const layout::LayoutOptions options = stage_layout_options(o);
  std::vector<int> others;
  std::vector<megatron_layerwise::Param> managed;
  for (int p : params) {
    const model::ParamSpec& spec = model.params[p];
    if (!spec.is_matrix()) {
      others.push_back(p);
      continue;
    }
    // Our model specs hold one tied embedding (no last-stage copy) and route it to the other
    // buffer, and no param is GTP-rematerialised, so both flags keep their defaults here.
    managed.push_back({p, spec.local_numel(o.tp), spec.local_shape(o.tp)});
  }
  const megatron_layerwise::BufferLayout lw =
      megatron_layerwise::layerwise_buffer(managed, layout::effective_bucket_size(options), o.dp);
  const layout::Layout distopt = layout::build_layout(model, others, options);

  std::vector<int> backprop(model.params.size(), -1);  // position in the backward walk
  for (std::size_t k = 0; k < params.size(); ++k)
    backprop[params[params.size() - 1 - k]] = static_cast<int>(k);
  struct Entry {
    int done;  // backprop position of the bucket's last-ready param
    const layout::Bucket* bucket;
  };
  std::vector<Entry> entries;
  for (const layout::Layout* buffer : {&lw.layout, &distopt})
    for (const layout::Bucket& bucket : buffer->buckets) {
      int done = -1;
      for (const layout::Slot& slot : bucket.slots) done = std::max(done, backprop[slot.param]);
      entries.push_back({done, &bucket});
    }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.done < b.done; });
  layout::Layout out;
  for (const Entry& e : entries) {
    layout::Bucket& bucket = out.buckets.emplace_back(*e.bucket);
    bucket.offset = out.numel;
    out.numel = checked_add(out.numel, bucket.numel, "layout: buffer size");
  }
  return out;
}

// The DP cuts to consider: one set for asc and the paper's Algorithm 1, our planner's candidates
// otherwise (plan_from keeps the one whose whole DP x TP plan is best), with the free-order ones
// on re-laid buckets when o.reorder_buckets.
std::vector<LaidCuts> dp_cut_candidates(const model::ModelSpec& model, const layout::Layout& layout,
                                        const std::vector<Task>& tasks, const PlanOptions& o) {
  const int R = o.dp;
  std::vector<std::vector<std::int64_t>> cuts;
  if (o.strategy == Strategy::kAsc) {
    for (const auto& bucket : layout.buckets) {
      std::vector<std::int64_t> starts;
      for (const auto& slot : bucket.slots) starts.push_back(slot.offset);
      const ItemCuts u = start_index_cuts(starts, bucket.numel, R);
      std::vector<std::int64_t> c;
      for (int r = 0; r <= R; ++r)
        c.push_back(u[r] < static_cast<int>(starts.size()) ? starts[u[r]] : bucket.numel);
      c[0] = 0;
      c[R] = bucket.numel;
      cuts.push_back(std::move(c));
    }
    return {{layout, cuts}};
  }
  if (o.variant == PlannerVariant::kMegatronCanzona) {
    // The authors' code: numel-balanced greedy per buffer, start-index kept unless strictly worse.
    std::vector<std::vector<std::int64_t>> numel, starts;
    std::vector<std::int64_t> bucket_numel;
    for (const auto& bucket : layout.buckets) {
      numel.emplace_back();
      starts.emplace_back();
      bucket_numel.push_back(bucket.numel);
      for (const auto& slot : bucket.slots) {
        numel.back().push_back(slot.numel);
        starts.back().push_back(slot.offset);
      }
    }
    const auto result = megatron_canzona::dp_item_cuts(numel, starts, bucket_numel, R, o.alpha);
    for (std::size_t b = 0; b < layout.buckets.size(); ++b)
      cuts.push_back(item_to_element_cuts(layout.buckets[b], result.cuts[b], R));
    return {{layout, cuts}};
  }
  if (o.variant == PlannerVariant::kPaper) {
    // Paper: W(p) of the TP-local shape, params atomic.
    std::vector<std::vector<double>> costs;
    for (const auto& bucket : layout.buckets) {
      costs.emplace_back();
      for (const auto& slot : bucket.slots) {
        const model::ParamSpec& p = model.params[slot.param];
        const auto local = p.local_shape(o.tp);
        const std::int64_t local_rows = local[0];
        const std::int64_t local_cols = local.size() > 1 ? local[1] : 1;
        costs.back().push_back(
            p.is_matrix() ? cost::task_cost(o.cost.matrix_optimizer, local_rows, local_cols, o.cost)
                          : adam_cost(slot.numel, o));
      }
    }
    const auto item_cuts = alpha_balanced_cuts(costs, R, o.alpha);
    for (std::size_t b = 0; b < layout.buckets.size(); ++b)
      cuts.push_back(item_to_element_cuts(layout.buckets[b], item_cuts[b], R));
    return {{layout, cuts}};
  }
  const StageItems s = canzona_items(model, layout, tasks, o);
  std::vector<LaidCuts> candidates;
  for (auto& candidate : balanced_cut_candidates(s.items, s.starts, s.numel, R, o.tp)) {
    LaidCuts c{layout, {}};
    for (auto& bucket : candidate) c.cuts.push_back(std::move(bucket.element_cuts));
    candidates.push_back(std::move(c));
  }
  // The peers' DP placements are candidates of ours too, so ours never loses to them for want of
  // trying one: the authors' cuts in Megatron's order and, in free order, Megatron's layer-wise
  // owners laid out by owner (variable shards, nothing padded).
  PlanOptions authors = o;
  authors.variant = PlannerVariant::kMegatronCanzona;
  for (LaidCuts& c : dp_cut_candidates(model, layout, tasks, authors))
    candidates.push_back(std::move(c));
  if (o.reorder_buckets) {
    for (const FreeOrder& f : free_order_candidates(s.items, R, o.tp))
      candidates.push_back(laid_cuts(layout, s, f, o));
    const FreeOrder lw = free_order_for_owners(s.items, R, layerwise_ranks(model, layout, o));
    candidates.push_back(laid_cuts(layout, s, lw, o));
    // Megatron-LM's layer-wise buckets and owners as it ships: its Muon buckets laid out by
    // owner without the shard padding, its distributed-optimizer buckets with their equal
    // element shards (our water-fill of them can hold more state on one rank); our TP planner
    // then runs on it. A layout that does not fit int64 has no candidate.
    try {
      std::vector<int> params;
      for (const layout::Bucket& bucket : layout.buckets)
        for (const layout::Slot& slot : bucket.slots) params.push_back(slot.param);
      std::sort(params.begin(), params.end());
      const layout::Layout upstream = upstream_layerwise_layout(model, params, o);
      std::vector<std::vector<int>> owner;
      std::vector<char> managed;
      for (const layout::Bucket& bucket : upstream.buckets) {
        const std::int64_t shard = bucket.numel / R;
        owner.emplace_back();
        managed.push_back(model.params[bucket.slots.at(0).param].is_matrix());
        for (const layout::Slot& slot : bucket.slots)
          owner.back().push_back(managed.back() ? static_cast<int>(slot.offset / shard) : -1);
      }
      const StageItems u = canzona_items(model, upstream, tasks, o);
      LaidCuts c = laid_cuts(upstream, u, free_order_for_owners(u.items, R, owner), o);
      for (std::size_t b = 0; b < managed.size(); ++b)
        if (!managed[b]) c.cuts[b] = equal_chunk_cuts(c.layout.buckets[b].numel, R);
      candidates.push_back(std::move(c));
    } catch (const UsageError&) {
    }
  }
  // Different placements often cut alike; each distinct plan is judged once.
  auto same = [](const LaidCuts& a, const LaidCuts& b) {
    if (a.cuts != b.cuts) return false;
    for (std::size_t k = 0; k < a.layout.buckets.size(); ++k) {
      const auto& x = a.layout.buckets[k].slots;
      const auto& y = b.layout.buckets[k].slots;
      if (x.size() != y.size()) return false;  // candidates may bucket differently
      for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i].param != y[i].param || x[i].offset != y[i].offset) return false;
    }
    return true;
  };
  std::vector<LaidCuts> distinct;
  for (LaidCuts& c : candidates)
    if (std::none_of(distinct.begin(), distinct.end(),
                     [&](const LaidCuts& d) { return same(d, c); }))
      distinct.push_back(std::move(c));
  return distinct;
}

// A plan of one stage, for the metrics of a candidate or a peer.
Plan single_stage(const PlanOptions& o, const StagePlan& stage) {
  Plan single;
  single.options = o;
  single.stages.push_back(stage);
  return single;
}

// How good a finished stage plan is on the whole grid: the worst of DP FLOPs and memory max/mean
// and grid FLOPs and memory max/mean relative to their lower bounds (1 is perfect).
double grid_score(const Metrics& m) {
  return std::max({m.dp.flops, m.dp.memory, m.grid.flops / m.lower_bound_grid.flops,
                   m.grid.memory / m.lower_bound_grid.memory});
}

// What ours must not be behind (docs/design.md section 1: baselines at their strongest), as the
// smallest value any peer reaches on each metric: the authors' Megatron-Canzona plan and
// Megatron-LM's layer-wise plan with one home rank per weight (layer-sharded) on the five max/mean
// metrics and the busiest rank's FLOPs and memory; Megatron-LM's default layer-wise plan
// (duplicated TP) on DP FLOPs max/mean and the busiest rank. Duplicated TP computes and stores
// every TP-split update on every TP rank, so its TP and grid max/mean are 1 and its memory
// max/mean are over a mean inflated by tp x the matrix state: only its DP FLOPs ratio (matrix
// work, all inflated alike) and its busiest rank compare.
struct PeerMarks {
  enum Metric { kDpFlops, kDpMemory, kTpFlops, kGridFlops, kGridMemory, kBusyFlops, kBusyMemory };
  static constexpr int kMetrics = 7;
  std::array<double, kMetrics> best;  // the lowest peer value of each metric (infinity: none)
  PeerMarks() { best.fill(std::numeric_limits<double>::infinity()); }
};

std::array<double, PeerMarks::kMetrics> metric_values(const Metrics& m) {
  return {m.dp.flops,    m.dp.memory,      m.tp.flops,       m.grid.flops,
          m.grid.memory, m.max_rank.flops, m.max_rank.memory};
}

// A metric counts as behind when it exceeds the peer's by more than this fraction
// (scripts/plan-sweep.sh marks the same).
constexpr double kBehindTolerance = 0.005;

void tighten(PeerMarks& marks, const Metrics& m, std::initializer_list<PeerMarks::Metric> which) {
  const auto values = metric_values(m);
  for (PeerMarks::Metric k : which) marks.best[k] = std::min(marks.best[k], values[k]);
}

int behind(const Metrics& m, const PeerMarks& p) {
  const auto values = metric_values(m);
  int count = 0;
  for (int k = 0; k < PeerMarks::kMetrics; ++k)
    count += values[k] > (1.0 + kBehindTolerance) * p.best[k];
  return count;
}

void plan_tp(const PlanOptions& o, StagePlan& stage, const model::ModelSpec& model) {
  stage.groups.assign(o.dp, {});
  const std::int64_t capacity = capacity_bytes(o);
  std::vector<double> tp_total(o.tp, 0.0);  // work per TP rank over the DP ranks planned so far
  std::vector<std::vector<int>> hosted_by_dp(o.dp);  // TP-hosted task indices per DP owner
  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    const Task& t = stage.tasks[k];
    if (t.dp_owner >= 0 && tp_hosted(model.params[t.param], o))
      hosted_by_dp[t.dp_owner].push_back(static_cast<int>(k));
  }
  for (int d = 0; d < o.dp; ++d) {
    const std::vector<int>& ids = hosted_by_dp[d];
    if (ids.empty()) continue;
    std::vector<TpTask> tp_tasks;
    for (int k : ids) tp_tasks.push_back({stage.tasks[k].cost, stage.tasks[k].gather_bytes});
    std::vector<TpGroup> groups;
    if (o.strategy == Strategy::kLayerwise) {
      // layer-sharded: every hosted weight of this DP rank in one fused All-to-All, homes by LPT.
      std::vector<int> all(tp_tasks.size());
      std::iota(all.begin(), all.end(), 0);
      TpGroup g;
      g.tasks = all;
      g.hosts = lpt_hosts(tp_tasks, all, std::vector<double>(o.tp, 0.0));
      detail::Summariser(o.tp)(tp_tasks, g);
      groups.push_back(std::move(g));
    } else if (o.strategy == Strategy::kAsc) {
      groups = round_robin_groups(tp_tasks, o.tp, o.asc_group_tasks > 0 ? o.asc_group_tasks : o.tp);
    } else if (o.variant == PlannerVariant::kPaper) {
      groups = rollback_groups(tp_tasks, o.tp, capacity);
    } else if (o.variant == PlannerVariant::kMegatronCanzona) {
      // The authors' "global" mode: LPT under 400 Mi TP-shard elements per host per group.
      std::vector<std::int64_t> shard_elements;
      for (int k : ids) shard_elements.push_back(stage.tasks[k].rows * stage.tasks[k].cols / o.tp);
      groups = megatron_canzona::tp_groups(tp_tasks, shard_elements, o.tp);
    } else {
      groups = balanced_groups(tp_tasks, o.tp, capacity);
    }
    // Ours: relabel the hosts so the TP axis (work per TP rank summed over DP) is balanced.
    if (o.variant == PlannerVariant::kCanzona && o.strategy == Strategy::kLbAsc) {
      const std::vector<double> load = detail::relabel_hosts(groups, tp_tasks, tp_total);
      for (int h = 0; h < o.tp; ++h) tp_total[h] += load[h];
    }
    detail::assign_groups(stage, d, ids, groups);
  }
}

// What every strategy's plan of a stage starts from: Megatron's layout and the matrix tasks
// (neither depends on the strategy or the planner), no owner yet.
StagePlan stage_base(const model::ModelSpec& model, std::vector<int> params, int stage_index,
                     const PlanOptions& o) {
  StagePlan stage;
  stage.stage = stage_index;
  stage.params = std::move(params);
  stage.layout = layout::build_layout(model, stage.params, stage_layout_options(o));
  PriceCache prices;
  for (int p : stage.params)
    if (model.params[p].is_matrix()) add_tasks(model.params[p], p, o, prices, stage.tasks);
  // Bounds every sum of gather bytes the TP planners form (a host's bytes in a group).
  auto what = [&] { return str("stage ", stage_index, ": fp32 gradient bytes of all matrices"); };
  std::int64_t stage_bytes = 0;
  for (const Task& t : stage.tasks) stage_bytes = checked_add(stage_bytes, t.gather_bytes, what);
  stage.owner.assign(model.params.size(), -1);
  return stage;
}

// The plan of strategy o.strategy (planner o.variant) from a stage_base.
StagePlan plan_from(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  const int stage_index = stage.stage;
  if (strategy_parts(o.strategy, o.layerwise_tp).dp_sync == DpSync::kReduceScatter) {
    const auto buckets = static_cast<std::int64_t>(stage.layout.buckets.size());
    // buckets <= params <= 2^20 and dp <= 2^20: the product fits int64.
    CANZONA_REQUIRE((o.dp + std::int64_t{1}) * buckets <= kMaxCutPoints, "stage ", stage_index,
                    ": ", buckets, " buckets x (--dp ", o.dp,
                    " + 1) = ", (o.dp + std::int64_t{1}) * buckets, " DP cut points is more than ",
                    kMaxCutPoints,
                    " (kMaxCutPoints); use a larger --bucket-size or fewer DP ranks");
  }
  switch (o.strategy) {
    case Strategy::kSc:
      for (int p : stage.params) stage.owner[p] = kEveryone;
      break;
    case Strategy::kLayerwise: {
      if (o.layerwise_buckets == LayerwiseBuckets::kSoftMinimum) {
        stage.layout = upstream_layerwise_layout(model, stage.params, o);
        for (const layout::Bucket& bucket : stage.layout.buckets)
          stage.cuts.push_back(equal_chunk_cuts(bucket.numel, o.dp));
        owners_from_cuts(stage.layout, stage.cuts, model, stage.owner);
        break;
      }
      // The fixed-bucket variant (before #5415, params not routed by optimizer): Megatron's
      // layout, per-bucket LPT on max·min² of the TP-shard shape under a 1.3x numel cap, laid
      // out in padded equal shards.
      std::vector<std::vector<int>> order;
      for (const layout::Bucket& bucket : stage.layout.buckets) {
        order.emplace_back(bucket.slots.size());
        std::iota(order.back().begin(), order.back().end(), 0);
      }
      const auto ranks = layerwise_ranks(model, stage.layout, o);
      stage.layout = layout::padded_shards(stage.layout, order, ranks, stage_layout_options(o));
      for (const layout::Bucket& bucket : stage.layout.buckets)
        stage.cuts.push_back(equal_chunk_cuts(bucket.numel, o.dp));
      owners_from_cuts(stage.layout, stage.cuts, model, stage.owner);
      break;
    }
    case Strategy::kLayerwisePaper: {
      std::vector<double> task_cost(model.params.size(), 0.0);
      for (const Task& t : stage.tasks) task_cost[t.param] += t.cost;
      std::vector<double> costs(stage.params.size(), 0.0);
      for (std::size_t k = 0; k < stage.params.size(); ++k) {
        const model::ParamSpec& p = model.params[stage.params[k]];
        costs[k] = p.is_matrix() ? task_cost[stage.params[k]] : adam_cost(p.local_numel(o.tp), o);
      }
      const std::vector<int> owners = layerwise_owners(costs, o.dp);
      for (std::size_t k = 0; k < stage.params.size(); ++k)
        stage.owner[stage.params[k]] = owners[k];
      break;
    }
    case Strategy::kAsc:
    case Strategy::kLbAsc: {
      std::vector<LaidCuts> candidates = dp_cut_candidates(model, stage.layout, stage.tasks, o);
      // Ours keeps the candidate behind the peers on the fewest metrics, then the best grid_score
      // (earliest on ties).
      PeerMarks peers;
      if (candidates.size() > 1) {
        using M = PeerMarks;
        PlanOptions authors = o, duplicated = o, sharded = o;
        authors.variant = PlannerVariant::kMegatronCanzona;
        duplicated.strategy = sharded.strategy = Strategy::kLayerwise;
        duplicated.layerwise_tp = LayerwiseTp::kDuplicated;
        sharded.layerwise_tp = LayerwiseTp::kLayerSharded;
        auto balance = [&](const PlanOptions& p, const StagePlan& plan) {
          return compute_balance(model, single_stage(p, plan));
        };
        const std::initializer_list<M::Metric> all = {M::kDpFlops,   M::kDpMemory,   M::kTpFlops,
                                                      M::kGridFlops, M::kGridMemory, M::kBusyFlops,
                                                      M::kBusyMemory};
        tighten(peers, balance(authors, plan_from(model, stage, authors)), all);
        // Both layer-wise modes share the DP placement; only the TP homes differ. A grid whose
        // padded shards would not fit int64 (layout::padded_shards refuses it) has no layer-wise
        // plan to compare with, and ours does not need one.
        try {
          const StagePlan lw = plan_from(model, stage, duplicated);
          tighten(peers, balance(duplicated, lw), {M::kDpFlops, M::kBusyFlops, M::kBusyMemory});
          StagePlan lw_sharded = lw;
          plan_tp(sharded, lw_sharded, model);
          tighten(peers, balance(sharded, lw_sharded), all);
        } catch (const UsageError&) {
        }
      }
      std::optional<Metrics> first;  // the candidates share their lower bounds: computed once
      StagePlan best;
      int best_behind = std::numeric_limits<int>::max();
      double best_score = std::numeric_limits<double>::infinity();
      for (LaidCuts& c : candidates) {
        StagePlan trial = stage;
        trial.layout = std::move(c.layout);
        trial.cuts = std::move(c.cuts);
        owners_from_cuts(trial.layout, trial.cuts, model, trial.owner);
        for (Task& t : trial.tasks) t.dp_owner = trial.owner[t.param];
        plan_tp(o, trial, model);
        if (candidates.size() == 1) return trial;
        const Plan single = single_stage(o, trial);
        const Metrics m =
            first ? compute_metrics(model, single, *first) : compute_metrics(model, single);
        if (!first) first = m;
        const int lag = behind(m, peers);
        const double score = grid_score(m);
        if (lag < best_behind || (lag == best_behind && score < best_score * (1.0 - 1e-12))) {
          best_behind = lag;
          best_score = score;
          best = std::move(trial);
        }
      }
      return best;
    }
  }
  for (Task& t : stage.tasks) t.dp_owner = stage.owner[t.param];
  plan_tp(o, stage, model);
  return stage;
}

template <typename T>
void hash_value(std::uint64_t& h, const T& value) {
  fnv1a_mix(h, &value, sizeof(value));
}

}  // namespace

Strategy parse_strategy(const std::string& name) {
  if (name == "sc") return Strategy::kSc;
  if (name == "layerwise") return Strategy::kLayerwise;
  if (name == "layerwise-paper") return Strategy::kLayerwisePaper;
  if (name == "asc") return Strategy::kAsc;
  if (name == "lb-asc") return Strategy::kLbAsc;
  throw UsageError(str("unknown strategy '", name,
                       "' (expected sc, layerwise, layerwise-paper, asc or lb-asc)"));
}

std::vector<Strategy> parse_strategy_list(const std::string& text) {
  if (text == "all")
    return {Strategy::kSc, Strategy::kLayerwise, Strategy::kLayerwisePaper, Strategy::kAsc,
            Strategy::kLbAsc};
  std::vector<Strategy> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) out.push_back(parse_strategy(text.substr(begin, comma - begin)));
    begin = comma + 1;
  }
  CANZONA_REQUIRE(!out.empty(),
                  "--strategy: give sc, layerwise, layerwise-paper, asc, lb-asc, a comma list or "
                  "all");
  return out;
}

const char* to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::kSc:
      return "sc";
    case Strategy::kLayerwise:
      return "layerwise";
    case Strategy::kLayerwisePaper:
      return "layerwise-paper";
    case Strategy::kAsc:
      return "asc";
    case Strategy::kLbAsc:
      return "lb-asc";
  }
  return "?";
}

PlannerVariant parse_variant(const std::string& name) {
  if (name == "paper") return PlannerVariant::kPaper;
  if (name == "megatron-canzona") return PlannerVariant::kMegatronCanzona;
  if (name == "canzona") return PlannerVariant::kCanzona;
  throw UsageError(
      str("unknown planner '", name, "' (expected canzona, megatron-canzona or paper)"));
}

const char* to_string(PlannerVariant variant) {
  switch (variant) {
    case PlannerVariant::kPaper:
      return "paper";
    case PlannerVariant::kMegatronCanzona:
      return "megatron-canzona";
    case PlannerVariant::kCanzona:
      return "canzona";
  }
  return "?";
}

LayerwiseBuckets parse_layerwise_buckets(const std::string& name) {
  if (name == "soft-min") return LayerwiseBuckets::kSoftMinimum;
  if (name == "fixed") return LayerwiseBuckets::kFixed;
  throw UsageError(str("unknown --layerwise-buckets '", name, "' (expected soft-min or fixed)"));
}

const char* to_string(LayerwiseBuckets mode) {
  return mode == LayerwiseBuckets::kSoftMinimum ? "soft-min" : "fixed";
}

LayerwiseTp parse_layerwise_tp(const std::string& name) {
  if (name == "duplicated") return LayerwiseTp::kDuplicated;
  if (name == "layer-sharded") return LayerwiseTp::kLayerSharded;
  throw UsageError(
      str("unknown --layerwise-tp '", name, "' (expected duplicated or layer-sharded)"));
}

const char* to_string(LayerwiseTp mode) {
  return mode == LayerwiseTp::kDuplicated ? "duplicated" : "layer-sharded";
}

bool parse_bucket_order(const std::string& name) {
  if (name == "free") return true;
  if (name == "keep") return false;
  throw UsageError(str("unknown --bucket-order '", name, "' (expected free or keep)"));
}

Plan make_plan(const model::ModelSpec& model, const PlanOptions& options) {
  validate_options(options);
  model::validate(model, options.tp);
  const std::vector<int> stage_of = model::assign_stages(model, options.pp);
  std::vector<std::vector<int>> stage_params(options.pp);
  for (std::size_t p = 0; p < model.params.size(); ++p)
    stage_params[stage_of[p]].push_back(static_cast<int>(p));
  Plan plan;
  plan.options = options;
  for (int s = 0; s < options.pp; ++s)
    plan.stages.push_back(
        plan_from(model, stage_base(model, std::move(stage_params[s]), s, options), options));
  return plan;
}

std::uint64_t plan_hash(const Plan& plan) {
  std::uint64_t h = kFnvOffset;
  const PlanOptions& o = plan.options;
  for (int v : {static_cast<int>(o.strategy), static_cast<int>(o.variant), o.dp, o.tp, o.pp})
    hash_value(h, v);
  for (const StagePlan& stage : plan.stages) {
    for (int p : stage.params) hash_value(h, p);
    for (const auto& bucket : stage.layout.buckets)
      for (const auto& slot : bucket.slots) {
        hash_value(h, slot.offset);
        hash_value(h, slot.numel);
      }
    for (const auto& c : stage.cuts)
      for (std::int64_t v : c) hash_value(h, v);
    for (int v : stage.owner) hash_value(h, v);
    for (const Task& t : stage.tasks)
      for (int v : {t.param, t.piece, t.dp_owner, t.host, t.group}) hash_value(h, v);
    for (const auto& groups : stage.groups)
      for (const auto& g : groups)
        for (int t : g.tasks) hash_value(h, t);
  }
  return h;
}

}  // namespace canzona::plan
