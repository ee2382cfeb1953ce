// The TP exchanges (tp_exchange.h; docs/design.md section 4, TP step).
//
// Redundant TP gather (sc, layerwise-paper, layerwise `duplicated`): one fused All-Gather on the
// TP communicator of the local gradient shards of every TP-split matrix param this DP rank
// computes; every TP rank rebuilds
// each full task gradient and computes the update redundantly, keeping its own rows.
//
// Micro-group pipeline (asc / lb-asc). Per micro group k of this DP rank (plan::RankGroup), in
// the plan's order:
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
#include "tp_exchange.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::engine {
namespace {

class RedundantGather final : public TpExchange {
 public:
  RedundantGather(const RankContext& context, const TpExchangeParts& parts)
      : context_(context), parts_(parts) {
    offset_of_.assign(context.model.params.size(), -1);
    for (const ComputedTask& t : parts.shards.tasks()) {
      if (t.role != plan::TaskRole::kRedundantGather || offset_of_[t.param] >= 0) continue;
      params_.push_back(t.param);
      offset_of_[t.param] = 0;
    }
    std::sort(params_.begin(), params_.end());
    for (int p : params_) {
      offset_of_[p] = block_;
      block_ += parts.buffers.place(p).numel;
    }
    if (block_ == 0) return;
    send_.assign(block_, parts.buffers.widest_bytes());
    recv_.assign(block_ * context.tp, parts.buffers.widest_bytes());
    for (int q = 0; q < context.tp; ++q) {
      counts_.push_back(block_);
      displs_.push_back(q * block_);
    }
  }

  void begin_step() override {
    if (block_ > 0) post(gathered_, /*use_params=*/false);
  }

  void finish_step(double& comm_ms) override {
    if (!gathered_.request.pending()) return;
    parts_.waits.wait(gathered_, comm_ms);
    TraceScope redundant(parts_.waits.trace(), "optimizer", "TP-redundant tasks");
    OptimizerShards& shards = parts_.shards;
    for (ComputedTask& t : shards.tasks()) {
      if (t.role != plan::TaskRole::kRedundantGather) continue;
      to_task(t, shards.scratch());
      shards.step_task(t, shards.scratch());
    }
  }

  void init_main() override {
    if (block_ == 0) return;
    Pending gathered;
    post(gathered, /*use_params=*/true);
    double ignored = 0.0;
    parts_.waits.wait(gathered, ignored);
    for (ComputedTask& t : parts_.shards.tasks())
      if (t.role == plan::TaskRole::kRedundantGather) to_task(t, t.main.data());
  }

 private:
  // Gathers the params (setup) or the reduced gradients, each in its buffer's dtype.
  void post(Pending& pending, bool use_params) {
    dtype_ = use_params ? parts_.buffers.param_dtype() : parts_.buffers.grad_dtype();
    const TypedSpan send = send_.as(dtype_);
    for (int p : params_) {
      const ConstTypedPtr src =
          use_params ? parts_.buffers.param(p).ptr() : parts_.grads.reduced_grad(p);
      copy_cast(src, send.ptr() + offset_of_[p], parts_.buffers.place(p).numel);
    }
    const comm::ScopedOpLabel op_label = parts_.waits.label(pending, "TP all-gather (gradients)");
    pending.request = parts_.tp.all_gather(send, recv_.as(dtype_), counts_, displs_);
  }

  // The full fp32 task matrix from every TP rank's gathered shard.
  void to_task(const ComputedTask& t, float* task) const {
    const ConstTypedSpan recv = recv_.as(dtype_);
    for (int q = 0; q < context_.tp; ++q)
      local_to_task(t.maps[q], recv.ptr() + (q * block_ + offset_of_[t.param]), task);
  }

