// StrategyRunner: the synthetic training loop driving the Engine (runner.h).
#include "canzona/runtime/runner.h"

#include <functional>

#include "canzona/common/clock.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "synthetic.h"
#include "workload.h"

namespace canzona::runtime {

struct StrategyRunner::Compute {
  // [engine set member][bucket] simulated compute
  std::vector<std::vector<double>> forward_flops, backward_flops;
  Workload workload;
};

namespace {

// 6 N T split 2 : 4 between forward and backward, N = this rank's params of each bucket.
void bucket_flops(const engine::Engine& engine, const RunOptions& options,
                  std::vector<double>& forward, std::vector<double>& backward) {
  for (const layout::Bucket& bucket : engine.stage().layout.buckets) {
    std::int64_t numel = 0;
    for (const layout::Slot& slot : bucket.slots) numel += slot.numel;
    const double flops =
        options.compute_scale * static_cast<double>(options.tokens) * static_cast<double>(numel);
    forward.push_back(2.0 * flops);
    backward.push_back(4.0 * flops);
  }
}

}  // namespace

PhaseBytes& PhaseBytes::operator+=(const PhaseBytes& other) {
  grad_sync += other.grad_sync;
  optimizer += other.optimizer;
  param_sync += other.param_sync;
  return *this;
}

StrategyRunner::StrategyRunner(comm::Grid& grid, const model::ModelSpec& model,
                               const plan::Plan& plan, const RunOptions& options,
                               engine::Trace& trace, comm::ExpertGroups* experts)
    : grid_(grid),
      model_(model),
      strategy_(plan.options.strategy),
      options_(options),
      trace_(trace) {
  engine::TraceScope span(trace, "setup", str("setup ", plan::to_string(strategy_)));
  engines_ = std::make_unique<engine::EngineSet>(grid, model, plan, engine_options(options), trace,
                                                 experts);
  compute_ = std::make_unique<Compute>();
  compute_->forward_flops.resize(static_cast<std::size_t>(engines_->size()));
  compute_->backward_flops.resize(compute_->forward_flops.size());
  for (int m = 0; m < engines_->size(); ++m) {
    const engine::EngineSet::Member& member = engines_->member(m);
    bucket_flops(*member.engine, options, compute_->forward_flops[static_cast<std::size_t>(m)],
                 compute_->backward_flops[static_cast<std::size_t>(m)]);
    // Values keyed by the param's index in the whole model, so every EP rank's experts differ
    // and the single-process reference sees the same numbers.
    const comm::Grid& g = *member.grid;
    for (int i : member.engine->stage().params)
      fill_init_typed(member.model->params[static_cast<std::size_t>(i)],
                      member.source[static_cast<std::size_t>(i)], g.dims().tp, g.coord().tp,
                      options.seed, member.engine->param(i));
  }
  engines_->init_main_params();
}

StrategyRunner::~StrategyRunner() = default;

engine::StepTimes StrategyRunner::step(int step_number) {
  engine::EngineSet& engines = *engines_;
  Compute& compute = *compute_;
  engine::TraceScope span(trace_, "step", str(plan::to_string(strategy_), " step ", step_number));
  engine::StepTimes times;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = engines.wait_cpu_ms();
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
    for (int m = 0; m < engines.size(); ++m) {
      engine::Engine& engine = *engines.member(m).engine;
      const std::vector<double>& flops = compute.forward_flops[static_cast<std::size_t>(m)];
      for (std::size_t i = flops.size(); i-- > 0;) {
        times.param_sync += engine.wait_param_sync(static_cast<int>(i));
        const double t0 = wall_ms();
        compute.workload.run(flops[i]);
        times.forward += wall_ms() - t0;
      }
    }
  }
  std::int64_t forward_dp = 0, forward_tp = 0;  // nothing is posted in the forward
  account(forward_dp, forward_tp);
  CANZONA_CHECK(forward_dp == 0 && forward_tp == 0, "the forward posted a collective");

  {
    engine::TraceScope backward(trace_, "phase", str("backward ", step_number));
    const std::function<void()> drive = [&engines] { engines.progress(); };
    // Each engine's gradients: this rank is DP rank g.coord().dp of its grid (for the experts:
    // expert DP rank of its EP rank's experts).
    for (int m = 0; m < engines.size(); ++m) {
      const engine::EngineSet::Member& member = engines.member(m);
      engine::Engine& engine = *member.engine;
      const comm::Grid& g = *member.grid;
      const auto& buckets = engine.stage().layout.buckets;
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        const double t0 = wall_ms();
        for (const layout::Slot& slot : buckets[b].slots)
          fill_grad_typed(member.model->params[static_cast<std::size_t>(slot.param)],
                          member.source[static_cast<std::size_t>(slot.param)], g.dims().tp,
                          g.coord().tp, options_.seed, step_number, g.coord().dp,
                          options_.precision, engine.grad(slot.param));
        compute.workload.run(compute.backward_flops[static_cast<std::size_t>(m)][b], drive);
        for (const layout::Slot& slot : buckets[b].slots) engine.grad_ready(slot.param);
        engine.progress();
        times.backward += wall_ms() - t0;
      }
    }
  }
  times.grad_sync = engines.finish_grad_sync();
  account(step_bytes_.dp.grad_sync, step_bytes_.tp.grad_sync);

  // Megatron's chained optimizer: the dense buffer's step, then the expert buffer's.
  const engine::StepTimes opt = engines.step();
  times.opt = opt.opt;
  times.opt_comm = opt.opt_comm;
  times.opt_compute = opt.opt_compute;
  times.opt_cpu = opt.opt_cpu;
  account(step_bytes_.dp.optimizer, step_bytes_.tp.optimizer);

  times.param_sync += engines.start_param_sync();
  account(step_bytes_.dp.param_sync, step_bytes_.tp.param_sync);
  times.step = wall_ms() - wall0;
  times.busy_cpu = (thread_cpu_ms() - cpu0) - (engines.wait_cpu_ms() - wait_cpu0);
  return times;
}

const StepBytes& StrategyRunner::last_step_bytes() const {
  return step_bytes_;
}

void StrategyRunner::finish() {
  engines_->finish();
}

ConstTypedSpan StrategyRunner::params() const {
  return engines_->dense().params();
}

std::uint64_t StrategyRunner::params_fnv() const {
  return engines_->params_fnv();
}

bool StrategyRunner::grads_sharded() const {
  return engines_->dense().grads_sharded();
}

std::vector<StrategyRunner::GradRange> StrategyRunner::reduced_grads() const {
  return engines_->dense().reduced_grads();
}

const plan::StagePlan& StrategyRunner::stage() const {
  return engines_->dense().stage();
}

std::int64_t StrategyRunner::state_bytes() const {
  return engines_->state_bytes();
}

int StrategyRunner::computed_tasks() const {
  return engines_->computed_tasks();
}

}  // namespace canzona::runtime
