// TP exchanges of the optimizer step (design.md section 4, TP step).
//
// sc / layerwise: one fused All-Gather on the TP communicator of the local gradient shards of
// every TP-split matrix param this DP rank computes; every TP rank rebuilds each full task
// gradient and computes the update redundantly, keeping its own rows.
//
// asc / lb-asc, the micro-group pipeline. Per micro group k of this DP rank (StagePlan::groups),
// in the plan's order:
//   gather   every TP rank packs its rows of each task, grouped by the task's host (tasks in group
//            order), and one All-to-All delivers them; the host rebuilds the task gradient
//            (packed_to_task from every TP rank's part: the concatenation along the split dim,
//            restricted to the piece's rows);
//   compute  the host steps the task's optimizer on its full fp32 main param;
//   scatter  the host packs every TP rank's rows of the *updated main param* and a second
//            All-to-All returns them; every rank overwrites its shard rows in `params`.
// Sending updated params rather than updates keeps every rank's shard bit-identical to the host's
// main param. Pipelining: group k+1's gather is posted before group k is computed, so its
// transfer hides behind compute; scatters are waited after the last group. With
// options.pipeline == false each group is gathered, computed and scattered to completion before
// the next one starts (the baseline the pipeline is measured against).
#include <algorithm>

#include "canzona/common/error.h"
#include "runner_impl.h"

