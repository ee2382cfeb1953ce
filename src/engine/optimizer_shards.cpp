#include "optimizer_shards.h"

#include <algorithm>
#include <cmath>

#include "canzona/common/error.h"
#include "canzona/engine/optimizer_factory.h"

namespace canzona::engine {

OptimizerShards::OptimizerShards(const RankContext& context, ParamBuffers& buffers,
                                 const GradSync& grads)
    : context_(context), buffers_(buffers), grads_(grads) {
  const plan::StagePlan& stage = context.stage;
  computed_of_task_.assign(stage.tasks.size(), -1);
  std::size_t largest = 0;
  for (const plan::RankTask& rt : context.rank_plan.tasks) {
    const plan::Task& task = stage.tasks[rt.task];
    const model::ParamSpec& spec = context.model.params[task.param];
    ComputedTask t;
    t.task = rt.task;
    t.param = task.param;
    t.piece = task.piece;
    t.role = rt.role;
    const bool tp_gathered =
        t.role == plan::TaskRole::kOwnerGathered && context.tp > 1 && spec.tp_split_dim >= 0;
    if (t.role == plan::TaskRole::kLocal ||
        (t.role == plan::TaskRole::kOwnerGathered && !tp_gathered)) {
      t.maps.push_back(shard_map(spec, task.piece, context.tp, context.tp_rank));
    } else {
      for (int q = 0; q < context.tp; ++q)
        t.maps.push_back(shard_map(spec, task.piece, context.tp, q));
    }
    t.optimizer = make_matrix_optimizer(context.options, spec, task.piece);
    t.main.assign(static_cast<std::size_t>(t.optimizer->param().numel()), 0.0f);
    largest = std::max(largest, t.main.size());
    computed_of_task_[rt.task] = static_cast<int>(tasks_.size());
    tasks_.push_back(std::move(t));
  }
  const bool fp32_params = buffers.param_dtype() == DType::kF32;
  const bool fp32_grads = buffers.grad_dtype() == DType::kF32;
  for (const plan::ElementwiseUpdate& u : context.rank_plan.elementwise) {
    ElementwiseSlice slice;
    slice.param = u.param;
    slice.begin = u.begin;
    slice.values = buffers.param(u.param).ptr() + u.begin;
    slice.grad = grads.reduced_grad(u.param, u.begin);
    slice.numel = u.end - u.begin;
    slice.optimizer = make_elementwise_optimizer(context.options, context.model.params[u.param],
                                                 u.begin, slice.numel);
    if (!fp32_params) slice.main.assign(static_cast<std::size_t>(slice.numel), 0.0f);
    if (!fp32_grads) largest = std::max(largest, static_cast<std::size_t>(slice.numel));
    elementwise_.push_back(std::move(slice));
  }
  scratch_.assign(largest, 0.0f);
}

ComputedTask& OptimizerShards::task(int stage_task) {
  const int i = computed_of_task_.at(stage_task);
  CANZONA_CHECK(i >= 0, "task ", stage_task, " is not computed on this rank");
  return tasks_[i];
}

void OptimizerShards::init_local_main() {
  for (ComputedTask& t : tasks_)
    if (t.role == plan::TaskRole::kLocal)
      local_to_task(t.maps[0], buffers_.param(t.param).ptr(), t.main.data());
  for (ElementwiseSlice& s : elementwise_)
    if (!s.main.empty()) copy_cast(s.values, s.main.data(), s.numel);
}

void OptimizerShards::step_local(Trace& trace) {
  TraceScope work(trace, "optimizer", "element-wise + local tasks");
  for (ElementwiseSlice& s : elementwise_) {
    const float* grad = s.grad.dtype() == DType::kF32 ? s.grad.as<float>() : scratch_.data();
    if (s.grad.dtype() != DType::kF32) copy_cast(s.grad, scratch_.data(), s.numel);
    s.optimizer->step(optim::matrix_view(s.main_values(), 1, s.numel),
                      optim::matrix_view(grad, 1, s.numel));
    if (!s.main.empty()) copy_cast(s.main.data(), s.values, s.numel);
  }
  for (ComputedTask& t : tasks_) {
    if (t.role != plan::TaskRole::kLocal) continue;
    local_to_task(t.maps[0], grads_.reduced_grad(t.param), scratch_.data());
    step_task(t, scratch_.data());
  }
}

void OptimizerShards::step_task(ComputedTask& t, const float* full_grad) {
  const optim::ParamInfo& info = t.optimizer->param();
  t.optimizer->step(optim::matrix_view(t.main.data(), info.rows, info.cols),
                    optim::matrix_view(full_grad, info.rows, info.cols));
  if (t.role == plan::TaskRole::kHosted || t.role == plan::TaskRole::kOwnerGathered) return;
  const ShardMap& own = t.role == plan::TaskRole::kLocal ? t.maps[0] : t.maps[context_.tp_rank];
  task_to_local(own, t.main.data(), buffers_.param(t.param).ptr());
}

std::int64_t OptimizerShards::state_bytes() const {
  std::int64_t bytes = 0;
  for (const ComputedTask& t : tasks_)
    bytes += static_cast<std::int64_t>(t.optimizer->state_bytes() + t.main.size() * sizeof(float));
  for (const ElementwiseSlice& s : elementwise_)
    bytes += static_cast<std::int64_t>(s.optimizer->state_bytes() + s.main.size() * sizeof(float));
  return bytes;
}

std::vector<StateTensor> OptimizerShards::state() {
  std::vector<StateTensor> out;
  for (ComputedTask& t : tasks_) {
    const optim::ParamInfo& info = t.optimizer->param();
    StateTensor main;
    main.param = context_.model.params[t.param].name;
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
  for (ElementwiseSlice& e : elementwise_) {
    if (!e.main.empty()) {
      StateTensor main;
      main.param = context_.model.params[e.param].name;
      main.state = "main";
      main.begin = e.begin;
      main.end = e.begin + e.numel;
      main.rows = 1;
      main.cols = e.numel;
      main.values = e.main;
      out.push_back(main);
    }
    for (const optim::NamedState& s : e.optimizer->state()) {
      StateTensor tensor;
      tensor.param = context_.model.params[e.param].name;
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

std::int64_t OptimizerShards::step_count() const {
  if (!tasks_.empty()) return tasks_.front().optimizer->step_count();
  if (!elementwise_.empty()) return elementwise_.front().optimizer->step_count();
  return 0;
}

void OptimizerShards::set_lr_scales(double matrix, double elementwise) {
  for (double scale : {matrix, elementwise})
    CANZONA_REQUIRE(std::isfinite(scale) && scale >= 0.0, "lr scale ", scale,
                    " must be finite and >= 0");
  for (ComputedTask& t : tasks_) t.optimizer->set_lr_scale(matrix);
  for (ElementwiseSlice& e : elementwise_) e.optimizer->set_lr_scale(elementwise);
}

void OptimizerShards::set_step_count(std::int64_t steps) {
  for (ComputedTask& t : tasks_) t.optimizer->set_step_count(steps);
  for (ElementwiseSlice& e : elementwise_) e.optimizer->set_step_count(steps);
}

}  // namespace canzona::engine
