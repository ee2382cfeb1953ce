// Checks made before the first collective of a strategy (plan_check.h): the plan fits the model
// and the grid, and every rank computed the same plan.
#include "canzona/launch/plan_check.h"

#include <algorithm>
#include <cstdio>

#include "canzona/plan/rank_plan.h"
#include "canzona/plan/shard_map.h"

namespace canzona::launch {
namespace {

using plan::shard_map;
using plan::ShardMap;

template <typename... Args>
void require(bool ok, const Args&... what) {
  if (!ok) throw PlanAgreementError(str("plan does not match the model: ", what...));
}

void check_layout(const model::ModelSpec& model, const plan::StagePlan& stage, int tp) {
  std::vector<int> seen(model.params.size(), 0);
  std::int64_t end = 0;
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = stage.layout.buckets[b];
    require(bucket.offset >= end, "bucket ", b, " overlaps the previous one");
    std::int64_t slot_end = 0;
    for (const layout::Slot& slot : bucket.slots) {
      require(slot.param >= 0 && slot.param < static_cast<int>(model.params.size()), "bucket ", b,
              " holds param index ", slot.param, " of a ", model.params.size(), "-param model");
      const model::ParamSpec& p = model.params[slot.param];
      require(slot.numel == p.local_numel(tp), "param '", p.name, "' has ", slot.numel,
              " elements in the layout but ", p.local_numel(tp), " per TP rank at tp=", tp);
      require(slot.offset >= slot_end && slot.end() <= bucket.numel, "param '", p.name,
              "' overlaps its neighbour or leaves bucket ", b);
      slot_end = slot.end();
      ++seen[slot.param];
    }
    end = bucket.offset + bucket.numel;
  }
  require(end <= stage.layout.numel, "buckets run past the buffer");
  std::vector<int> want(model.params.size(), 0);  // 1 for the stage's params
  for (int p : stage.params)
    if (p >= 0 && p < static_cast<int>(want.size())) want[p] = 1;
  for (std::size_t p = 0; p < model.params.size(); ++p)
    require(seen[p] == want[p], "param '", model.params[p].name, "' appears ", seen[p],
            " times in the layout");
}

void check_owners(const model::ModelSpec& model, const plan::StagePlan& stage,
                  plan::Strategy strategy, plan::LayerwiseTp layerwise_tp, int dp) {
  require(stage.owner.size() == model.params.size(), "owner list has ", stage.owner.size(),
          " entries for ", model.params.size(), " params");
  const plan::StrategyParts parts = plan::strategy_parts(strategy, layerwise_tp);
  const bool rs = parts.dp_sync == plan::DpSync::kReduceScatter;
  // The owner exchange moves each matrix to its owner wherever the cuts put it.
  const bool exchanged = parts.dp_exchange == plan::DpExchange::kOwnerAllToAll;
  require(exchanged || stage.owner_batches.empty(), plan::to_string(strategy),
          " has owner-exchange batches");
  require(rs ? stage.cuts.size() == stage.layout.buckets.size() : stage.cuts.empty(), "cuts for ",
          stage.cuts.size(), " of ", stage.layout.buckets.size(), " buckets");
  for (std::size_t b = 0; b < stage.cuts.size(); ++b) {
    const auto& c = stage.cuts[b];
    const layout::Bucket& bucket = stage.layout.buckets[b];
    require(static_cast<int>(c.size()) == dp + 1 && c.front() == 0 && c.back() == bucket.numel,
            "bucket ", b, " cuts do not span [0, ", bucket.numel, "] with dp+1 entries");
    for (int r = 0; r < dp; ++r) require(c[r] <= c[r + 1], "bucket ", b, " cuts not monotone");
    for (const layout::Slot& slot : bucket.slots) {
      int r = 0;
      while (r + 1 < dp && c[r + 1] <= slot.offset) ++r;
      const bool inside = slot.end() <= c[r + 1];
      const model::ParamSpec& p = model.params[slot.param];
      if (exchanged) {
        const int owner = stage.owner[slot.param];
        require(p.is_matrix() ? owner >= 0 && owner < dp : owner == plan::kDivided, "param '",
                p.name, "' owner ", owner, " under the owner exchange");
        continue;
      }
      require(inside || !p.is_matrix(), "matrix param '", p.name, "' is split by a DP cut");
      const int owner = stage.owner[slot.param];
      require(owner == (inside ? r : plan::kDivided) || (!p.is_matrix() && owner == plan::kDivided),
              "param '", p.name, "' owner ", owner, " but its slot starts in shard ", r);
    }
  }
  if (exchanged) {
    // Every matrix param in exactly one batch.
    std::vector<int> batched(model.params.size(), 0);
    for (const std::vector<int>& batch : stage.owner_batches)
      for (int p : batch) {
        require(p >= 0 && p < static_cast<int>(model.params.size()) && model.params[p].is_matrix(),
                "owner-exchange batch names param ", p, ", not a matrix param");
        ++batched[p];
      }
    for (int p : stage.params)
      require(batched[p] == (model.params[p].is_matrix() ? 1 : 0), "param '", model.params[p].name,
              "' is in ", batched[p], " owner-exchange batches");
  }
  // All-Reduce strategies: every DP rank updates the param itself (no param sync) or its one
  // owner does and the param sync spreads it.
  if (rs) return;
  const bool owned = parts.param_sync != plan::ParamSync::kNone;
  for (int p : stage.params) {
    const int owner = stage.owner[p];
    if (!owned)
      require(owner == plan::kEveryone, plan::to_string(strategy), " param '", model.params[p].name,
              "' owner ", owner);
    else
      require(owner >= 0 && owner < dp, plan::to_string(strategy), " param '", model.params[p].name,
              "' owner ", owner, " not a DP rank");
  }
}

void check_tasks(const model::ModelSpec& model, const plan::StagePlan& stage, int dp, int tp) {
  std::vector<int> tasks_of(model.params.size(), 0);
  for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
    const plan::Task& t = stage.tasks[k];
    require(t.param >= 0 && t.param < static_cast<int>(model.params.size()), "task ", k,
            " names param ", t.param);
    const model::ParamSpec& p = model.params[t.param];
    require(p.is_matrix() && t.piece >= -1 && t.piece < static_cast<int>(p.pieces.size()), "task ",
            k, " ('", p.name, "' piece ", t.piece, ") is not a matrix task");
    require(stage.owner[t.param] != -1, "stage ", stage.stage, ": task ", k, " ('", p.name,
            "') is a param of another stage");
    const ShardMap whole = shard_map(p, t.piece, 1, 0);
    require(t.rows == whole.task_rows && t.cols == whole.task_cols, "task ", k, " of '", p.name,
            "' is ", t.rows, " x ", t.cols, " but the model's is ", whole.task_rows, " x ",
            whole.task_cols);
    require(t.dp_owner == stage.owner[t.param], "task ", k, " of '", p.name, "' has DP owner ",
            t.dp_owner, ", its param ", stage.owner[t.param]);
    require(t.host == plan::kAllTp || (t.host >= 0 && t.host < tp && p.tp_split_dim >= 0), "task ",
            k, " of '", p.name, "' has host ", t.host, " at tp=", tp);
    if (t.host >= 0)
      require(t.dp_owner >= 0 && t.dp_owner < dp && !stage.groups.empty() && t.group >= 0 &&
                  t.group < static_cast<int>(stage.groups[t.dp_owner].size()),
              "hosted task ", k, " of '", p.name, "' is in no micro group");
    ++tasks_of[t.param];
  }
  for (int p : stage.params) {
    const model::ParamSpec& spec = model.params[p];
    const int want = spec.is_matrix() ? std::max<int>(1, static_cast<int>(spec.pieces.size())) : 0;
    require(tasks_of[p] == want, "param '", spec.name, "' has ", tasks_of[p], " tasks, expected ",
            want);
  }
  if (stage.groups.empty()) return;
  require(static_cast<int>(stage.groups.size()) == dp, "micro groups for ", stage.groups.size(),
          " DP ranks, dp=", dp);
  std::vector<int> listed(stage.tasks.size(), 0);
  for (int d = 0; d < dp; ++d)
    for (std::size_t g = 0; g < stage.groups[d].size(); ++g)
      for (int k : stage.groups[d][g].tasks) {
        require(k >= 0 && k < static_cast<int>(stage.tasks.size()), "micro group lists task ", k);
        const plan::Task& t = stage.tasks[k];
        require(t.host >= 0 && t.dp_owner == d && t.group == static_cast<int>(g), "task ", k,
                " is listed in DP rank ", d, "'s group ", g, " but planned for DP ", t.dp_owner,
                " group ", t.group);
        ++listed[k];
      }
  for (std::size_t k = 0; k < stage.tasks.size(); ++k)
    require(listed[k] == (stage.tasks[k].host >= 0 ? 1 : 0), "task ", k, " is listed ", listed[k],
            " times in the micro groups");
}

}  // namespace

