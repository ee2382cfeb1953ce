// state_movement (replan.h) and the per-param view of where a plan holds state (holdings.h).
#include <algorithm>

#include "algorithms/holdings.h"
#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"
#include "canzona/plan/replan.h"

namespace canzona::plan {
namespace detail {

Holdings::Holdings(const model::ModelSpec& model, const Plan& plan, const char* what)
    : plan_(&plan) {
  const std::size_t n = model.params.size();
  stage_.assign(n, -1);
  bucket_.assign(n, -1);
  slot_.assign(n, -1);
  task_of_.assign(n, {});
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& stage = plan.stages[s];
    CANZONA_REQUIRE(stage.owner.size() == n, what, ": plan has ", stage.owner.size(),
                    " owners per stage for a model of ", n, " params");
    for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
      const auto& slots = stage.layout.buckets[b].slots;
      for (std::size_t k = 0; k < slots.size(); ++k) {
        const int p = slots[k].param;
        CANZONA_REQUIRE(p >= 0 && static_cast<std::size_t>(p) < n, what, ": plan lays out param ",
                        p, " of a ", n, "-param model");
        // The last stage's copy of a tied embedding moves with the first stage's original.
        if (s > 0 && p == plan.tied_embedding) continue;
        stage_[p] = static_cast<int>(s);
        bucket_[p] = static_cast<int>(b);
        slot_[p] = static_cast<int>(k);
      }
    }
    for (std::size_t k = 0; k < stage.tasks.size(); ++k) {
      const Task& t = stage.tasks[k];
      CANZONA_REQUIRE(t.param >= 0 && static_cast<std::size_t>(t.param) < n && t.piece >= -1, what,
                      ": plan has a task of param ", t.param, " piece ", t.piece);
      if (s > 0 && t.param == plan.tied_embedding) continue;
      auto& of = task_of_[t.param];
      if (of.size() < static_cast<std::size_t>(t.piece + 2)) of.resize(t.piece + 2, -1);
      of[t.piece + 1] = static_cast<int>(k);
    }
  }
}

int Holdings::owner(int p) const {
  return stage_[p] < 0 ? -1 : plan_->stages[stage_[p]].owner[p];
}

std::int64_t Holdings::local_numel(int p) const {
  if (stage_[p] < 0) return 0;
  return plan_->stages[stage_[p]].layout.buckets[bucket_[p]].slots[slot_[p]].numel;
}

std::pair<std::int64_t, std::int64_t> Holdings::part(int p, int d) const {
  if (stage_[p] < 0 || d < 0 || d >= dp()) return {0, 0};
  const StagePlan& stage = plan_->stages[stage_[p]];
  const layout::Slot& slot = stage.layout.buckets[bucket_[p]].slots[slot_[p]];
  return slot_part(stage, bucket_[p], slot, d);
}

std::vector<std::int64_t> Holdings::interior_cuts(int p) const {
  std::vector<std::int64_t> out;
  if (stage_[p] < 0) return out;
  const StagePlan& stage = plan_->stages[stage_[p]];
  if (stage.cuts.empty()) return out;
  const layout::Slot& slot = stage.layout.buckets[bucket_[p]].slots[slot_[p]];
  for (std::int64_t c : stage.cuts[bucket_[p]])
    if (c > slot.offset && c < slot.end()) out.push_back(c - slot.offset);
  return out;
}

const Task* Holdings::task(int p, int piece) const {
  if (stage_[p] < 0 || piece + 1 >= static_cast<int>(task_of_[p].size())) return nullptr;
  const int k = task_of_[p][piece + 1];
  return k < 0 ? nullptr : &plan_->stages[stage_[p]].tasks[k];
}

std::int64_t Holdings::held(const model::ParamSpec& spec, int p, int d, int t, int tp,
                            std::int64_t numel, std::int64_t a, std::int64_t b) const {
  if (t >= this->tp() || t >= tp || a >= b) return 0;
  const auto [first, last] = part(p, d);
  if (first >= last) return 0;
  std::int64_t old_base = 0, new_base = 0;
  if (spec.tp_split_dim == 0) {
    old_base = t * local_numel(p);
    new_base = t * numel;
  } else if (spec.tp_split_dim > 0 && tp != this->tp()) {
    return 0;  // column shards of different widths: not compared (replan.h)
  }
  const std::int64_t lo = std::max(old_base + first, new_base + a);
  const std::int64_t hi = std::min(old_base + last, new_base + b);
  return std::max<std::int64_t>(0, hi - lo);
}

}  // namespace detail

