// decode_rank and the sentinel decoding (rank_plan.h).
#include "canzona/plan/rank_plan.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::plan {

RankRange task_dp_ranks(const Task& t, int dp) {
  if (t.dp_owner == kEveryone) return {0, dp};
  if (t.dp_owner >= 0 && t.dp_owner < dp) return {t.dp_owner, t.dp_owner + 1};
  return {};
}

RankRange task_tp_ranks(const Task& t, int tp) {
  if (t.host == kAllTp) return {0, tp};
  if (t.host >= 0 && t.host < tp) return {t.host, t.host + 1};
  return {};
}

RankRange slot_dp_ranks(const StagePlan& stage, int bucket, const layout::Slot& slot, int dp) {
  const int owner = stage.owner[slot.param];
  if (owner == kEveryone) return {0, dp};
  if (owner >= 0 && owner < dp) return {owner, owner + 1};
  if (owner != kDivided) return {};
  const std::vector<std::int64_t>& cuts = stage.cuts[bucket];
  // Shard d is [cuts[d], cuts[d + 1]); the first that ends after the slot's start, up to the
  // first that starts at or after its end.
  const int begin = std::max(
      0,
      static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), slot.offset) - cuts.begin()) - 1);
  const int end = std::min(
      dp, static_cast<int>(std::lower_bound(cuts.begin(), cuts.end(), slot.end()) - cuts.begin()));
  return {begin, end};
}

std::pair<std::int64_t, std::int64_t> slot_part(const StagePlan& stage, int bucket,
                                                const layout::Slot& slot, int d) {
  if (!stage.cuts.empty()) {
    const std::vector<std::int64_t>& cuts = stage.cuts[bucket];
    const std::int64_t begin = std::max(slot.offset, cuts[d]);
    const std::int64_t end = std::min(slot.end(), cuts[d + 1]);
    if (begin >= end) return {0, 0};
    return {begin - slot.offset, end - slot.offset};
  }
  const int owner = stage.owner[slot.param];
  if (owner == kEveryone || owner == d) return {0, slot.numel};
  return {0, 0};
}

std::int64_t RankGroup::send_total() const {
  return send_counts.empty() ? 0 : send_displs.back() + send_counts.back();
}

std::int64_t RankGroup::recv_total() const {
  return recv_counts.empty() ? 0 : recv_displs.back() + recv_counts.back();
}

std::int64_t OwnerBatch::send_total() const {
  return send_counts.empty() ? 0 : send_displs.back() + send_counts.back();
}

std::int64_t OwnerBatch::recv_total() const {
  return recv_counts.empty() ? 0 : recv_displs.back() + recv_counts.back();
}

namespace {

// Where each param of the stage sits in the layout: (bucket, slot index).
struct SlotOf {
  int bucket = -1;
  int slot = -1;
};

std::vector<SlotOf> slots_of(const model::ModelSpec& model, const StagePlan& stage) {
  std::vector<SlotOf> out(model.params.size());
  const auto& buckets = stage.layout.buckets;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    for (std::size_t k = 0; k < buckets[b].slots.size(); ++k)
      out[buckets[b].slots[k].param] = {static_cast<int>(b), static_cast<int>(k)};
  return out;
}

RankGroup decode_group(const model::ModelSpec& model, const StagePlan& stage,
                       const MicroGroup& group, int index, int tp, int tp_rank) {
  RankGroup g;
  g.index = index;
  g.send_counts.assign(tp, 0);
  g.send_displs.assign(tp, 0);
  g.recv_counts.assign(tp, 0);
  g.recv_displs.assign(tp, 0);
  std::int64_t sent = 0;
  for (int h = 0; h < tp; ++h) {
    g.send_displs[h] = sent;
    for (int id : group.tasks) {
      const Task& t = stage.tasks[id];
      if (t.host != h) continue;
      const std::int64_t numel = shard_map(model.params[t.param], t.piece, tp, tp_rank).numel();
      g.sends.push_back({id, h, sent, numel});
      sent += numel;
    }
    g.send_counts[h] = sent - g.send_displs[h];
  }
  for (int id : group.tasks)
    if (stage.tasks[id].host == tp_rank)
      g.hosted.push_back({id, std::vector<std::int64_t>(tp, 0), std::vector<std::int64_t>(tp, 0)});
  std::int64_t received = 0;
  for (int q = 0; q < tp; ++q) {
    g.recv_displs[q] = received;
    for (GroupHosted& h : g.hosted) {
      const Task& t = stage.tasks[h.task];
      h.offsets[q] = received;
      h.numel[q] = shard_map(model.params[t.param], t.piece, tp, q).numel();
      received += h.numel[q];
    }
    g.recv_counts[q] = received - g.recv_displs[q];
  }
  return g;
}

// Batch `index` of the owner exchange as DP rank `me` sees it: each piece is a param's slot
// clipped to one DP shard of its bucket.
OwnerBatch decode_owner_batch(const StagePlan& stage, const std::vector<SlotOf>& where,
                              const std::vector<int>& params, int index, int dp, int me) {
  OwnerBatch b;
  b.index = index;
  b.send_counts.assign(dp, 0);
  b.send_displs.assign(dp, 0);
  b.recv_counts.assign(dp, 0);
  b.recv_displs.assign(dp, 0);
  auto part = [&](int p, int d) {
    const SlotOf at = where[p];
    return slot_part(stage, at.bucket, stage.layout.buckets[at.bucket].slots[at.slot], d);
  };
  std::int64_t sent = 0;
  for (int owner = 0; owner < dp; ++owner) {
    b.send_displs[owner] = sent;
    for (int p : params) {
      if (stage.owner[p] != owner) continue;
      const auto [first, last] = part(p, me);
      if (first >= last) continue;
      b.sends.push_back({p, first, last - first, sent});
      sent += last - first;
    }
    b.send_counts[owner] = sent - b.send_displs[owner];
  }
  for (int p : params)
    if (stage.owner[p] == me) b.owned.push_back(p);
  std::int64_t received = 0;
  for (int q = 0; q < dp; ++q) {
    b.recv_displs[q] = received;
    for (int p : b.owned) {
      const auto [first, last] = part(p, q);
      if (first >= last) continue;
      b.receives.push_back({p, first, last - first, received});
      received += last - first;
    }
    b.recv_counts[q] = received - b.recv_displs[q];
  }
  return b;
}

}  // namespace

