// ReferenceOptimizer: the reference's optimizer on whole matrices (reference_optimizer.h).
#include "canzona/engine/reference_optimizer.h"

#include "canzona/common/error.h"
#include "canzona/engine/optimizer_factory.h"
#include "canzona/engine/shard.h"
#include "canzona/optim/matrix.h"

namespace canzona::engine {

struct ReferenceOptimizer::TaskState {
  int param = 0;
  ShardMap map;  // the task's rows in the global matrix (tp = 1)
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> main;  // (rows, cols)
  std::vector<float> grad;  // (rows, cols)
};

ReferenceOptimizer::ReferenceOptimizer(const model::ModelSpec& model, const EngineOptions& options,
                                       const std::vector<std::vector<float>>& params) {
  CANZONA_CHECK_EQ(params.size(), model.params.size());
  elementwise_.resize(model.params.size());
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    const model::ParamSpec& spec = model.params[p];
    CANZONA_CHECK_EQ(static_cast<std::int64_t>(params[p].size()), spec.numel());
    if (!spec.is_matrix()) {
      elementwise_[p] = make_elementwise_optimizer(options, spec, 0, spec.numel());
      continue;
    }
    const int pieces = spec.pieces.empty() ? 1 : static_cast<int>(spec.pieces.size());
    for (int k = 0; k < pieces; ++k) {
      const int piece = spec.pieces.empty() ? -1 : k;
      auto task = std::make_unique<TaskState>();
      task->param = static_cast<int>(p);
      task->map = shard_map(spec, piece, 1, 0);
      task->optimizer = make_matrix_optimizer(options, spec, piece);
      task->main.resize(static_cast<std::size_t>(task->map.task_rows * task->map.task_cols));
      task->grad.resize(task->main.size());
      local_to_task(task->map, params[p].data(), task->main.data());
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
    local_to_task(task->map, grads[task->param].data(), task->grad.data());
    const optim::ParamInfo& info = task->optimizer->param();
    task->optimizer->step(optim::matrix_view(task->main.data(), info.rows, info.cols),
                          optim::matrix_view(task->grad.data(), info.rows, info.cols));
    task_to_local(task->map, task->main.data(), params[task->param].data());
  }
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (!elementwise_[p]) continue;
    const std::int64_t n = static_cast<std::int64_t>(params[p].size());
    elementwise_[p]->step(optim::matrix_view(params[p].data(), 1, n),
                          optim::matrix_view(grads[p].data(), 1, n));
  }
}

}  // namespace canzona::engine