Movement state_movement(const model::ModelSpec& model, const Plan& from, const Plan& to) {
  const detail::Holdings old_h(model, from, "state_movement (from)");
  const detail::Holdings new_h(model, to, "state_movement (to)");
  const PlanOptions& o = to.options;
  const double per_element = cost::state_bytes(cost::kElementwiseOptimizer, 1, 1, o.cost);
  Movement m;
  for (std::size_t s = 0; s < to.stages.size(); ++s) {
    const StagePlan& stage = to.stages[s];
    // The last stage's copy of a tied embedding is a replica of the first stage's state (read
    // from the same checkpoint tensors): counted with the original only.
    const int copy = s > 0 ? to.tied_embedding : -1;
    for (const Task& t : stage.tasks) {
      if (t.param == copy) continue;
      const RankRange dps = task_dp_ranks(t, o.dims.dp);
      const RankRange tps = task_tp_ranks(t, o.dims.tp);
      const double holders = static_cast<double>(dps.size()) * tps.size();
      m.total_state_bytes += t.state_bytes * holders;
      double kept = 0.0;
      const Task* old = old_h.task(t.param, t.piece);
      if (old != nullptr && old_h.stage_of(t.param) == static_cast<int>(s)) {
        const RankRange old_dps = task_dp_ranks(*old, from.options.dims.dp);
        const RankRange old_tps = task_tp_ranks(*old, from.options.dims.tp);
        const int dp_both =
            std::max(0, std::min(dps.end, old_dps.end) - std::max(dps.begin, old_dps.begin));
        const int tp_both =
            std::max(0, std::min(tps.end, old_tps.end) - std::max(tps.begin, old_tps.begin));
        kept = static_cast<double>(dp_both) * tp_both;
      }
      const double moved = t.state_bytes * (holders - kept);
      m.moved_matrix_bytes += moved;
      if (kept == holders)
        ++m.kept_tasks;
      else
        ++m.moved_tasks;
    }
    for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
      for (const layout::Slot& slot : stage.layout.buckets[b].slots) {
        const model::ParamSpec& spec = model.params[slot.param];
        if (spec.is_matrix() || slot.param == copy) continue;
        const bool same_stage = old_h.stage_of(slot.param) == static_cast<int>(s);
        const RankRange dps = slot_dp_ranks(stage, static_cast<int>(b), slot, o.dims.dp);
        for (int d = dps.begin; d < dps.end; ++d) {
          const auto [a, e] = slot_part(stage, static_cast<int>(b), slot, d);
          if (a >= e) continue;
          for (int t = 0; t < o.dims.tp; ++t) {
            const std::int64_t held =
                same_stage ? old_h.held(spec, slot.param, d, t, o.dims.tp, slot.numel, a, e) : 0;
            m.total_state_bytes += static_cast<double>(e - a) * per_element;
            m.moved_elementwise_bytes += static_cast<double>(e - a - held) * per_element;
          }
        }
      }
    }
  }
  m.moved_state_bytes = m.moved_matrix_bytes + m.moved_elementwise_bytes;
  if (to.expert) {
    // The expert buffer: one plan serves every EP rank, each holding its own experts of the same
    // shapes, so each moves alike. Against a plan without it, or with other expert groups (whose
    // EP ranks hold other experts), all of it is received.
    const ExpertPlan& e = *to.expert;
    const bool same = from.expert && from.expert->ep == e.ep && from.expert->etp == e.etp &&
                      from.expert->model.params.size() == e.model.params.size();
    Movement x = state_movement(e.model, same ? from.expert->plan : e.plan, e.plan);
    if (!same) {
      x.moved_matrix_bytes = 0.0;
      x.moved_elementwise_bytes = 0.0;
      x.moved_tasks += x.kept_tasks;
      x.kept_tasks = 0;
      for (const StagePlan& stage : e.plan.stages)
        for (const Task& t : stage.tasks)
          x.moved_matrix_bytes += t.state_bytes * task_dp_ranks(t, e.plan.options.dims.dp).size() *
                                  task_tp_ranks(t, e.plan.options.dims.tp).size();
      x.moved_elementwise_bytes = x.total_state_bytes - x.moved_matrix_bytes;
    }
    m.total_state_bytes += e.ep * x.total_state_bytes;
    m.moved_matrix_bytes += e.ep * x.moved_matrix_bytes;
    m.moved_elementwise_bytes += e.ep * x.moved_elementwise_bytes;
    m.kept_tasks += e.ep * x.kept_tasks;
    m.moved_tasks += e.ep * x.moved_tasks;
    m.moved_state_bytes = m.moved_matrix_bytes + m.moved_elementwise_bytes;
  }
  return m;
}

}  // namespace canzona::plan
