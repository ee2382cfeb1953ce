// Engine: setup from the decoded plan, the gradient-ready protocol, the optimizer step and
// optimizer state access (engine.h). The three strategy parts live in dp_sync.cpp,
// tp_exchange.cpp and param_sync.cpp.
#include "canzona/runtime/engine.h"

#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/runtime/optimizer_factory.h"
#include "engine_core.h"

namespace canzona::runtime {

Engine::Core::Core(comm::Grid& grid_, const model::ModelSpec& model_, const plan::Plan& plan_,
                   const EngineOptions& options_, Trace& trace_)
    : grid(grid_),
      model(model_),
      stage(plan_.stages.at(0)),
      options(options_),
      trace(trace_),
      work(plan::decode_rank(model_, plan_, 0, grid_.coord().dp, grid_.coord().tp)),
      dp_rank(grid_.coord().dp),
      tp_rank(grid_.coord().tp),
      dp(grid_.shape().dp),
      tp(grid_.shape().tp) {}

// Collectives still in flight are waited by their Requests' destructors (never throwing) inside
// the parts, which are destroyed before the buffers they use (declared after them).
Engine::Core::~Core() = default;

void Engine::Core::wait(Pending& pending, double& exposed_ms) {
  if (!pending.request.pending()) return;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  pending.request.wait();
  exposed_ms += wall_ms() - wall0;
  clock.wait_cpu_ms += thread_cpu_ms() - cpu0;
  trace.span(kCollectiveTrack, "collective", pending.name, pending.posted_us, trace.now_us());
}

void Engine::Core::step_task(ComputedTask& t, const float* full_grad) {
  const optim::ParamInfo& info = t.optimizer->param();
  t.optimizer->step(optim::matrix_view(t.main.data(), info.rows, info.cols),
                    optim::matrix_view(full_grad, info.rows, info.cols));
  if (t.role == plan::TaskRole::kHosted) return;
  const ShardMap& own = t.role == plan::TaskRole::kLocal ? t.maps[0] : t.maps[tp_rank];
  task_to_local(own, t.main.data(), local_param(t.param));
}

const float* Engine::Core::reduced_grad(int param, std::int64_t slot_element) const {
  return dp_sync->reduced_grad(param, slot_element);
}

namespace {

void build_places(Engine::Core& c) {
  c.place.assign(c.model.params.size(), ParamPlace{});
  const layout::Layout& layout = c.stage.layout;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const layout::Bucket& bucket = layout.buckets[b];
    for (const layout::Slot& slot : bucket.slots)
      c.place[slot.param] = {static_cast<int>(b), bucket.offset + slot.offset, slot.offset,
                             slot.numel};
  }
  c.params.assign(static_cast<std::size_t>(layout.numel), 0.0f);
  c.grads.assign(static_cast<std::size_t>(layout.numel), 0.0f);
  c.ready.assign(layout.buckets.size(), 0);
  c.param_ready.assign(c.model.params.size(), 0);
}

void build_tasks(Engine::Core& c) {
  c.computed_of_task.assign(c.stage.tasks.size(), -1);
  std::size_t largest = 0;
  for (const plan::RankTask& rt : c.work.tasks) {
    const plan::Task& task = c.stage.tasks[rt.task];
    const model::ParamSpec& spec = c.model.params[task.param];
    ComputedTask t;
    t.task = rt.task;
    t.param = task.param;
    t.piece = task.piece;
    t.role = rt.role;
    if (t.role == plan::TaskRole::kLocal) {
      t.maps.push_back(shard_map(spec, task.piece, c.tp, c.tp_rank));
    } else {
      for (int q = 0; q < c.tp; ++q) t.maps.push_back(shard_map(spec, task.piece, c.tp, q));
    }
    t.optimizer = make_matrix_optimizer(c.options, spec, task.piece);
    const optim::ParamInfo& info = t.optimizer->param();
    t.main.assign(static_cast<std::size_t>(info.numel()), 0.0f);
    largest = std::max(largest, t.main.size());
    c.computed_of_task[rt.task] = static_cast<int>(c.computed.size());
    c.computed.push_back(std::move(t));
  }
  c.scratch.assign(largest, 0.0f);
}

void build_elementwise(Engine::Core& c) {
  for (const plan::ElementwiseUpdate& u : c.work.elementwise) {
    ElementwiseSlice slice;
    slice.param = u.param;
    slice.begin = u.begin;
    slice.values = c.local_param(u.param) + u.begin;
    slice.grad = c.reduced_grad(u.param, u.begin);
    slice.numel = u.end - u.begin;
    slice.optimizer =
        make_elementwise_optimizer(c.options, c.model.params[u.param], u.begin, slice.numel);
    c.elementwise.push_back(std::move(slice));
  }
}

}  // namespace

