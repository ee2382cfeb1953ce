// StrategyRunner: the step loop and the DP collectives (runner.h). Setup lives in
// runner_setup.cpp, the TP exchanges in tp_exchange.cpp.
#include "canzona/runtime/runner.h"

#include <functional>

#include "canzona/common/error.h"
#include "canzona/runtime/synthetic.h"
#include "runner_impl.h"

namespace canzona::runtime {

StrategyRunner::Impl::Impl(comm::Grid& grid_, const model::ModelSpec& model_,
                           const plan::Plan& plan_, const RunOptions& options_, Trace& trace_)
    : grid(grid_),
      model(model_),
      plan(plan_),
      stage(plan_.stages.at(0)),
      options(options_),
      trace(trace_),
      strategy(plan_.options.strategy),
      dp_rank(grid_.coord().dp),
      tp_rank(grid_.coord().tp),
      dp(grid_.shape().dp),
      tp(grid_.shape().tp),
      reduce_scatter(strategy == plan::Strategy::kAsc || strategy == plan::Strategy::kLbAsc) {}

void StrategyRunner::Impl::wait(Pending& pending, double& exposed_ms) {
  if (!pending.request.pending()) return;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  pending.request.wait();
  exposed_ms += wall_ms() - wall0;
  clock.wait_cpu_ms += thread_cpu_ms() - cpu0;
  trace.span(kCollectiveTrack, "collective", pending.name, pending.posted_us, trace.now_us());
}

void StrategyRunner::Impl::forward(int step_number, StepTimes& times) {
  TraceScope span(trace, "phase", str("forward ", step_number));
  const auto& buckets = stage.layout.buckets;
  for (std::size_t i = buckets.size(); i-- > 0;) {
    wait(param_sync[i], times.param_sync);
    const double t0 = wall_ms();
    workload.run(forward_flops[i]);
    times.forward += wall_ms() - t0;
  }
}

void StrategyRunner::Impl::drive_grad_sync() {
  for (Pending& pending : grad_sync)
    if (pending.request.pending()) pending.request.test();
}

void StrategyRunner::Impl::backward(int step_number, StepTimes& times) {
  TraceScope span(trace, "phase", str("backward ", step_number));
  const auto& buckets = stage.layout.buckets;
  const float scale = grad_scale(dp);
  const std::function<void()> drive = [this] { drive_grad_sync(); };
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const double t0 = wall_ms();
    for (const layout::Slot& slot : buckets[b].slots)
      fill_grad(model.params[slot.param], slot.param, tp, tp_rank, options.seed, step_number,
                dp_rank,
                std::span<float>(grads.data() + place[slot.param].offset,
                                 static_cast<std::size_t>(slot.numel)));
    workload.run(backward_flops[b], drive);
    const std::span<float> bucket(grads.data() + buckets[b].offset,
                                  static_cast<std::size_t>(buckets[b].numel));
    if (dp > 1)
      for (float& g : bucket) g *= scale;
    Pending& pending = grad_sync[b];
    pending.posted_us = trace.now_us();
    if (reduce_scatter) {
      pending.name = str("bucket ", b, " reduce-scatter");
      pending.request =
          grid.dp().reduce_scatter(bucket,
                                   std::span<float>(shard.data() + shard_offset[b],
                                                    static_cast<std::size_t>(counts[b][dp_rank])),
                                   counts[b]);
    } else {
      pending.name = str("bucket ", b, " all-reduce");
      pending.request = grid.dp().all_reduce(bucket, bucket);
    }
    drive_grad_sync();
    times.backward += wall_ms() - t0;
  }
}

