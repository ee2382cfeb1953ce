// The never-behind selection (never_behind.h).
#include "variants/never_behind.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>
#include <optional>

#include "canzona/common/error.h"
#include "canzona/plan/metrics.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {
namespace {

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

// What ours must not be behind, as the smallest value any peer reaches on each metric: the
// authors' Megatron-Canzona plan and Megatron-LM's layer-wise plan with one home rank per weight
// (layer-sharded) on the five max/mean metrics and the busiest rank's FLOPs and memory;
// Megatron-LM's default layer-wise plan (duplicated TP) on DP FLOPs max/mean and the busiest rank.
// Duplicated TP computes and stores every TP-split update on every TP rank, so its TP and grid
// max/mean are 1 and its memory max/mean are over a mean inflated by tp x the matrix state: only
// its DP FLOPs ratio (matrix work, all inflated alike) and its busiest rank compare.
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

PeerMarks peer_marks(const model::ModelSpec& model, const StagePlan& stage, const PlanOptions& o) {
  using M = PeerMarks;
  PeerMarks peers;
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
  tighten(peers, balance(authors, plan_stage(model, stage, authors)), all);
  // Both layer-wise modes share the DP placement; only the TP homes differ. A grid whose padded
  // shards would not fit int64 (layout::padded_shards refuses it) has no layer-wise plan to
  // compare with, and ours does not need one.
  try {
    const StagePlan lw = plan_stage(model, stage, duplicated);
    tighten(peers, balance(duplicated, lw), {M::kDpFlops, M::kBusyFlops, M::kBusyMemory});
    StagePlan lw_sharded = lw;
    plan_tp(sharded, lw_sharded, model, layerwise_groups);
    tighten(peers, balance(sharded, lw_sharded), all);
  } catch (const SizeOverflow&) {
  }
  return peers;
}

}  // namespace

StagePlan never_behind(const model::ModelSpec& model, const StagePlan& stage,
                       std::vector<LaidCuts> candidates, const PlanOptions& o, GroupFormer form) {
  CANZONA_CHECK(candidates.size() > 1);
  const PeerMarks peers = peer_marks(model, stage, o);
  std::optional<Metrics> first;  // the candidates share their lower bounds: computed once
  StagePlan best;
  int best_behind = std::numeric_limits<int>::max();
  double best_score = std::numeric_limits<double>::infinity();
  for (LaidCuts& c : candidates) {
    StagePlan trial = stage_with_cuts(model, stage, std::move(c), o, form);
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

}  // namespace canzona::plan::detail
