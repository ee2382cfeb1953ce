// EngineSet: the dense and the expert engine as one optimizer (engine_set.h).
#include "canzona/engine/engine_set.h"

#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/common/fnv.h"

namespace canzona::engine {

EngineSet::EngineSet(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
                     const EngineOptions& options, Trace& trace, comm::ExpertGroups* experts)
    : groups_(experts) {
  engines_.push_back(std::make_unique<Engine>(grid, model, plan, options, trace));
  slots_.assign(model.params.size(), Slot{});
  Member dense{engines_[0].get(), &grid, &model, {}};
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    dense.source.push_back(static_cast<int>(p));  // the dense engine indexes the whole model
    if (engines_[0]->bucket_of(static_cast<int>(p)) >= 0) slots_[p] = {0, static_cast<int>(p)};
  }
  members_.push_back(std::move(dense));
  if (!plan.expert) return;
  CANZONA_CHECK(experts != nullptr && experts->grid, "a MoE plan needs the expert groups");
  // The expert groups were made for the dense grid's ep and etp (ExpertGroups keeps no copy).
  CANZONA_CHECK((experts->ep ? experts->ep->size() : 1) == grid.dims().ep &&
                    experts->grid->dims().tp == grid.dims().etp,
                "expert groups of ep ", experts->ep ? experts->ep->size() : 1, " x etp ",
                experts->grid->dims().tp, " on a grid of ", to_string(grid.dims()));
  part_ = std::make_unique<model::ExpertPart>(
      model::expert_part(model, plan.expert->ep, plan.expert->etp, experts->coord.ep));
  EngineOptions eo = options;
  eo.grad_scaling_dp = grid.dims().dp;  // Megatron's expert_gradient_scaling_factor: 1 / DP
  engines_.push_back(
      std::make_unique<Engine>(*experts->grid, part_->model, plan.expert->plan, eo, trace));
  Member expert{engines_[1].get(), experts->grid.get(), &part_->model, part_->source};
  for (std::size_t i = 0; i < part_->source.size(); ++i)
    slots_[static_cast<std::size_t>(part_->source[i])] = {1, static_cast<int>(i)};
  members_.push_back(std::move(expert));
}

EngineSet::~EngineSet() = default;

EngineSet::Slot EngineSet::slot(int p) const {
  CANZONA_CHECK(p >= 0 && static_cast<std::size_t>(p) < slots_.size(), "param ", p, " of ",
                slots_.size());
  return slots_[static_cast<std::size_t>(p)];
}

Engine* EngineSet::engine_of(int p) {
  const Slot s = slot(p);
  return s.member < 0 ? nullptr : engines_[static_cast<std::size_t>(s.member)].get();
}

TypedSpan EngineSet::param(int p) {
  const Slot s = slot(p);
  if (s.member < 0) return {nullptr, 0, engines_.front()->param_dtype()};
  return engines_[static_cast<std::size_t>(s.member)]->param(s.index);
}

TypedSpan EngineSet::grad(int p) {
  const Slot s = slot(p);
  if (s.member < 0) return {nullptr, 0, engines_.front()->grad_dtype()};
  return engines_[static_cast<std::size_t>(s.member)]->grad(s.index);
}

void EngineSet::init_main_params() {
  for (auto& e : engines_) e->init_main_params();
}

void EngineSet::grad_ready(int p) {
  const Slot s = slot(p);
  CANZONA_CHECK(s.member >= 0, "grad_ready of param ", p, ", which this rank does not hold");
  engines_[static_cast<std::size_t>(s.member)]->grad_ready(s.index);
}

void EngineSet::progress() {
  for (auto& e : engines_) e->progress();
}

void EngineSet::zero_grads() {
  for (auto& e : engines_) e->zero_grads();
}

double EngineSet::finish_grad_sync() {
  double ms = 0.0;
  for (auto& e : engines_) ms += e->finish_grad_sync();
  return ms;
}

StepTimes EngineSet::step() {
  StepTimes sum;
  for (auto& e : engines_) {
    const StepTimes t = e->step();
    sum.opt += t.opt;
    sum.opt_comm += t.opt_comm;
    sum.opt_compute += t.opt_compute;
    sum.opt_cpu += t.opt_cpu;
  }
  return sum;
}

double EngineSet::start_param_sync() {
  double ms = 0.0;
  for (auto& e : engines_) ms += e->start_param_sync();
  return ms;
}

void EngineSet::finish() {
  for (auto& e : engines_) e->finish();
}

void EngineSet::set_lr_scale(double scale) {
  for (auto& e : engines_) e->set_lr_scale(scale);
}

void EngineSet::set_lr_scales(double matrix, double elementwise) {
  for (auto& e : engines_) e->set_lr_scales(matrix, elementwise);
}

double EngineSet::wait_cpu_ms() const {
  double ms = 0.0;
  for (const auto& e : engines_) ms += e->wait_cpu_ms();
  return ms;
}

std::int64_t EngineSet::state_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& e : engines_) bytes += e->state_bytes();
  return bytes;
}

int EngineSet::computed_tasks() const {
  int tasks = 0;
  for (const auto& e : engines_) tasks += e->computed_tasks();
  return tasks;
}

MemoryHeld EngineSet::memory_held() const {
  MemoryHeld sum;
  for (const auto& e : engines_) {
    const MemoryHeld m = e->memory_held();
    sum.params_bytes += m.params_bytes;
    sum.grads_bytes += m.grads_bytes;
    sum.optimizer_state_bytes += m.optimizer_state_bytes;
    sum.resident_bytes += m.resident_bytes;
  }
  return sum;
}

std::int64_t EngineSet::dp_bytes() const {
  std::int64_t bytes = 0;
  for (const Member& m : members_) bytes += m.grid->dp().bytes().total();
  return bytes;
}

std::int64_t EngineSet::tp_bytes() const {
  std::int64_t bytes = 0;
  for (const Member& m : members_) bytes += m.grid->tp().bytes().total();
  return bytes;
}

std::uint64_t EngineSet::params_fnv() {
  std::uint64_t hash = engines_[0]->params_fnv();
  for (std::size_t m = 1; m < engines_.size(); ++m) {
    const std::uint64_t fnv = engines_[m]->params_fnv();
    fnv1a_mix(hash, &fnv, sizeof fnv);
  }
  return hash;
}

std::vector<StateTensor> EngineSet::optimizer_state() {
  std::vector<StateTensor> all;
  for (auto& e : engines_)
    for (StateTensor& s : e->optimizer_state()) all.push_back(std::move(s));
  return all;
}

std::int64_t EngineSet::step_count() const {
  std::int64_t steps = 0;
  for (const auto& e : engines_) steps = std::max(steps, e->step_count());
  return steps;
}

void EngineSet::set_step_count(std::int64_t steps) {
  for (auto& e : engines_) e->set_step_count(steps);
}

void EngineSet::set_optimizer_state(const std::string& param, const std::string& state, int piece,
                                    std::int64_t begin, std::span<const float> values) {
  // Member 0's model is the whole model: the param's index there finds its engine.
  const std::vector<model::ParamSpec>& params = members_[0].model->params;
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (params[p].name != param) continue;
    const Slot s = slots_[p];
    CANZONA_REQUIRE(s.member >= 0, "optimizer state of '", param,
                    "': this rank holds none of it (another EP rank's expert)");
    return members_[static_cast<std::size_t>(s.member)].engine->set_optimizer_state(
        param, state, piece, begin, values);
  }
  throw UsageError(str("no param named '", param, "' in the model"));
}

}  // namespace canzona::engine
