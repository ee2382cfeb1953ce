// The owner exchange (owner_exchange.h). Per batch k of this rank's plan::OwnerBatch list:
//   gather   pack the pieces of the batch's reduced gradients inside this rank's DP shards, by
//            owner; one All-to-All over DP; the owner unpacks every piece of each param it owns
//            into the param's TP-local elements (`local`);
//   TP       with TP > 1, the owner's TP ranks All-Gather the TP-local elements of the owned
//            TP-split params (each rank then holds the full matrix gradient);
//   compute  the owner steps each task on its fp32 main param and writes its own TP rows of the
//            updated main param back into `local`;
//   scatter  `local` repacked in the gather's receive layout goes back by the All-to-All with
//            send and receive swapped; every rank writes the pieces into its shards of the param
//            buffer.
// Sending updated params, not updates, keeps every shard bit-identical to the owner's main param.
// Batch k+1's gather is posted before batch k is computed and tested between tasks; scatters are
// retired as they complete. A batch's buffers live only while it runs, so the exchange keeps no
// memory between steps.
#include "owner_exchange.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::engine {
namespace {

class NoOwnerExchange final : public OwnerExchange {
 public:
  void begin_step() override {}
  void finish_step(double&) override {}
  void init_main() override {}
};

// A param this rank owns in one batch.
struct OwnedParam {
  int param = 0;
  std::int64_t local = 0;   // offset of its TP-local elements in Batch::local
  std::int64_t block = -1;  // offset in the TP block, -1 when not TP-gathered
  std::vector<ComputedTask*> tasks;
};

// Buffers before the Pendings, so collectives in flight are waited before their buffers go.
struct Batch {
  const plan::OwnerBatch* plan = nullptr;
  std::vector<OwnedParam> owned;
  std::vector<int> receive_owned;  // [receive piece] index into owned
  std::int64_t local_numel = 0;    // TP-local elements of the owned params
  std::int64_t block = 0;          // elements of the TP block (TP-split owned params)
  TypedVector send, recv;          // gather; the scatter sends recv and receives into back
  TypedVector local;    // owned params' TP-local elements: gradients, then updated params
  TypedVector updated;  // the updated params instead, when their dtype is not the gradients'
  TypedVector tp_send, tp_recv;
  TypedVector back;
  bool applied = true;
  Pending gather, tp_gather, scatter;
};

void release(TypedVector& v) {
  v.release();
}

class OwnerAllToAll final : public OwnerExchange {
 public:
  OwnerAllToAll(const RankContext& context, const OwnerExchangeParts& parts)
      : context_(context), parts_(parts), batches_(context.rank_plan.owner_batches.size()) {
    std::vector<std::vector<ComputedTask*>> tasks_of(context.model.params.size());
    for (ComputedTask& t : parts.shards.tasks()) {
      CANZONA_CHECK(t.role == plan::TaskRole::kOwnerGathered, "task ", t.task,
                    " of an owner-exchange plan is not owner-gathered");
      tasks_of[t.param].push_back(&t);
    }
    std::size_t covered = 0;
    for (std::size_t k = 0; k < batches_.size(); ++k) {
      Batch& b = batches_[k];
      b.plan = &context.rank_plan.owner_batches[k];
      for (int p : b.plan->owned) {
        OwnedParam o;
        o.param = p;
        o.local = b.local_numel;
        b.local_numel += parts.buffers.place(p).numel;
        if (context.tp > 1 && context.model.params[p].tp_split_dim >= 0) {
          o.block = b.block;
          b.block += parts.buffers.place(p).numel;
        }
        o.tasks = tasks_of[p];
        CANZONA_CHECK(!o.tasks.empty(), "owned param ", context.model.params[p].name,
                      " has no task on this rank");
        covered += o.tasks.size();
        b.owned.push_back(std::move(o));
      }
      for (const plan::OwnerPiece& piece : b.plan->receives) {
        const auto it = std::find_if(b.owned.begin(), b.owned.end(),
                                     [&](const OwnedParam& o) { return o.param == piece.param; });
        CANZONA_CHECK(it != b.owned.end(), "received a piece of a param this rank does not own");
        b.receive_owned.push_back(static_cast<int>(it - b.owned.begin()));
      }
    }
    CANZONA_CHECK(covered == parts.shards.tasks().size(),
                  "every owned task must be in one batch of the owner exchange");
    for (int q = 0; q < context.tp; ++q) tp_ranks_.push_back(q);
  }

