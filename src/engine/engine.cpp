// Engine: the parts composed in dependency order, the grad-ready protocol and the optimizer step
// (engine.h). Each part owns its state: the buffers (buffers.h), the DP gradient sync
// (grad_sync.h), what this rank's optimizer updates (optimizer_shards.h), the TP exchange
// (tp_exchange.h), the DP owner exchange (owner_exchange.h, fsdp-a2a only) and the param sync
// (param_sync.h).
#include "canzona/engine/engine.h"

#include <algorithm>

#include "buffers.h"
#include "canzona/common/clock.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "collectives.h"
#include "context.h"
#include "grad_sync.h"
#include "optimizer_shards.h"
#include "owner_exchange.h"
#include "param_sync.h"
#include "residency.h"
#include "tp_exchange.h"

namespace canzona::engine {

// Members in dependency order: each part gets the ones before it, so construction follows the
// declarations, and parts with collectives in flight are destroyed (their requests waited)
// before the buffers those collectives use.
struct Engine::Parts {
  RankContext context;
  CollectiveWaits waits;
  ParamBuffers buffers;
  std::unique_ptr<GradSync> grad_sync;
  OptimizerShards shards;
  std::unique_ptr<TpExchange> tp_exchange;
  std::unique_ptr<OwnerExchange> owner_exchange;
  std::unique_ptr<ParamSync> param_sync;
  ParamResidency residency;
  bool main_loaded = false;   // init_main_params() ran
  bool grads_synced = false;  // finish_grad_sync() ran since the last step()

