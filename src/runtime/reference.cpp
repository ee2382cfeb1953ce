#include "canzona/runtime/reference.h"

#include <cmath>

#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/optimizer_factory.h"
#include "canzona/engine/shard.h"
#include "canzona/optim/registry.h"
#include "synthetic.h"

namespace canzona::runtime {

Reference::Reference(const model::ModelSpec& model, const RunOptions& options)
    : model_(model), options_(options) {
  params_.resize(model.params.size());
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    const model::ParamSpec& spec = model.params[p];
    params_[p].resize(static_cast<std::size_t>(spec.numel()));
    fill_init(spec, static_cast<int>(p), 1, 0, options.seed, params_[p]);
    // A bf16 model holds its init rounded to bf16; its fp32 main params start from those values.
    if (options.precision == DType::kBF16)
      for (float& x : params_[p]) x = round_to_bf16(x);
  }
  if (options.precision == DType::kBF16) main_ = params_;
  optimizer_ = std::make_unique<engine::ReferenceOptimizer>(model, engine_options(options),
                                                            main_.empty() ? params_ : main_);
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
  const float scale = 1.0f / static_cast<float>(options_.dims.dp);
  // Under bf16 a model's local gradient is bf16; it is scaled and reduced in bf16 (the sum in
  // fp32, rounded once) unless --grad-reduce-in-fp32 keeps both in fp32.
  const bool bf16_model = options_.precision == DType::kBF16;
  const bool bf16_reduce = bf16_model && !options_.grad_reduce_in_fp32;
  const bool moe = model::has_experts(model_);
  const int expert_dp = options_.dims.edp();
  for (std::size_t p = 0; p < model_.params.size(); ++p) {
    const model::ParamSpec& spec = model_.params[p];
    std::vector<float>& sum = grads[p];
    std::vector<float>& abs_sum = abs_sums_[p];
    sum.assign(static_cast<std::size_t>(spec.numel()), 0.0f);
    abs_sum.assign(sum.size(), 0.0f);
    local.resize(sum.size());
    // The reduced gradient: scaled local gradients summed in DP rank order, as kDeterministic
    // does: ((x_0 + x_1) + x_2) + ...
    const int contributions = moe && model::is_expert_param(spec) ? expert_dp : options_.dims.dp;
    for (int d = 0; d < contributions; ++d) {
      fill_grad(spec, static_cast<int>(p), 1, 0, options_.seed, step_number, d, local);
      for (std::size_t i = 0; i < sum.size(); ++i) {
        const float g = bf16_model ? round_to_bf16(local[i]) : local[i];
        const float x = bf16_reduce ? round_to_bf16(g * scale) : g * scale;
        sum[i] = d == 0 ? x : sum[i] + x;
        abs_sum[i] += std::fabs(x);
      }
    }
    if (bf16_reduce)
      for (float& x : sum) x = round_to_bf16(x);
  }
  if (main_.empty()) {
    optimizer_->step(params_, grads);
    return;
  }
  // The update goes to the fp32 main params; the bf16 params are re-cast from them.
  optimizer_->step(main_, grads);
  for (std::size_t p = 0; p < main_.size(); ++p)
    for (std::size_t i = 0; i < main_[p].size(); ++i) params_[p][i] = round_to_bf16(main_[p][i]);
}

}  // namespace canzona::runtime