  void begin_step() override {
    first_posted_ = !batches_.empty();
    if (first_posted_) post_gather(batches_[0], /*use_params=*/false);
  }

  void finish_step(double& comm_ms) override {
    const std::size_t n = batches_.size();
    for (std::size_t k = 0; k < n; ++k) {
      Batch& b = batches_[k];
      if (k == 0 && !first_posted_) post_gather(b, false);
      if (k + 1 < n) post_gather(batches_[k + 1], false);
      receive(b, comm_ms);
      compute(b, k + 1 < n ? &batches_[k + 1].gather.request : nullptr);
      post_scatter(b);
      retire_completed(k);
    }
    for (Batch& b : batches_) {
      parts_.waits.wait(b.scatter, comm_ms);
      apply(b);
    }
    first_posted_ = false;
  }

  void init_main() override {
    for (Batch& b : batches_) {
      post_gather(b, /*use_params=*/true);
      b.gather.name = str("owner batch ", b.plan->index, " gather (params, setup)");
      double ignored = 0.0;
      receive(b, ignored);
      for (OwnedParam& o : b.owned)
        for (ComputedTask* t : o.tasks) to_task(b, o, *t, t->main.data());
      release(b.recv);
      release(b.local);
      release(b.tp_recv);
    }
  }

 private:
  void post_gather(Batch& b, bool use_params) {
    const plan::OwnerBatch& plan = *b.plan;
    const DType dtype = use_params ? parts_.buffers.param_dtype() : parts_.buffers.grad_dtype();
    b.send.assign(plan.send_total(), dtype);
    for (const plan::OwnerPiece& piece : plan.sends) {
      const ConstTypedPtr src = use_params ? parts_.buffers.param(piece.param).ptr() + piece.begin
                                           : parts_.grads.reduced_grad(piece.param, piece.begin);
      copy_cast(src, b.send.ptr() + piece.offset, piece.numel);
    }
    b.recv.assign(plan.recv_total(), dtype);
    const comm::ScopedOpLabel op_label =
        parts_.waits.label(b.gather, str("owner batch ", plan.index, " gather (all-to-all)"));
    b.gather.request = parts_.dp.all_to_all(b.send.span(), plan.send_counts, plan.send_displs,
                                            b.recv.span(), plan.recv_counts, plan.recv_displs);
  }

  // Waits for b's gather, unpacks the owned params' elements and, under TP, gathers their TP
  // shards.
  void receive(Batch& b, double& comm_ms) {
    parts_.waits.wait(b.gather, comm_ms);
    release(b.send);
    const DType dtype = b.recv.dtype();
    b.local.assign(b.local_numel, dtype);
    const plan::OwnerBatch& plan = *b.plan;
    for (std::size_t i = 0; i < plan.receives.size(); ++i) {
      const plan::OwnerPiece& piece = plan.receives[i];
      const OwnedParam& o = b.owned[static_cast<std::size_t>(b.receive_owned[i])];
      copy_cast(b.recv.ptr() + piece.offset, b.local.ptr() + (o.local + piece.begin), piece.numel);
    }
    if (b.block == 0) return;
    b.tp_send.assign(b.block, dtype);
    for (const OwnedParam& o : b.owned) {
      if (o.block < 0) continue;
      const std::int64_t numel = parts_.buffers.place(o.param).numel;
      copy_cast(b.local.ptr() + o.local, b.tp_send.ptr() + o.block, numel);
    }
    b.tp_recv.assign(b.block * context_.tp, dtype);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(context_.tp), b.block), displs;
    for (int q : tp_ranks_) displs.push_back(q * b.block);
    const comm::ScopedOpLabel op_label =
        parts_.waits.label(b.tp_gather, str("owner batch ", plan.index, " TP all-gather"));
    b.tp_gather.request = parts_.tp.all_gather(b.tp_send.span(), b.tp_recv.span(), counts, displs);
    parts_.waits.wait(b.tp_gather, comm_ms);
    release(b.tp_send);
  }