void StrategyRunner::Impl::optimizer_step(StepTimes& times) {
  TraceScope span(trace, "phase", "optimizer");
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = clock.wait_cpu_ms;
  double comm_ms = 0.0;
  // Post the first TP exchange before the purely local work so it travels meanwhile.
  Pending gathered;
  if (tp_gather.block > 0) gathered = post_tp_gather(/*use_params=*/false);
  const bool group0_posted = options.pipeline && !groups.empty();
  if (group0_posted) {
    pack_group(groups[0], false);
    post_gather(groups[0]);
  }
  {
    TraceScope local(trace, "optimizer", "element-wise + local tasks");
    for (ElementwiseSlice& s : elementwise)
      s.optimizer->step(optim::matrix_view(s.param, 1, s.numel),
                        optim::matrix_view(s.grad, 1, s.numel));
    for (ComputedTask& t : computed) {
      if (t.source != TaskSource::kLocal) continue;
      local_to_task(t.maps[0], reduced_grad(t.param), scratch.data());
      step_task(t, scratch.data());
    }
  }
  if (gathered.request.pending()) {
    wait(gathered, comm_ms);
    TraceScope redundant(trace, "optimizer", "TP-redundant tasks");
    for (ComputedTask& t : computed) {
      if (t.source != TaskSource::kTpGather) continue;
      gathered_to_task(t, scratch.data());
      step_task(t, scratch.data());
    }
  }
  run_groups(group0_posted, comm_ms);
  times.opt = wall_ms() - wall0;
  times.opt_comm = comm_ms;
  times.opt_compute = times.opt - comm_ms;
  times.opt_cpu = (thread_cpu_ms() - cpu0) - (clock.wait_cpu_ms - wait_cpu0);
}

void StrategyRunner::Impl::sync_params(StepTimes& times) {
  const auto& buckets = stage.layout.buckets;
  if (reduce_scatter) {
    // Forward order: the bucket the next forward needs first is posted first.
    for (std::size_t i = buckets.size(); i-- > 0;) {
      Pending& pending = param_sync[i];
      pending.name = str("bucket ", i, " all-gather");
      pending.posted_us = trace.now_us();
      float* base = params.data() + buckets[i].offset;
      pending.request = grid.dp().all_gather(
          std::span<const float>(base + displs[i][dp_rank],
                                 static_cast<std::size_t>(counts[i][dp_rank])),
          std::span<float>(base, static_cast<std::size_t>(buckets[i].numel)), counts[i], displs[i]);
    }
    return;
  }
  if (strategy != plan::Strategy::kLayerwise) return;
  TraceScope span(trace, "phase", "param sync (all-gather-v)");
  ParamAllGather& s = layerwise_sync;
  std::int64_t offset = s.displs[dp_rank];
  for (int p : s.params[dp_rank]) {
    std::copy(local_param(p), local_param(p) + place[p].numel, s.buffer.begin() + offset);
    offset += place[p].numel;
  }
  Pending pending;
  pending.name = "layerwise all-gather-v";
  pending.posted_us = trace.now_us();
  pending.request =
      grid.dp().all_gather(std::span<const float>(s.buffer.data() + s.displs[dp_rank],
                                                  static_cast<std::size_t>(s.counts[dp_rank])),
                           s.buffer, s.counts, s.displs);
  wait(pending, times.param_sync);
  for (int r = 0; r < dp; ++r) {
    if (r == dp_rank) continue;
    offset = s.displs[r];
    for (int p : s.params[r]) {
      std::copy(s.buffer.begin() + offset, s.buffer.begin() + offset + place[p].numel,
                local_param(p));
      offset += place[p].numel;
    }
  }
}

StrategyRunner::StrategyRunner(comm::Grid& grid, const model::ModelSpec& model,
                               const plan::Plan& plan, const RunOptions& options, Trace& trace)
    : impl_(std::make_unique<Impl>(grid, model, plan, options, trace)) {
  CANZONA_CHECK(plan.stages.size() == 1, "runner executes one pipeline stage");
  Impl& s = *impl_;
  TraceScope span(trace, "setup", str("setup ", plan::to_string(s.strategy)));
  s.build_places();
  s.build_dp_collectives();
  s.build_tasks();
  s.build_elementwise();
  s.build_layerwise_sync();
  s.build_tp_gather();
  s.build_groups();
  s.init_params();
  s.init_main_params();
}