Engine::Engine(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
               const EngineOptions& options, Trace& trace)
    : core_(std::make_unique<Core>(grid, model, plan, options, trace)) {
  CANZONA_CHECK(plan.stages.size() == 1, "the engine executes one pipeline stage");
  Core& c = *core_;
  build_places(c);
  c.dp_sync = make_dp_sync(c.work.parts.dp_sync, c);
  build_tasks(c);
  build_elementwise(c);
  c.tp_exchange = make_tp_exchange(c.work.parts.tp_exchange, c);
  c.param_sync = make_param_sync(c.work.parts.param_sync, c);
}

Engine::~Engine() = default;

const plan::RankPlan& Engine::rank_plan() const {
  return core_->work;
}

const plan::StagePlan& Engine::stage() const {
  return core_->stage;
}

std::span<const float> Engine::params() const {
  return core_->params;
}

std::uint64_t Engine::params_fnv() const {
  std::uint64_t h = kFnvOffset;
  for (const ParamPlace& at : core_->place)
    if (at.bucket >= 0 && at.numel > 0)
      fnv1a_mix(h, core_->params.data() + at.offset,
                static_cast<std::size_t>(at.numel) * sizeof(float));
  return h;
}

std::span<float> Engine::param(int p) {
  const ParamPlace& at = core_->place.at(p);
  if (at.bucket < 0) return {};
  return {core_->params.data() + at.offset, static_cast<std::size_t>(at.numel)};
}

std::span<float> Engine::grad(int p) {
  const ParamPlace& at = core_->place.at(p);
  if (at.bucket < 0) return {};
  return {core_->grads.data() + at.offset, static_cast<std::size_t>(at.numel)};
}

int Engine::bucket_of(int p) const {
  return core_->place.at(p).bucket;
}

void Engine::init_main_params() {
  Core& c = *core_;
  for (ComputedTask& t : c.computed)
    if (t.role == plan::TaskRole::kLocal)
      local_to_task(t.maps[0], c.local_param(t.param), t.main.data());
  c.tp_exchange->init_main();
  c.main_loaded = true;
}

void Engine::grad_ready(int p) {
  Core& c = *core_;
  const ParamPlace& at = c.place.at(p);
  CANZONA_CHECK(at.bucket >= 0, "grad_ready: param ", c.model.params[p].name,
                " is not in this stage");
  CANZONA_CHECK(!c.param_ready[p], "grad_ready: param ", c.model.params[p].name,
                " marked ready twice in one step");
  c.param_ready[p] = 1;
  const int b = at.bucket;
  if (++c.ready[b] == static_cast<int>(c.stage.layout.buckets[b].slots.size())) c.dp_sync->post(b);
}

void Engine::progress() {
  core_->dp_sync->progress();
}

double Engine::finish_grad_sync() {
  Core& c = *core_;
  for (std::size_t b = 0; b < c.ready.size(); ++b)
    CANZONA_CHECK(c.ready[b] == static_cast<int>(c.stage.layout.buckets[b].slots.size()),
                  "finish_grad_sync: bucket ", b, " has ", c.ready[b], " of ",
                  c.stage.layout.buckets[b].slots.size(), " params ready");
  TraceScope sync(c.trace, "phase", "gradient sync");
  const double exposed = c.dp_sync->wait_all();
  std::fill(c.ready.begin(), c.ready.end(), 0);
  std::fill(c.param_ready.begin(), c.param_ready.end(), 0);
  c.grads_synced = true;
  return exposed;
}

StepTimes Engine::step() {
  Core& c = *core_;
  CANZONA_CHECK(c.main_loaded, "Engine::step() before init_main_params()");
  CANZONA_CHECK(c.grads_synced, "Engine::step() before finish_grad_sync() of this step");
  c.grads_synced = false;
  TraceScope span(c.trace, "phase", "optimizer");
  StepTimes times;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = c.clock.wait_cpu_ms;
  double comm_ms = 0.0;
  const auto local = [&c] {
    TraceScope work(c.trace, "optimizer", "element-wise + local tasks");
    for (ElementwiseSlice& s : c.elementwise)
      s.optimizer->step(optim::matrix_view(s.values, 1, s.numel),
                        optim::matrix_view(s.grad, 1, s.numel));
    for (ComputedTask& t : c.computed) {
      if (t.role != plan::TaskRole::kLocal) continue;
      local_to_task(t.maps[0], c.reduced_grad(t.param), c.scratch.data());
      c.step_task(t, c.scratch.data());
    }
  };
  c.tp_exchange->step(local, comm_ms);
  times.opt = wall_ms() - wall0;
  times.opt_comm = comm_ms;
  times.opt_compute = times.opt - comm_ms;
  times.opt_cpu = (thread_cpu_ms() - cpu0) - (c.clock.wait_cpu_ms - wait_cpu0);
  return times;
}

