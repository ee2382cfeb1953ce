// StrategyRunner: the synthetic training loop driving the Engine (runner.h).
#include "canzona/runtime/runner.h"

#include <functional>

#include "canzona/common/clock.h"
#include "canzona/common/error.h"
#include "synthetic.h"
#include "workload.h"

namespace canzona::runtime {

struct StrategyRunner::Compute {
  std::vector<double> forward_flops, backward_flops;  // [bucket] simulated compute
  Workload workload;
};

PhaseBytes& PhaseBytes::operator+=(const PhaseBytes& other) {
  grad_sync += other.grad_sync;
  optimizer += other.optimizer;
  param_sync += other.param_sync;
  return *this;
}

StrategyRunner::StrategyRunner(comm::Grid& grid, const model::ModelSpec& model,
                               const plan::Plan& plan, const RunOptions& options,
                               engine::Trace& trace)
    : grid_(grid),
      model_(model),
      strategy_(plan.options.strategy),
      options_(options),
      trace_(trace) {
  CANZONA_CHECK(plan.stages.size() == 1, "runner executes one pipeline stage");
  engine::TraceScope span(trace, "setup", str("setup ", plan::to_string(strategy_)));
  engine_ = std::make_unique<engine::Engine>(grid, model, plan, engine_options(options), trace);
  compute_ = std::make_unique<Compute>();
  for (const layout::Bucket& bucket : engine_->stage().layout.buckets) {
    std::int64_t numel = 0;
    for (const layout::Slot& slot : bucket.slots) numel += slot.numel;
    // 6 N T split 2 : 4 between forward and backward, N = this rank's params of the bucket.
    const double flops =
        options.compute_scale * static_cast<double>(options.tokens) * static_cast<double>(numel);
    compute_->forward_flops.push_back(2.0 * flops);
    compute_->backward_flops.push_back(4.0 * flops);
  }
  const int tp = grid.shape().tp;
  const int tp_rank = grid.coord().tp;
  for (int p : engine_->stage().params)
    fill_init(model.params[p], p, tp, tp_rank, options.seed, engine_->param(p));
  engine_->init_main_params();
}

StrategyRunner::~StrategyRunner() = default;

engine::StepTimes StrategyRunner::step(int step_number) {
  engine::Engine& engine = *engine_;
  Compute& compute = *compute_;
  const auto& buckets = engine.stage().layout.buckets;
  engine::TraceScope span(trace_, "step", str(plan::to_string(strategy_), " step ", step_number));
  engine::StepTimes times;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = engine.wait_cpu_ms();
  comm::Communicator& dp = grid_.dp();
  comm::Communicator& tp = grid_.tp();
  std::int64_t dp0 = dp.bytes().total(), tp0 = tp.bytes().total();
  // Moves the bytes posted since the last call into `dp_phase` / `tp_phase`.
  auto account = [&](std::int64_t& dp_phase, std::int64_t& tp_phase) {
    dp_phase = dp.bytes().total() - dp0;
    tp_phase = tp.bytes().total() - tp0;
    dp0 = dp.bytes().total();
    tp0 = tp.bytes().total();
  };
  step_bytes_ = StepBytes{};

  {
    engine::TraceScope forward(trace_, "phase", str("forward ", step_number));
    for (std::size_t i = buckets.size(); i-- > 0;) {
      times.param_sync += engine.wait_param_sync(static_cast<int>(i));
      const double t0 = wall_ms();
      compute.workload.run(compute.forward_flops[i]);
      times.forward += wall_ms() - t0;
    }
  }
  std::int64_t forward_dp = 0, forward_tp = 0;  // nothing is posted in the forward
  account(forward_dp, forward_tp);
  CANZONA_CHECK(forward_dp == 0 && forward_tp == 0, "the forward posted a collective");

  {
    engine::TraceScope backward(trace_, "phase", str("backward ", step_number));
    const std::function<void()> drive = [&engine] { engine.progress(); };
    const int tp_size = grid_.shape().tp;
    const int tp_rank = grid_.coord().tp;
    const int dp_rank = grid_.coord().dp;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const double t0 = wall_ms();
      for (const layout::Slot& slot : buckets[b].slots)
        fill_grad(model_.params[slot.param], slot.param, tp_size, tp_rank, options_.seed,
                  step_number, dp_rank, engine.grad(slot.param));
      compute.workload.run(compute.backward_flops[b], drive);
      for (const layout::Slot& slot : buckets[b].slots) engine.grad_ready(slot.param);
      engine.progress();
      times.backward += wall_ms() - t0;
    }
  }
  times.grad_sync = engine.finish_grad_sync();
  account(step_bytes_.dp.grad_sync, step_bytes_.tp.grad_sync);

  const engine::StepTimes opt = engine.step();
  times.opt = opt.opt;
  times.opt_comm = opt.opt_comm;
  times.opt_compute = opt.opt_compute;
  times.opt_cpu = opt.opt_cpu;
  account(step_bytes_.dp.optimizer, step_bytes_.tp.optimizer);

  times.param_sync += engine.start_param_sync();
  account(step_bytes_.dp.param_sync, step_bytes_.tp.param_sync);
  times.step = wall_ms() - wall0;
  times.busy_cpu = (thread_cpu_ms() - cpu0) - (engine.wait_cpu_ms() - wait_cpu0);
  return times;
}

const StepBytes& StrategyRunner::last_step_bytes() const {
  return step_bytes_;
}

void StrategyRunner::finish() {
  engine_->finish();
}

std::span<const float> StrategyRunner::params() const {
  return engine_->params();
}

std::uint64_t StrategyRunner::params_fnv() const {
  return engine_->params_fnv();
}

bool StrategyRunner::grads_sharded() const {
  return engine_->grads_sharded();
}

std::vector<StrategyRunner::GradRange> StrategyRunner::reduced_grads() const {
  return engine_->reduced_grads();
}

const plan::StagePlan& StrategyRunner::stage() const {
  return engine_->stage();
}

std::int64_t StrategyRunner::state_bytes() const {
  return engine_->state_bytes();
}

int StrategyRunner::computed_tasks() const {
  return engine_->computed_tasks();
}

}  // namespace canzona::runtime