namespace canzona::runtime {

void StrategyRunner::Impl::build_tp_gather() {
  TpGatherSet& s = tp_gather;
  s.offset_of.assign(model.params.size(), -1);
  for (const ComputedTask& t : computed) {
    if (t.source != TaskSource::kTpGather || s.offset_of[t.param] >= 0) continue;
    s.params.push_back(t.param);
    s.offset_of[t.param] = 0;
  }
  std::sort(s.params.begin(), s.params.end());
  s.block = 0;
  for (int p : s.params) {
    s.offset_of[p] = s.block;
    s.block += place[p].numel;
  }
  if (s.block == 0) return;
  s.send.assign(static_cast<std::size_t>(s.block), 0.0f);
  s.recv.assign(static_cast<std::size_t>(s.block * tp), 0.0f);
  for (int q = 0; q < tp; ++q) {
    s.counts.push_back(s.block);
    s.displs.push_back(q * s.block);
  }
}

Pending StrategyRunner::Impl::post_tp_gather(bool use_params) {
  TpGatherSet& s = tp_gather;
  for (int p : s.params) {
    const float* src = use_params ? local_param(p) : reduced_grad(p);
    std::copy(src, src + place[p].numel, s.send.begin() + s.offset_of[p]);
  }
  Pending pending;
  pending.name = "TP all-gather (gradients)";
  pending.posted_us = trace.now_us();
  pending.request = grid.tp().all_gather(s.send, s.recv, s.counts, s.displs);
  return pending;
}

void StrategyRunner::Impl::gathered_to_task(const ComputedTask& t, float* task) const {
  for (int q = 0; q < tp; ++q)
    local_to_task(t.maps[q],
                  tp_gather.recv.data() + q * tp_gather.block + tp_gather.offset_of[t.param], task);
}

void StrategyRunner::Impl::build_groups() {
  if (stage.groups.empty()) return;
  const std::vector<plan::MicroGroup>& mine = stage.groups[dp_rank];
  groups.resize(mine.size());
  for (std::size_t k = 0; k < mine.size(); ++k) {
    GroupExchange& g = groups[k];
    g.index = static_cast<int>(k);
    g.send_counts.assign(tp, 0);
    g.send_displs.assign(tp, 0);
    g.recv_counts.assign(tp, 0);
    g.recv_displs.assign(tp, 0);
    std::int64_t send_total = 0;
    for (int h = 0; h < tp; ++h) {
      g.send_displs[h] = send_total;
      for (int id : mine[k].tasks) {
        const plan::Task& task = stage.tasks[id];
        if (task.host != h) continue;
        GroupPart part;
        part.param = task.param;
        part.map = shard_map(model.params[task.param], task.piece, tp, tp_rank);
        part.offset = send_total;
        send_total += part.map.numel();
        g.parts.push_back(std::move(part));
      }
      g.send_counts[h] = send_total - g.send_displs[h];
    }
    for (int id : mine[k].tasks)
      if (stage.tasks[id].host == tp_rank) {
        CANZONA_CHECK(computed_of_task[id] >= 0, "hosted task ", id, " not computed");
        g.hosted.push_back({computed_of_task[id], std::vector<std::int64_t>(tp, 0)});
      }
    std::int64_t recv_total = 0;
    for (int q = 0; q < tp; ++q) {
      g.recv_displs[q] = recv_total;
      for (GroupHosted& h : g.hosted) {
        h.offsets[q] = recv_total;
        recv_total += computed[h.computed].maps[q].numel();
      }
      g.recv_counts[q] = recv_total - g.recv_displs[q];
    }
    g.send.assign(static_cast<std::size_t>(send_total), 0.0f);
    g.back_recv.assign(g.send.size(), 0.0f);
    g.recv.assign(static_cast<std::size_t>(recv_total), 0.0f);
    g.back_send.assign(g.recv.size(), 0.0f);
  }
}

void StrategyRunner::Impl::pack_group(GroupExchange& g, bool use_params) {
  for (const GroupPart& part : g.parts)
    local_to_packed(part.map, use_params ? local_param(part.param) : reduced_grad(part.param),
                    g.send.data() + part.offset);
}

void StrategyRunner::Impl::post_gather(GroupExchange& g) {
  g.gather.name = str("group ", g.index, " gather (all-to-all)");
  g.gather.posted_us = trace.now_us();
  g.gather.request = grid.tp().all_to_all(g.send, g.send_counts, g.send_displs, g.recv,
                                          g.recv_counts, g.recv_displs);
}

void StrategyRunner::Impl::hosted_to_task(const GroupExchange& g, const GroupHosted& h,
                                          float* task) const {
  const ComputedTask& t = computed[h.computed];
  for (int q = 0; q < tp; ++q) packed_to_task(t.maps[q], g.recv.data() + h.offsets[q], task);
}

void StrategyRunner::Impl::compute_group(GroupExchange& g, comm::Request* in_flight) {
  TraceScope span(trace, "micro group", str("group ", g.index, " compute"));
  for (const GroupHosted& h : g.hosted) {
    ComputedTask& t = computed[h.computed];
    hosted_to_task(g, h, scratch.data());
    if (in_flight != nullptr) in_flight->test();
    step_task(t, scratch.data());
    if (in_flight != nullptr) in_flight->test();
    for (int q = 0; q < tp; ++q)
      task_to_packed(t.maps[q], t.main.data(), g.back_send.data() + h.offsets[q]);
  }
}

void StrategyRunner::Impl::post_scatter(GroupExchange& g) {
  g.scatter.name = str("group ", g.index, " scatter (all-to-all)");
  g.scatter.posted_us = trace.now_us();
  g.scatter.request = grid.tp().all_to_all(g.back_send, g.recv_counts, g.recv_displs, g.back_recv,
                                           g.send_counts, g.send_displs);
}

void StrategyRunner::Impl::apply_group(GroupExchange& g) {
  for (const GroupPart& part : g.parts)
    packed_to_local(part.map, g.back_recv.data() + part.offset, local_param(part.param));
}

void StrategyRunner::Impl::run_groups(bool group0_posted, double& comm_ms) {
  const std::size_t n = groups.size();
  for (std::size_t k = 0; k < n; ++k) {
    GroupExchange& g = groups[k];
    if (k > 0 || !group0_posted) {
      if (!options.pipeline || k == 0) {
        pack_group(g, false);
        post_gather(g);
      }
    }
    if (options.pipeline && k + 1 < n) {
      pack_group(groups[k + 1], false);
      post_gather(groups[k + 1]);
    }
    wait(g.gather, comm_ms);
    const bool next_in_flight = options.pipeline && k + 1 < n;
    compute_group(g, next_in_flight ? &groups[k + 1].gather.request : nullptr);
    post_scatter(g);
    if (!options.pipeline) {
      wait(g.scatter, comm_ms);
      apply_group(g);
    }
  }
  if (!options.pipeline) return;
  for (GroupExchange& g : groups) {
    wait(g.scatter, comm_ms);
    apply_group(g);
  }
}

void StrategyRunner::Impl::step_task(ComputedTask& t, const float* full_grad) {
  const optim::ParamInfo& info = t.optimizer->param();
  t.optimizer->step(optim::matrix_view(t.main.data(), info.rows, info.cols),
                    optim::matrix_view(full_grad, info.rows, info.cols));
  if (t.source == TaskSource::kHosted) return;
  const ShardMap& own = t.source == TaskSource::kLocal ? t.maps[0] : t.maps[tp_rank];
  task_to_local(own, t.main.data(), local_param(t.param));
}

}  // namespace canzona::runtime