double Engine::start_param_sync() {
  return core_->param_sync->start();
}

double Engine::wait_param_sync(int bucket) {
  return core_->param_sync->wait(bucket);
}

void Engine::finish() {
  for (std::size_t b = 0; b < core_->stage.layout.buckets.size(); ++b)
    core_->param_sync->wait(static_cast<int>(b));
}

std::vector<GradRange> Engine::reduced_grads() const {
  return core_->dp_sync->reduced();
}

bool Engine::grads_sharded() const {
  return core_->dp_sync->sharded();
}

std::int64_t Engine::state_bytes() const {
  std::int64_t bytes = 0;
  for (const ComputedTask& t : core_->computed)
    bytes += static_cast<std::int64_t>(t.optimizer->state_bytes() + t.main.size() * sizeof(float));
  for (const ElementwiseSlice& s : core_->elementwise)
    bytes += static_cast<std::int64_t>(s.optimizer->state_bytes());
  return bytes;
}

double Engine::wait_cpu_ms() const {
  return core_->clock.wait_cpu_ms;
}

int Engine::computed_tasks() const {
  return static_cast<int>(core_->computed.size());
}

std::vector<StateTensor> Engine::optimizer_state() {
  Core& c = *core_;
  std::vector<StateTensor> out;
  for (ComputedTask& t : c.computed) {
    const optim::ParamInfo& info = t.optimizer->param();
    StateTensor main;
    main.param = c.model.params[t.param].name;
    main.state = "main";
    main.piece = t.piece;
    main.rows = info.rows;
    main.cols = info.cols;
    main.values = t.main;
    main.row_axes = 1;
    out.push_back(main);
    for (const optim::NamedState& s : t.optimizer->state()) {
      StateTensor tensor = main;
      tensor.state = s.name;
      tensor.rows = s.rows;
      tensor.cols = s.cols;
      tensor.values = s.values;
      tensor.row_axes = s.row_axes;
      out.push_back(tensor);
    }
  }
  for (ElementwiseSlice& e : c.elementwise) {
    for (const optim::NamedState& s : e.optimizer->state()) {
      StateTensor tensor;
      tensor.param = c.model.params[e.param].name;
      tensor.state = s.name;
      tensor.begin = e.begin;
      tensor.end = e.begin + e.numel;
      tensor.rows = s.rows;
      tensor.cols = s.cols;
      tensor.values = s.values;
      out.push_back(tensor);
    }
  }
  return out;
}

std::int64_t Engine::step_count() const {
  const Core& c = *core_;
  if (!c.computed.empty()) return c.computed.front().optimizer->step_count();
  if (!c.elementwise.empty()) return c.elementwise.front().optimizer->step_count();
  return 0;
}

void Engine::set_lr_scale(double scale) {
  CANZONA_REQUIRE(std::isfinite(scale) && scale >= 0.0, "lr scale ", scale,
                  " must be finite and >= 0");
  for (ComputedTask& t : core_->computed) t.optimizer->set_lr_scale(scale);
  for (ElementwiseSlice& e : core_->elementwise) e.optimizer->set_lr_scale(scale);
}

void Engine::set_step_count(std::int64_t steps) {
  for (ComputedTask& t : core_->computed) t.optimizer->set_step_count(steps);
  for (ElementwiseSlice& e : core_->elementwise) e.optimizer->set_step_count(steps);
}

std::vector<StateTensor> Engine::optimizer_state(const std::string& param,
                                                 const std::string& state) {
  std::vector<StateTensor> out;
  for (StateTensor& s : optimizer_state())
    if (s.param == param && s.state == state) out.push_back(s);
  return out;
}

void Engine::set_optimizer_state(const std::string& param, const std::string& state, int piece,
                                 std::int64_t begin, std::span<const float> values) {
  for (StateTensor& s : optimizer_state(param, state)) {
    if (s.piece != piece || s.begin != begin) continue;
    CANZONA_REQUIRE(values.size() == s.values.size(), "optimizer state ", param, ".", state, ": ",
                    values.size(), " values given, this rank holds ", s.values.size());
    std::copy(values.begin(), values.end(), s.values.begin());
    return;
  }
  throw UsageError(str("optimizer state ", param, ".", state, " (piece ", piece, ", element ",
                       begin, ") is not held by this rank"));
}

}  // namespace canzona::runtime
