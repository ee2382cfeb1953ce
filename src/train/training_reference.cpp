// The single-process training reference (trainer.h: run_reference).
#include <algorithm>
#include <cstring>

#include "canzona/common/error.h"
#include "canzona/engine/reference_optimizer.h"
#include "canzona/train/model.h"
#include "canzona/train/trainer.h"

namespace canzona::train {

ReferenceRun run_reference(const model::TransformerConfig& config, const model::ModelSpec& spec,
                           const TrainOptions& options, const Corpus& corpus) {
  TrainOptions single = options;
  single.job.dims.tp = 1;
  const model::ModelSpec whole = training_spec(config, single);
  CANZONA_REQUIRE(whole.arch.padded_vocab_size == spec.arch.padded_vocab_size,
                  "the single-process reference pads the vocabulary to ",
                  whole.arch.padded_vocab_size, ", the TP run to ", spec.arch.padded_vocab_size,
                  ": not comparable");
  const int dp = options.job.dims.dp;
  // --precision bf16 (docs/precision.md), written here from Megatron's recipe: the model's params
  // and gradients are bf16 (`model_params`, `local`), each the rounding of an fp32 value; the
  // optimizer steps fp32 main params (`params`, starting from the bf16 init widened) and the
  // model's params are re-cast from them; a rank's gradient is scaled and summed in bf16 (the
  // sum in fp32, rounded once), or with --grad-reduce-in-fp32 accumulated, scaled and summed in
  // fp32 (`local_f32`, the model's main_grad).
  const bool bf16_model = options.job.precision == DType::kBF16;
  const bool bf16_reduce = bf16_model && !options.job.grad_reduce_in_fp32;
  Qwen3Model model(config, whole, TpGroup{}, Qwen3Model::Storage::kBound, {}, {},
                   options.job.precision);
  std::vector<std::vector<float>> params(whole.params.size()), grads(whole.params.size()),
      local(whole.params.size());
  std::vector<std::vector<bf16>> model_params(bf16_model ? whole.params.size() : 0),
      local_bf16(bf16_reduce ? whole.params.size() : 0);
  for (std::size_t p = 0; p < whole.params.size(); ++p) {
    const std::size_t n = static_cast<std::size_t>(whole.params[p].numel());
    params[p].resize(n);
    local[p].resize(n);
    grads[p].resize(n);
    init_param(whole.params[p], config, 1, 0, options.job.seed, params[p]);
    if (!bf16_model) {
      model.bind(static_cast<int>(p), params[p], local[p]);
      continue;
    }
    model_params[p].resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      model_params[p][i] = to_bf16(params[p][i]);
      params[p][i] = to_float(model_params[p][i]);
    }
    if (bf16_reduce) {
      local_bf16[p].resize(n);
      model.bind(static_cast<int>(p), model_params[p], local_bf16[p]);
    } else {
      model.bind(static_cast<int>(p), model_params[p], local[p]);
    }
  }
  engine::ReferenceOptimizer optimizer(whole, launch::engine_options(options.job), params);
  const Sampler sampler(corpus.train, options.seq_len, options.micro_batch, options.grad_accum,
                        options.job.seed);
  // Megatron's gradient_scaling_factor, 1/DP in fp32, and the loss average, written here
  // independently of the engine and the trainer.
  const float scale = 1.0f / static_cast<float>(dp);
  const float inv_accum = 1.0f / static_cast<float>(options.grad_accum);
  ReferenceRun out;
  for (std::int64_t step = 1; step <= options.steps; ++step) {
    float loss_sum = 0.0f;
    for (int d = 0; d < dp; ++d) {
      for (auto& g : local) std::memset(g.data(), 0, g.size() * sizeof(float));
      for (auto& g : local_bf16) std::fill(g.begin(), g.end(), bf16{});
      float rank_loss = 0.0f;
      for (std::int64_t m = 0; m < options.grad_accum; ++m) {
        const Batch b = sampler.batch(step, d, static_cast<int>(m));
        const torch::Tensor inputs = torch::from_blob(const_cast<std::int64_t*>(b.inputs.data()),
                                                      {b.micro_batch, b.seq_len}, torch::kInt64);
        const torch::Tensor targets = torch::from_blob(const_cast<std::int64_t*>(b.targets.data()),
                                                       {b.micro_batch, b.seq_len}, torch::kInt64);
        torch::Tensor loss = model.token_losses(inputs, targets).mean() * inv_accum;
        rank_loss += loss.item<float>();
        // HF Qwen3-MoE adds router_aux_loss_coef x the load-balancing loss to what it
        // differentiates; the language-model loss alone is reported.
        const torch::Tensor balance = model.load_balancing_loss();
        if (balance.defined())
          loss = loss + balance * (static_cast<float>(config.router_aux_loss_coef) * inv_accum);
        loss.backward();
      }
      loss_sum = d == 0 ? rank_loss : loss_sum + rank_loss;
      for (std::size_t p = 0; p < grads.size(); ++p)
        for (std::size_t i = 0; i < grads[p].size(); ++i) {
          const float x = bf16_reduce ? to_float(to_bf16(to_float(local_bf16[p][i]) * scale))
                                      : local[p][i] * scale;
          grads[p][i] = d == 0 ? x : grads[p][i] + x;
        }
    }
    if (bf16_reduce)
      for (auto& g : grads)
        for (float& x : g) x = to_float(to_bf16(x));
    out.losses.push_back(static_cast<double>(loss_sum / static_cast<float>(dp)));
    optimizer.set_lr_scale(lr_factor(options.schedule, step));
    optimizer.step(params, grads);
    for (std::size_t p = 0; p < model_params.size(); ++p)
      for (std::size_t i = 0; i < params[p].size(); ++i) model_params[p][i] = to_bf16(params[p][i]);
  }
  if (bf16_model)  // the run's params are the bf16 ones (widened), not the main copies
    for (std::size_t p = 0; p < model_params.size(); ++p)
      for (std::size_t i = 0; i < params[p].size(); ++i)
        params[p][i] = to_float(model_params[p][i]);
  out.params = std::move(params);
  return out;
}

}  // namespace canzona::train