  const RankContext& context_;
  TpExchangeParts parts_;
  std::vector<int> params_;              // stage order
  std::vector<std::int64_t> offset_of_;  // [model param] offset in a block, -1 when not gathered
  std::int64_t block_ = 0;               // elements per TP rank
  ExchangeBuffer send_;                  // (block)
  ExchangeBuffer recv_;                  // (tp, block)
  DType dtype_ = DType::kF32;            // what the last gather moved
  std::vector<std::int64_t> counts_, displs_;  // [tp rank]
  Pending gathered_;                           // the step's gather (after the buffers it uses)
};

// This rank's shard of one task of a micro group.
struct GroupPart {
  int param = 0;
  ShardMap map;
  std::int64_t offset = 0;  // in the gather send buffer == in the scatter receive buffer
};

// A task of the group this rank hosts.
struct GroupHosted {
  ComputedTask* task = nullptr;       // in OptimizerShards::tasks()
  std::vector<std::int64_t> offsets;  // [tp rank] in the gather receive buffer == scatter send
};

// One micro group: gather = every rank's shards to the hosts; scatter = updated shards back.
// Buffers are declared before the Pendings so collectives in flight are waited before the
// buffers they use are freed.
struct GroupExchange {
  int index = 0;
  std::vector<GroupPart> parts;
  std::vector<GroupHosted> hosted;
  std::vector<std::int64_t> send_counts, send_displs;  // gather; scatter receives with these
  std::vector<std::int64_t> recv_counts, recv_displs;  // gather; scatter sends with these
  ExchangeBuffer send, recv;            // gather buffers: gradients, or params at setup
  ExchangeBuffer back_send, back_recv;  // scatter buffers (sizes of recv and send): params
  DType gathered = DType::kF32;         // what the last gather moved
  Pending gather, scatter;
};

class MicroGroups final : public TpExchange {
 public:
  MicroGroups(const RankContext& context, const TpExchangeParts& parts)
      : context_(context), parts_(parts) {
    const plan::RankPlan& rank_plan = context.rank_plan;
    groups_.resize(rank_plan.groups.size());
    for (std::size_t k = 0; k < groups_.size(); ++k) {
      const plan::RankGroup& plan_group = rank_plan.groups[k];
      GroupExchange& g = groups_[k];
      g.index = plan_group.index;
      g.send_counts = plan_group.send_counts;
      g.send_displs = plan_group.send_displs;
      g.recv_counts = plan_group.recv_counts;
      g.recv_displs = plan_group.recv_displs;
      for (const plan::GroupSend& s : plan_group.sends) {
        const plan::Task& task = context.stage.tasks[s.task];
        GroupPart part{
            task.param,
            shard_map(context.model.params[task.param], task.piece, context.tp, context.tp_rank),
            s.offset};
        CANZONA_CHECK(part.map.numel() == s.numel, "segment size of task ", s.task);
        g.parts.push_back(std::move(part));
      }
      for (const plan::GroupHosted& h : plan_group.hosted)
        g.hosted.push_back({&parts.shards.task(h.task), h.offsets});
      const std::int64_t widest = parts.buffers.widest_bytes();
      const std::int64_t param_bytes = dtype_bytes(parts.buffers.param_dtype());
      g.send.assign(plan_group.send_total(), widest);
      g.back_recv.assign(plan_group.send_total(), param_bytes);
      g.recv.assign(plan_group.recv_total(), widest);
      g.back_send.assign(plan_group.recv_total(), param_bytes);
    }
  }

  void begin_step() override {
    group0_posted_ = context_.options.pipeline && !groups_.empty();
    if (!group0_posted_) return;
    pack(groups_[0], false);
    post_gather(groups_[0]);
  }

  void finish_step(double& comm_ms) override { run_groups(comm_ms); }

  void init_main() override {
    for (GroupExchange& g : groups_) {
      pack(g, /*use_params=*/true);
      post_gather(g);
      g.gather.name = str("group ", g.index, " gather (params, setup)");
    }
    double ignored = 0.0;
    for (GroupExchange& g : groups_) {
      parts_.waits.wait(g.gather, ignored);
      for (const GroupHosted& h : g.hosted) to_task(g, h, h.task->main.data());
    }
  }

 private:
  // Packs the params (setup) or the reduced gradients, each in its buffer's dtype.
  void pack(GroupExchange& g, bool use_params) {
    g.gathered = use_params ? parts_.buffers.param_dtype() : parts_.buffers.grad_dtype();
    const TypedPtr send = g.send.as(g.gathered).ptr();
    for (const GroupPart& part : g.parts)
      local_to_packed(part.map,
                      use_params ? parts_.buffers.param(part.param).ptr()
                                 : parts_.grads.reduced_grad(part.param),
                      send + part.offset);
  }