// Collectives still in flight are waited by their Requests' destructors (never throwing) before
// the buffers they use are freed (Impl declares the buffers first).
StrategyRunner::~StrategyRunner() = default;

PhaseBytes& PhaseBytes::operator+=(const PhaseBytes& other) {
  grad_sync += other.grad_sync;
  optimizer += other.optimizer;
  param_sync += other.param_sync;
  return *this;
}

StepTimes StrategyRunner::step(int step_number) {
  Impl& s = *impl_;
  TraceScope span(s.trace, "step", str(plan::to_string(s.strategy), " step ", step_number));
  StepTimes times;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = s.clock.wait_cpu_ms;
  comm::Communicator& dp = s.grid.dp();
  comm::Communicator& tp = s.grid.tp();
  std::int64_t dp0 = dp.bytes().total(), tp0 = tp.bytes().total();
  // Moves the bytes posted since the last call into `dp_phase` / `tp_phase`.
  auto account = [&](std::int64_t& dp_phase, std::int64_t& tp_phase) {
    dp_phase = dp.bytes().total() - dp0;
    tp_phase = tp.bytes().total() - tp0;
    dp0 = dp.bytes().total();
    tp0 = tp.bytes().total();
  };
  s.step_bytes = StepBytes{};
  s.forward(step_number, times);
  std::int64_t forward_dp = 0, forward_tp = 0;  // nothing is posted in the forward
  account(forward_dp, forward_tp);
  CANZONA_CHECK(forward_dp == 0 && forward_tp == 0, "the forward posted a collective");
  s.backward(step_number, times);
  {
    TraceScope sync(s.trace, "phase", "gradient sync");
    for (Pending& pending : s.grad_sync) s.wait(pending, times.grad_sync);
  }
  account(s.step_bytes.dp.grad_sync, s.step_bytes.tp.grad_sync);
  s.optimizer_step(times);
  account(s.step_bytes.dp.optimizer, s.step_bytes.tp.optimizer);
  s.sync_params(times);
  account(s.step_bytes.dp.param_sync, s.step_bytes.tp.param_sync);
  times.step = wall_ms() - wall0;
  times.busy_cpu = (thread_cpu_ms() - cpu0) - (s.clock.wait_cpu_ms - wait_cpu0);
  return times;
}

const StepBytes& StrategyRunner::last_step_bytes() const {
  return impl_->step_bytes;
}

void StrategyRunner::finish() {
  double ignored = 0.0;
  for (Pending& pending : impl_->param_sync) impl_->wait(pending, ignored);
}

std::span<const float> StrategyRunner::params() const {
  return impl_->params;
}

bool StrategyRunner::grads_sharded() const {
  return impl_->reduce_scatter;
}

std::vector<StrategyRunner::GradRange> StrategyRunner::reduced_grads() const {
  const Impl& s = *impl_;
  if (!s.reduce_scatter) return {GradRange{0, s.grads}};
  std::vector<GradRange> ranges;
  const auto& buckets = s.stage.layout.buckets;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const std::int64_t count = s.counts[b][s.dp_rank];
    ranges.push_back(GradRange{buckets[b].offset + s.displs[b][s.dp_rank],
                               std::span<const float>(s.shard.data() + s.shard_offset[b],
                                                      static_cast<std::size_t>(count))});
  }
  return ranges;
}

const plan::StagePlan& StrategyRunner::stage() const {
  return impl_->stage;
}

std::int64_t StrategyRunner::state_bytes() const {
  std::int64_t bytes = 0;
  for (const ComputedTask& t : impl_->computed)
    bytes += static_cast<std::int64_t>(t.optimizer->state_bytes() + t.main.size() * sizeof(float));
  for (const ElementwiseSlice& s : impl_->elementwise)
    bytes += static_cast<std::int64_t>(s.optimizer->state_bytes());
  return bytes;
}

int StrategyRunner::computed_tasks() const {
  return static_cast<int>(impl_->computed.size());
}

}  // namespace canzona::runtime