  Parts(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
        const EngineOptions& options, Trace& trace)
      : context{model,
                plan.stages.at(static_cast<std::size_t>(grid.coord().pp)),
                plan::decode_rank(model, plan, grid.coord().pp, grid.coord().dp, grid.coord().tp),
                options,
                grid.dims().dp,
                grid.dims().tp,
                grid.coord().dp,
                grid.coord().tp},
        waits(trace),
        buffers(model, context.stage.layout, options.param_dtype, engine::grad_dtype(options)),
        grad_sync(make_grad_sync(context, grid.dp(), buffers, waits)),
        shards(context, buffers, *grad_sync),
        tp_exchange(make_tp_exchange(context, {grid.tp(), *grad_sync, shards, buffers, waits})),
        owner_exchange(make_owner_exchange(
            context, {grid.dp(), grid.tp(), *grad_sync, shards, buffers, waits})),
        param_sync(make_param_sync(context, grid.dp(), buffers, waits)),
        residency(context, grid.dp(), buffers, waits) {}
};

Engine::Engine(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
               const EngineOptions& options, Trace& trace) {
  // Each pipeline stage's ranks run that stage of the plan (its own buckets, cuts and groups).
  CANZONA_CHECK(std::ssize(plan.stages) == grid.dims().pp, "plan has ", plan.stages.size(),
                " stages, the grid ", grid.dims().pp);
  parts_ = std::make_unique<Parts>(grid, model, plan, options, trace);
}

Engine::~Engine() = default;

const plan::RankPlan& Engine::rank_plan() const {
  return parts_->context.rank_plan;
}

const plan::StagePlan& Engine::stage() const {
  return parts_->context.stage;
}

ConstTypedSpan Engine::params() const {
  return parts_->buffers.params();
}

DType Engine::param_dtype() const {
  return parts_->buffers.param_dtype();
}

DType Engine::grad_dtype() const {
  return parts_->buffers.grad_dtype();
}

DType grad_dtype(const EngineOptions& options) {
  return options.grad_reduce_in_fp32 ? DType::kF32 : options.param_dtype;
}

std::uint64_t Engine::params_fnv() {
  Parts& c = *parts_;
  if (!c.residency.sharded()) return c.buffers.params_fnv();
  // One bucket gathered at a time, in the order model params visit them.
  std::uint64_t h = kFnvOffset;
  int gathered = -1;
  for (int p = 0; p < c.buffers.num_params(); ++p) {
    const int b = c.buffers.place(p).bucket;
    if (b < 0) continue;
    if (b != gathered) {
      if (gathered >= 0) c.residency.release(gathered);
      c.residency.wait(b);
      gathered = b;
    }
    c.buffers.mix_param(h, p);
  }
  c.residency.release_all();
  return h;
}

ZeroStage Engine::zero_stage() const {
  return parts_->context.options.zero_stage;
}

ElementRange Engine::held_elements(int p) const {
  const Parts& c = *parts_;
  const ParamPlace& at = c.buffers.place(p);
  if (at.bucket < 0) return {};
  if (c.context.rank_plan.shards.empty()) return {0, at.numel};
  const std::int64_t begin = std::max(at.slot_offset, c.residency.shard_begin(at.bucket));
  const std::int64_t end = std::min(at.slot_offset + at.numel, c.residency.shard_end(at.bucket));
  if (begin >= end) return {};
  return {begin - at.slot_offset, end - at.slot_offset};
}

ConstTypedSpan Engine::reduced_grad(int p) const {
  const ElementRange held = held_elements(p);
  if (held.begin == held.end) return {nullptr, 0, grad_dtype()};
  const ConstTypedPtr first = parts_->grad_sync->reduced_grad(p, held.begin);
  return {first.data(), held.end - held.begin, first.dtype()};
}

void Engine::zero_grads() {
  parts_->buffers.zero_grads(parts_->residency.sharded());
}

void Engine::prefetch_params(int bucket) {
  parts_->residency.prefetch(bucket);
}

void Engine::release_params(int bucket) {
  parts_->residency.release(bucket);
}

MemoryHeld Engine::memory_held() const {
  const Parts& c = *parts_;
  MemoryHeld m;
  m.params_bytes = c.residency.persistent_bytes();
  std::int64_t reduced = 0;
  for (const GradRange& r : c.grad_sync->reduced()) reduced += r.values.size();
  const std::int64_t full = c.buffers.layout().numel;
  const std::int64_t grad_bytes = dtype_bytes(c.buffers.grad_dtype());
  // The gradient buffer, plus the Reduce-Scatter's shard buffer when it is a separate one.
  m.grads_bytes = grad_bytes *
                  (c.residency.sharded() ? reduced : full + (c.grad_sync->sharded() ? reduced : 0));
  m.optimizer_state_bytes = c.shards.state_bytes();
  m.resident_bytes = c.buffers.resident_param_bytes() + c.buffers.resident_grad_bytes() +
                     (c.grad_sync->sharded() ? grad_bytes * reduced : 0) + m.optimizer_state_bytes;
  return m;
}

TypedSpan Engine::param(int p) {
  const ParamPlace& at = parts_->buffers.place(p);
  if (at.bucket < 0) return {nullptr, 0, param_dtype()};
  return parts_->buffers.param(p);
}

TypedSpan Engine::grad(int p) {
  const ParamPlace& at = parts_->buffers.place(p);
  if (at.bucket < 0) return {nullptr, 0, grad_dtype()};
  return parts_->buffers.grad(p);
}

int Engine::bucket_of(int p) const {
  return parts_->buffers.place(p).bucket;
}

void Engine::init_main_params() {
  parts_->shards.init_local_main();
  parts_->tp_exchange->init_main();
  parts_->owner_exchange->init_main();
  parts_->residency.release_all();
  parts_->main_loaded = true;
}

void Engine::grad_ready(int p) {
  parts_->grad_sync->mark_ready(p);
}

void Engine::progress() {
  parts_->grad_sync->progress();
  parts_->residency.progress();
}

double Engine::finish_grad_sync() {
  TraceScope sync(parts_->waits.trace(), "phase", "gradient sync");
  const double exposed = parts_->grad_sync->finish();
  parts_->grads_synced = true;
  return exposed;
}

StepTimes Engine::step() {
  Parts& c = *parts_;
  CANZONA_CHECK(c.main_loaded, "Engine::step() before init_main_params()");
  CANZONA_CHECK(c.grads_synced, "Engine::step() before finish_grad_sync() of this step");
  c.grads_synced = false;
  TraceScope span(c.waits.trace(), "phase", "optimizer");
  StepTimes times;
  const double wall0 = wall_ms();
  const double cpu0 = thread_cpu_ms();
  const double wait_cpu0 = c.waits.wait_cpu_ms();
  double comm_ms = 0.0;
  c.owner_exchange->begin_step();
  c.tp_exchange->begin_step();
  c.shards.step_local(c.waits.trace());
  c.tp_exchange->finish_step(comm_ms);
  c.owner_exchange->finish_step(comm_ms);
  times.opt = wall_ms() - wall0;
  times.opt_comm = comm_ms;
  times.opt_compute = times.opt - comm_ms;
  times.opt_cpu = (thread_cpu_ms() - cpu0) - (c.waits.wait_cpu_ms() - wait_cpu0);
  return times;
}

double Engine::start_param_sync() {
  if (parts_->residency.sharded()) return 0.0;  // gathered on use
  return parts_->param_sync->start();
}

double Engine::wait_param_sync(int bucket) {
  if (parts_->residency.sharded()) return parts_->residency.wait(bucket);
  return parts_->param_sync->wait(bucket);
}

void Engine::finish() {
  for (std::size_t b = 0; b < parts_->context.stage.layout.buckets.size(); ++b) {
    if (parts_->residency.sharded())
      parts_->residency.release(static_cast<int>(b));
    else
      parts_->param_sync->wait(static_cast<int>(b));
  }
}

std::vector<GradRange> Engine::reduced_grads() const {
  return parts_->grad_sync->reduced();
}

bool Engine::grads_sharded() const {
  return parts_->grad_sync->sharded();
}

std::int64_t Engine::state_bytes() const {
  return parts_->shards.state_bytes();
}

double Engine::wait_cpu_ms() const {
  return parts_->waits.wait_cpu_ms();
}

int Engine::computed_tasks() const {
  return static_cast<int>(parts_->shards.tasks().size());
}

std::vector<StateTensor> Engine::optimizer_state() {
  return parts_->shards.state();
}

std::int64_t Engine::step_count() const {
  return parts_->shards.step_count();
}

void Engine::set_lr_scale(double scale) {
  set_lr_scales(scale, scale);
}

void Engine::set_lr_scales(double matrix, double elementwise) {
  parts_->shards.set_lr_scales(matrix, elementwise);
}

void Engine::set_step_count(std::int64_t steps) {
  parts_->shards.set_step_count(steps);
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

}  // namespace canzona::engine