RankPlan decode_rank(const model::ModelSpec& model, const Plan& plan, int stage_index, int dp_rank,
                     int tp_rank) {
  const PlanOptions& o = plan.options;
  CANZONA_CHECK(stage_index >= 0 && static_cast<std::size_t>(stage_index) < plan.stages.size(),
                "stage ", stage_index);
  CANZONA_CHECK(dp_rank >= 0 && dp_rank < o.dims.dp && tp_rank >= 0 && tp_rank < o.dims.tp,
                "rank (dp ", dp_rank, ", tp ", tp_rank, ") outside the ", o.dims.dp, " x ",
                o.dims.tp, " grid");
  const StagePlan& stage = plan.stages[stage_index];
  RankPlan r;
  r.stage = stage_index;
  r.dp_rank = dp_rank;
  r.tp_rank = tp_rank;
  r.dp = o.dims.dp;
  r.tp = o.dims.tp;
  r.parts = strategy_parts(o.strategy, o.layerwise_tp);
  const bool sharded = r.parts.dp_sync == DpSync::kReduceScatter;
  CANZONA_CHECK(!sharded || stage.cuts.size() == stage.layout.buckets.size(),
                "a Reduce-Scatter plan without cuts for every bucket");

  const std::vector<SlotOf> where = slots_of(model, stage);
  for (int p : stage.params) {
    if (model.params[p].is_matrix()) continue;
    const SlotOf at = where[p];
    CANZONA_CHECK(at.bucket >= 0, "param '", model.params[p].name, "' has no slot");
    const layout::Slot& slot = stage.layout.buckets[at.bucket].slots[at.slot];
    if (!slot_dp_ranks(stage, at.bucket, slot, o.dims.dp).contains(dp_rank)) continue;
    const auto [begin, end] = slot_part(stage, at.bucket, slot, dp_rank);
    if (begin < end) r.elementwise.push_back({p, begin, end});
  }

  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    const Task& t = stage.tasks[k];
    if (!task_dp_ranks(t, o.dims.dp).contains(dp_rank) ||
        !task_tp_ranks(t, o.dims.tp).contains(tp_rank))
      continue;
    TaskRole role = TaskRole::kRedundantGather;
    if (r.parts.dp_exchange == DpExchange::kOwnerAllToAll)
      role = TaskRole::kOwnerGathered;
    else if (t.host >= 0)
      role = TaskRole::kHosted;
    else if (o.dims.tp == 1 || model.params[t.param].tp_split_dim < 0)
      role = TaskRole::kLocal;
    r.tasks.push_back({static_cast<int>(k), role});
  }

  if (r.parts.tp_exchange == TpExchange::kMicroGroups &&
      static_cast<std::size_t>(dp_rank) < stage.groups.size()) {
    const std::vector<MicroGroup>& mine = stage.groups[dp_rank];
    for (std::size_t k = 0; k < mine.size(); ++k)
      r.groups.push_back(
          decode_group(model, stage, mine[k], static_cast<int>(k), o.dims.tp, tp_rank));
  }

  if (sharded) {
    for (const std::vector<std::int64_t>& cuts : stage.cuts) {
      BucketShards s;
      for (int d = 0; d < o.dims.dp; ++d) {
        s.counts.push_back(cuts[d + 1] - cuts[d]);
        s.displs.push_back(cuts[d]);
      }
      r.shards.push_back(std::move(s));
    }
  }

  if (r.parts.dp_exchange == DpExchange::kOwnerAllToAll) {
    CANZONA_CHECK(sharded, "the owner exchange needs DP shards");
    for (std::size_t k = 0; k < stage.owner_batches.size(); ++k)
      r.owner_batches.push_back(decode_owner_batch(stage, where, stage.owner_batches[k],
                                                   static_cast<int>(k), o.dims.dp, dp_rank));
  }

  if (r.parts.param_sync == ParamSync::kLayerwiseAllGatherV) {
    r.owned.assign(o.dims.dp, {});
    for (int p : stage.params) {
      const int owner = stage.owner[p];
      CANZONA_CHECK(owner >= 0 && owner < o.dims.dp, "layerwise owner ", owner, " of ",
                    model.params[p].name);
      r.owned[owner].push_back(p);
    }
  }
  return r;
}

}  // namespace canzona::plan