  // The full task matrix of t (a task of owned param o) from b's received elements.
  void to_task(const Batch& b, const OwnedParam& o, const ComputedTask& t, float* task) const {
    if (o.block < 0) {
      local_to_task(t.maps[0], b.local.ptr() + o.local, task);
      return;
    }
    for (int q : tp_ranks_)
      local_to_task(t.maps[static_cast<std::size_t>(q)], b.tp_recv.ptr() + (q * b.block + o.block),
                    task);
  }

  void compute(Batch& b, comm::Request* in_flight) {
    TraceScope span(parts_.waits.trace(), "optimizer", str("owner batch ", b.plan->index));
    OptimizerShards& shards = parts_.shards;
    // The updated params go where the gradients were, unless their dtypes differ.
    const DType param_dtype = parts_.buffers.param_dtype();
    if (b.local.dtype() != param_dtype) b.updated.assign(b.local_numel, param_dtype);
    TypedVector& out = b.local.dtype() == param_dtype ? b.local : b.updated;
    for (OwnedParam& o : b.owned)
      for (ComputedTask* t : o.tasks) {
        to_task(b, o, *t, shards.scratch());
        if (in_flight != nullptr) in_flight->test();
        shards.step_task(*t, shards.scratch());
        if (in_flight != nullptr) in_flight->test();
        const ShardMap& own =
            o.block < 0 ? t->maps[0] : t->maps[static_cast<std::size_t>(context_.tp_rank)];
        task_to_local(own, t->main.data(), out.ptr() + o.local);
      }
    if (&out != &b.local) std::swap(b.local, b.updated);
    release(b.updated);
    release(b.tp_recv);
  }

  void post_scatter(Batch& b) {
    const plan::OwnerBatch& plan = *b.plan;
    const DType dtype = parts_.buffers.param_dtype();
    if (b.recv.dtype() != dtype) b.recv.assign(plan.recv_total(), dtype);
    for (std::size_t i = 0; i < plan.receives.size(); ++i) {
      const plan::OwnerPiece& piece = plan.receives[i];
      const OwnedParam& o = b.owned[static_cast<std::size_t>(b.receive_owned[i])];
      copy_cast(b.local.ptr() + (o.local + piece.begin), b.recv.ptr() + piece.offset, piece.numel);
    }
    release(b.local);
    b.back.assign(plan.send_total(), dtype);
    const comm::ScopedOpLabel op_label =
        parts_.waits.label(b.scatter, str("owner batch ", plan.index, " scatter (all-to-all)"));
    b.scatter.request = parts_.dp.all_to_all(b.recv.span(), plan.recv_counts, plan.recv_displs,
                                             b.back.span(), plan.send_counts, plan.send_displs);
    b.applied = false;
  }

  // Applies the scatters of batches before `k` that have completed, freeing their buffers.
  void retire_completed(std::size_t k) {
    for (std::size_t j = 0; j < k; ++j) {
      Batch& b = batches_[j];
      if (b.applied || !b.scatter.request.test()) continue;
      double ignored = 0.0;
      parts_.waits.wait(b.scatter, ignored);
      apply(b);
    }
  }

  // Writes b's returned pieces into this rank's shards of the param buffer.
  void apply(Batch& b) {
    if (b.applied) return;
    for (const plan::OwnerPiece& piece : b.plan->sends)
      copy_cast(b.back.ptr() + piece.offset, parts_.buffers.param(piece.param).ptr() + piece.begin,
                piece.numel);
    release(b.recv);
    release(b.back);
    b.applied = true;
  }

  const RankContext& context_;
  OwnerExchangeParts parts_;
  std::vector<Batch> batches_;
  std::vector<int> tp_ranks_;  // 0..tp-1
  bool first_posted_ = false;  // begin_step() posted batch 0's gather
};

}  // namespace

std::unique_ptr<OwnerExchange> make_owner_exchange(const RankContext& context,
                                                   const OwnerExchangeParts& parts) {
  if (context.rank_plan.parts.dp_exchange == plan::DpExchange::kOwnerAllToAll)
    return std::make_unique<OwnerAllToAll>(context, parts);
  return std::make_unique<NoOwnerExchange>();
}

}  // namespace canzona::engine