  void post_gather(GroupExchange& g) {
    const comm::ScopedOpLabel op_label =
        parts_.waits.label(g.gather, str("group ", g.index, " gather (all-to-all)"));
    g.gather.request = parts_.tp.all_to_all(g.send.as(g.gathered), g.send_counts, g.send_displs,
                                            g.recv.as(g.gathered), g.recv_counts, g.recv_displs);
  }

  void to_task(const GroupExchange& g, const GroupHosted& h, float* task) const {
    const ConstTypedPtr recv = g.recv.as(g.gathered).ptr();
    for (int q = 0; q < context_.tp; ++q)
      packed_to_task(h.task->maps[q], recv + h.offsets[q], task);
  }

  // Computes g's hosted tasks; between tasks drives `in_flight` (the next group's gather) so it
  // moves while this rank computes.
  void compute(GroupExchange& g, comm::Request* in_flight) {
    TraceScope span(parts_.waits.trace(), "micro group", str("group ", g.index, " compute"));
    OptimizerShards& shards = parts_.shards;
    for (const GroupHosted& h : g.hosted) {
      ComputedTask& t = *h.task;
      to_task(g, h, shards.scratch());
      if (in_flight != nullptr) in_flight->test();
      shards.step_task(t, shards.scratch());
      if (in_flight != nullptr) in_flight->test();
      const TypedPtr back = g.back_send.as(parts_.buffers.param_dtype()).ptr();
      for (int q = 0; q < context_.tp; ++q)
        task_to_packed(t.maps[q], t.main.data(), back + h.offsets[q]);
    }
  }

  void post_scatter(GroupExchange& g) {
    const comm::ScopedOpLabel op_label =
        parts_.waits.label(g.scatter, str("group ", g.index, " scatter (all-to-all)"));
    const DType dtype = parts_.buffers.param_dtype();
    g.scatter.request = parts_.tp.all_to_all(g.back_send.as(dtype), g.recv_counts, g.recv_displs,
                                             g.back_recv.as(dtype), g.send_counts, g.send_displs);
  }

  void apply(GroupExchange& g) {
    const ConstTypedPtr back = g.back_recv.as(parts_.buffers.param_dtype()).ptr();
    for (const GroupPart& part : g.parts)
      packed_to_local(part.map, back + part.offset, parts_.buffers.param(part.param).ptr());
  }

  void run_groups(double& comm_ms) {
    const bool pipeline = context_.options.pipeline;
    const std::size_t n = groups_.size();
    for (std::size_t k = 0; k < n; ++k) {
      GroupExchange& g = groups_[k];
      if ((k > 0 || !group0_posted_) && (!pipeline || k == 0)) {
        pack(g, false);
        post_gather(g);
      }
      if (pipeline && k + 1 < n) {
        pack(groups_[k + 1], false);
        post_gather(groups_[k + 1]);
      }
      parts_.waits.wait(g.gather, comm_ms);
      const bool next_in_flight = pipeline && k + 1 < n;
      compute(g, next_in_flight ? &groups_[k + 1].gather.request : nullptr);
      post_scatter(g);
      if (!pipeline) {
        parts_.waits.wait(g.scatter, comm_ms);
        apply(g);
      }
    }
    if (!pipeline) return;
    for (GroupExchange& g : groups_) {
      parts_.waits.wait(g.scatter, comm_ms);
      apply(g);
    }
  }

  const RankContext& context_;
  TpExchangeParts parts_;
  std::vector<GroupExchange> groups_;
  bool group0_posted_ = false;  // begin_step() posted group 0's gather
};

}  // namespace

std::unique_ptr<TpExchange> make_tp_exchange(const RankContext& context,
                                             const TpExchangeParts& parts) {
  if (context.rank_plan.parts.tp_exchange == plan::TpExchange::kMicroGroups)
    return std::make_unique<MicroGroups>(context, parts);
  return std::make_unique<RedundantGather>(context, parts);
}

}  // namespace canzona::engine
