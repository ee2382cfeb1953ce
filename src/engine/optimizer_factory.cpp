// The engine's optimizer factory (optimizer_factory.h).
#include "canzona/engine/optimizer_factory.h"

#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/shard.h"
#include "canzona/optim/registry.h"

namespace canzona::engine {

optim::ParamInfo task_info(const model::ParamSpec& param, int piece) {
  optim::ParamInfo info;
  if (!param.is_matrix()) {
    info.name = param.name;
    info.rows = 1;
    info.cols = param.numel();
    return info;
  }
  const ShardMap whole = shard_map(param, piece, 1, 0);
  info.name = piece < 0 ? param.name : param.name + ":" + param.pieces[piece].name;
  info.rows = whole.task_rows;
  info.cols = whole.task_cols;
  info.full_rows = param.rows();
  info.full_cols = param.cols();
  return info;
}

std::unique_ptr<optim::Optimizer> make_matrix_optimizer(const EngineOptions& options,
                                                        const model::ParamSpec& param, int piece) {
  const optim::OptimizerDescriptor& d = optim::find_optimizer(options.optimizer);
  CANZONA_REQUIRE(d.shape == optim::OptimizerShape::kMatrix, "optimizer '", options.optimizer,
                  "' is element-wise, not a matrix optimizer");
  return d.make(task_info(param, piece), options.optimizer_options, nullptr);
}

std::unique_ptr<optim::Optimizer> make_elementwise_optimizer(const EngineOptions& options,
                                                             const model::ParamSpec& param,
                                                             std::int64_t begin,
                                                             std::int64_t numel) {
  optim::ParamInfo info;
  info.name = str(param.name, "[", begin, ":", begin + numel, "]");
  info.rows = 1;
  info.cols = numel;
  return optim::create_optimizer(cost::kElementwiseOptimizer, info, options.adamw_options);
}

}  // namespace canzona::engine
