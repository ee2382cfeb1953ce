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
  std::vector<double> forward_flops, backward_flops;                // [bucket] simulated compute
  std::vector<double> expert_forward_flops, expert_backward_flops;  // [expert bucket]
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
  CANZONA_CHECK(plan.stages.size() == 1, "runner executes one pipeline stage");
  engine::TraceScope span(trace, "setup", str("setup ", plan::to_string(strategy_)));
  engine_ = std::make_unique<engine::Engine>(grid, model, plan, engine_options(options), trace);
  compute_ = std::make_unique<Compute>();
  bucket_flops(*engine_, options, compute_->forward_flops, compute_->backward_flops);
  const int tp = grid.shape().tp;
  const int tp_rank = grid.coord().tp;
  for (int p : engine_->stage().params)
    fill_init(model.params[p], p, tp, tp_rank, options.seed, engine_->param(p));
  engine_->init_main_params();
  if (!plan.expert) return;
  CANZONA_CHECK(experts != nullptr && experts->grid, "a MoE plan needs the expert groups");
  experts_ = std::make_unique<Experts>();
  Experts& e = *experts_;
  e.groups = experts;
  e.part = model::expert_part(model, plan.expert->ep, plan.expert->etp, experts->coord.ep);
  engine::EngineOptions eo = engine_options(options);
  eo.grad_scaling_dp = grid.shape().dp;  // Megatron's expert_gradient_scaling_factor: 1 / DP
  e.engine =
      std::make_unique<engine::Engine>(*experts->grid, e.part.model, plan.expert->plan, eo, trace);
  bucket_flops(*e.engine, options, compute_->expert_forward_flops, compute_->expert_backward_flops);
  // Values keyed by the expert's index in the whole model, so every EP rank's experts differ and
  // the single-process reference sees the same numbers.
  const comm::GridShape& es = experts->grid->shape();
  for (int i : e.engine->stage().params)
    fill_init(e.part.model.params[i], e.part.source[i], es.tp, experts->grid->coord().tp,
              options.seed, e.engine->param(i));
  e.engine->init_main_params();
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
  const double expert_wait_cpu0 = experts_ ? experts_->engine->wait_cpu_ms() : 0.0;
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

  engine::Engine* expert = experts_ ? experts_->engine.get() : nullptr;
  {
    engine::TraceScope forward(trace_, "phase", str("forward ", step_number));
    for (std::size_t i = buckets.size(); i-- > 0;) {
      times.param_sync += engine.wait_param_sync(static_cast<int>(i));
      const double t0 = wall_ms();
      compute.workload.run(compute.forward_flops[i]);
      times.forward += wall_ms() - t0;
    }
    for (std::size_t i = compute.expert_forward_flops.size(); i-- > 0;) {
      times.param_sync += expert->wait_param_sync(static_cast<int>(i));
      const double t0 = wall_ms();
      compute.workload.run(compute.expert_forward_flops[i]);
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
    if (expert) {
      // The expert buffer's gradients: this rank is expert DP rank edp of its EP rank's experts.
      const comm::Grid& eg = *experts_->groups->grid;
      const model::ExpertPart& part = experts_->part;
      const auto& expert_buckets = expert->stage().layout.buckets;
      const std::function<void()> drive_both = [&engine, expert] {
        engine.progress();
        expert->progress();
      };
      for (std::size_t b = 0; b < expert_buckets.size(); ++b) {
        const double t0 = wall_ms();
        for (const layout::Slot& slot : expert_buckets[b].slots)
          fill_grad(part.model.params[slot.param], part.source[slot.param], eg.shape().tp,
                    eg.coord().tp, options_.seed, step_number, eg.coord().dp,
                    expert->grad(slot.param));
        compute.workload.run(compute.expert_backward_flops[b], drive_both);
        for (const layout::Slot& slot : expert_buckets[b].slots) expert->grad_ready(slot.param);
        expert->progress();
        times.backward += wall_ms() - t0;
      }
    }
  }
  times.grad_sync = engine.finish_grad_sync();
  if (expert) times.grad_sync += expert->finish_grad_sync();
  account(step_bytes_.dp.grad_sync, step_bytes_.tp.grad_sync);

  // Megatron's chained optimizer: the dense buffer's step, then the expert buffer's.
  engine::StepTimes opt = engine.step();
  if (expert) {
    const engine::StepTimes e = expert->step();
    opt.opt += e.opt;
    opt.opt_comm += e.opt_comm;
    opt.opt_compute += e.opt_compute;
    opt.opt_cpu += e.opt_cpu;
  }
  times.opt = opt.opt;
  times.opt_comm = opt.opt_comm;
  times.opt_compute = opt.opt_compute;
  times.opt_cpu = opt.opt_cpu;
  account(step_bytes_.dp.optimizer, step_bytes_.tp.optimizer);

  times.param_sync += engine.start_param_sync();
  if (expert) times.param_sync += expert->start_param_sync();
  account(step_bytes_.dp.param_sync, step_bytes_.tp.param_sync);
  times.step = wall_ms() - wall0;
  times.busy_cpu = (thread_cpu_ms() - cpu0) - (engine.wait_cpu_ms() - wait_cpu0) -
                   (expert ? expert->wait_cpu_ms() - expert_wait_cpu0 : 0.0);
  return times;
}

const StepBytes& StrategyRunner::last_step_bytes() const {
  return step_bytes_;
}

void StrategyRunner::finish() {
  engine_->finish();
  if (experts_) experts_->engine->finish();
}

std::span<const float> StrategyRunner::params() const {
  return engine_->params();
}

std::uint64_t StrategyRunner::params_fnv() const {
  std::uint64_t h = engine_->params_fnv();
  if (experts_) {
    const std::uint64_t e = experts_->engine->params_fnv();
    fnv1a_mix(h, &e, sizeof(e));
  }
  return h;
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
  return engine_->state_bytes() + (experts_ ? experts_->engine->state_bytes() : 0);
}

int StrategyRunner::computed_tasks() const {
  return engine_->computed_tasks() + (experts_ ? experts_->engine->computed_tasks() : 0);
}

}  // namespace canzona::runtime
