#include "canzona/runtime/reference.h"

#include <cmath>

#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/optimizer_factory.h"
#include "canzona/engine/shard.h"
#include "canzona/optim/registry.h"
#include "synthetic.h"

namespace canzona::runtime {

struct ReferenceOptimizer::TaskState {
  int param = 0;
  engine::ShardMap map;  // the task's rows in the global matrix (tp = 1)
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> main;  // (rows, cols)
  std::vector<float> grad;  // (rows, cols)
};

ReferenceOptimizer::ReferenceOptimizer(const model::ModelSpec& model,
                                       const engine::EngineOptions& options,
                                       const std::vector<std::vector<float>>& params) {
  CANZONA_CHECK_EQ(params.size(), model.params.size());
  elementwise_.resize(model.params.size());
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    const model::ParamSpec& spec = model.params[p];
    CANZONA_CHECK_EQ(static_cast<std::int64_t>(params[p].size()), spec.numel());
    if (!spec.is_matrix()) {
      elementwise_[p] = engine::make_elementwise_optimizer(options, spec, 0, spec.numel());
      continue;
    }
    const int pieces = spec.pieces.empty() ? 1 : static_cast<int>(spec.pieces.size());
    for (int k = 0; k < pieces; ++k) {
      const int piece = spec.pieces.empty() ? -1 : k;
      auto task = std::make_unique<TaskState>();
      task->param = static_cast<int>(p);
      task->map = engine::shard_map(spec, piece, 1, 0);
      task->optimizer = engine::make_matrix_optimizer(options, spec, piece);
      task->main.resize(static_cast<std::size_t>(task->map.task_rows * task->map.task_cols));
      task->grad.resize(task->main.size());
      engine::local_to_task(task->map, params[p].data(), task->main.data());
      tasks_.push_back(std::move(task));
    }
  }
}

ReferenceOptimizer::~ReferenceOptimizer() = default;

void ReferenceOptimizer::set_lr_scale(double scale) {
  for (auto& task : tasks_) task->optimizer->set_lr_scale(scale);
  for (auto& e : elementwise_)
    if (e) e->set_lr_scale(scale);
}

void ReferenceOptimizer::step(std::vector<std::vector<float>>& params,
                              const std::vector<std::vector<float>>& grads) {
  for (auto& task : tasks_) {
    engine::local_to_task(task->map, grads[task->param].data(), task->grad.data());
    const optim::ParamInfo& info = task->optimizer->param();
    task->optimizer->step(optim::matrix_view(task->main.data(), info.rows, info.cols),
                          optim::matrix_view(task->grad.data(), info.rows, info.cols));
    engine::task_to_local(task->map, task->main.data(), params[task->param].data());
  }
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (!elementwise_[p]) continue;
    const std::int64_t n = static_cast<std::int64_t>(params[p].size());
    elementwise_[p]->step(optim::matrix_view(params[p].data(), 1, n),
                          optim::matrix_view(grads[p].data(), 1, n));
  }
}

Reference::Reference(const model::ModelSpec& model, const RunOptions& options)
    : model_(model), options_(options) {
  params_.resize(model.params.size());
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    const model::ParamSpec& spec = model.params[p];
    params_[p].resize(static_cast<std::size_t>(spec.numel()));
    fill_init(spec, static_cast<int>(p), 1, 0, options.seed, params_[p]);
  }
  optimizer_ = std::make_unique<ReferenceOptimizer>(model, engine_options(options), params_);
}

Reference::~Reference() = default;

void Reference::run_until(int step_number) {
  while (steps_taken_ < step_number) step(++steps_taken_);
}

void Reference::step(int step_number) {
  std::vector<std::vector<float>>& grads = grads_;
  grads.resize(model_.params.size());
  abs_sums_.resize(model_.params.size());
  std::vector<float> local;
  // Megatron's gradient_scaling_factor, written here independently of the runtime: 1/DP in fp32,
  // for the expert params of a MoE model too (expert_gradient_scaling_factor), whose gradients
  // come from the expert DP ranks: dp x tp / (ep x etp) of them.
  const float scale = 1.0f / static_cast<float>(options_.dp);
  const bool moe = model::has_experts(model_);
  const int expert_dp = options_.dp * options_.tp / (options_.ep * options_.etp);
  for (std::size_t p = 0; p < model_.params.size(); ++p) {
    const model::ParamSpec& spec = model_.params[p];
    std::vector<float>& sum = grads[p];
    std::vector<float>& abs_sum = abs_sums_[p];
    sum.assign(static_cast<std::size_t>(spec.numel()), 0.0f);
    abs_sum.assign(sum.size(), 0.0f);
    local.resize(sum.size());
    // The reduced gradient: scaled local gradients summed in DP rank order, as kDeterministic
    // does: ((x_0 + x_1) + x_2) + ...
    const int contributions = moe && model::is_expert_param(spec) ? expert_dp : options_.dp;
    for (int d = 0; d < contributions; ++d) {
      fill_grad(spec, static_cast<int>(p), 1, 0, options_.seed, step_number, d, local);
      for (std::size_t i = 0; i < sum.size(); ++i) {
        const float x = local[i] * scale;
        sum[i] = d == 0 ? x : sum[i] + x;
        abs_sum[i] += std::fabs(x);
      }
    }
  }
  optimizer_->step(params_, grads);
}

}  // namespace canzona::runtime
