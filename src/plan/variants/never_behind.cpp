// The never-behind selection (never_behind.h).
#include "variants/never_behind.h"

#include <algorithm>
#include <optional>

#include "canzona/common/error.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/peer_rule.h"
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

// What ours must not be behind: the authors' Megatron-Canzona plan and Megatron-LM's layer-wise
// plans, with duplicated TP and with one home rank per weight (layer-sharded), each on the metrics
// it compares on (peer_rule.h).
PeerMarks peer_marks(const model::ModelSpec& model, const StagePlan& stage, const PlanOptions& o) {
  PeerMarks peers;
  PlanOptions authors = o, duplicated = o, sharded = o;
  authors.variant = PlannerVariant::kMegatronCanzona;
  duplicated.strategy = sharded.strategy = Strategy::kLayerwise;
  duplicated.layerwise_tp = LayerwiseTp::kDuplicated;
  sharded.layerwise_tp = LayerwiseTp::kLayerSharded;
  auto balance = [&](const PlanOptions& p, const StagePlan& plan) {
    return compute_balance(model, single_stage(p, plan));
  };
  peers.tighten(balance(authors, plan_stage(model, stage, authors)), comparable_metrics(false));
  // Both layer-wise modes share the DP placement; only the TP homes differ. A grid whose padded
  // shards would not fit int64 (layout::padded_shards refuses it) has no layer-wise plan to
  // compare with, and ours does not need one.
  try {
    const StagePlan lw = plan_stage(model, stage, duplicated);
    peers.tighten(balance(duplicated, lw), comparable_metrics(true));
    StagePlan lw_sharded = lw;
    plan_tp(sharded, lw_sharded, model, layerwise_groups);
    peers.tighten(balance(sharded, lw_sharded), comparable_metrics(false));
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
  Standing held;
  for (LaidCuts& c : candidates) {
    StagePlan trial = stage_with_cuts(model, stage, std::move(c), o, form);
    const Plan single = single_stage(o, trial);
    const Metrics m =
        first ? compute_metrics(model, single, *first) : compute_metrics(model, single);
    if (!first) first = m;
    const Standing standing{metrics_behind(m, peers, comparable_metrics(false)), grid_score(m)};
    if (standing.beats(held)) {
      held = standing;
      best = std::move(trial);
    }
  }
  return best;
}

}  // namespace canzona::plan::detail