void validate_plan(const model::ModelSpec& model, const plan::Plan& plan,
                   const ParallelDims& grid) {
  const plan::PlanOptions& o = plan.options;
  require(o.dims.pp == grid.pp && std::ssize(plan.stages) == grid.pp, "plan for pp ", o.dims.pp,
          " with ", plan.stages.size(), " stages on a pp ", grid.pp, " grid");
  require(o.dims.dp == grid.dp && o.dims.tp == grid.tp, "plan for dp ", o.dims.dp, " x tp ",
          o.dims.tp, " on a dp ", grid.dp, " x tp ", grid.tp, " grid");
  // Together the stages hold every param once; a MoE plan's stages every param but the experts
  // (they are plan.expert's). The one exception is the tied embedding's copy: listed last by the
  // last stage of a PP > 1 plan of a tied model.
  std::size_t dense = model.params.size();
  if (plan.expert)
    for (const model::ParamSpec& p : model.params) dense -= model::is_expert_param(p) ? 1 : 0;
  // A tied model at PP > 1 has the copy (make_plan's rule); nothing else has one.
  const int tied = plan.tied_embedding;
  const int expected = o.dims.pp > 1 ? plan::tied_embedding_param(model) : -1;
  require(tied == expected, "tied embedding copy ", tied, " where the model's plan has ", expected);
  require(tied == -1 ||
              (!plan.stages.back().params.empty() && plan.stages.back().params.back() == tied),
          "tied embedding copy ", tied, " is not the word embedding listed last by the last stage");
  std::vector<int> holders(model.params.size(), 0);
  std::size_t held = 0;
  for (const plan::StagePlan& stage : plan.stages) {
    for (std::size_t k = 0; k < stage.params.size(); ++k) {
      const int p = stage.params[k];
      const bool copy =
          tied >= 0 && p == tied && stage.stage == grid.pp - 1 && k + 1 == stage.params.size();
      require(p >= 0 && p < std::ssize(model.params) &&
                  (copy || holders[static_cast<std::size_t>(p)]++ == 0),
              "stage ", stage.stage, " lists param ", p,
              " that is out of range or in another stage");
    }
    held += stage.params.size() - (tied >= 0 && stage.stage == grid.pp - 1 ? 1 : 0);
  }
  require(held == dense, "the stages hold ", held, " of ", dense,
          plan.expert ? " params that are not experts" : " params");
  for (const plan::StagePlan& stage : plan.stages) {
    check_layout(model, stage, o.dims.tp);
    check_owners(model, stage, o.strategy, o.layerwise_tp, o.dims.dp);
    check_tasks(model, stage, o.dims.dp, o.dims.tp);
  }
}

void check_plan_agreement(comm::Communicator& world, const plan::Plan& plan) {
  const std::vector<std::uint64_t> hashes = world.all_gather_u64(plan::plan_hash(plan));
  for (std::size_t q = 1; q < hashes.size(); ++q) {
    if (hashes[q] == hashes[0]) continue;
    char detail[128];
    std::snprintf(detail, sizeof(detail), "rank %zu has plan hash %016llx, rank 0 has %016llx", q,
                  static_cast<unsigned long long>(hashes[q]),
                  static_cast<unsigned long long>(hashes[0]));
    throw PlanAgreementError(str("ranks disagree on the ", plan::to_string(plan.options.strategy),
                                 " plan: ", detail,
                                 " (every rank must run the same binary, flags and model)"));
  }
}

}  // namespace canzona::launch
