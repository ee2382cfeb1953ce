// The single-process training reference (trainer.h: run_reference).
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
  Qwen3Model model(config, whole, TpGroup{}, Qwen3Model::Storage::kBound);
  std::vector<std::vector<float>> params(whole.params.size()), grads(whole.params.size()),
      local(whole.params.size());
  for (std::size_t p = 0; p < whole.params.size(); ++p) {
    const std::size_t n = static_cast<std::size_t>(whole.params[p].numel());
    params[p].resize(n);
    local[p].resize(n);
    grads[p].resize(n);
    init_param(whole.params[p], config, 1, 0, options.job.seed, params[p]);
    model.bind(static_cast<int>(p), params[p], local[p]);
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
          const float x = local[p][i] * scale;
          grads[p][i] = d == 0 ? x : grads[p][i] + x;
        }
    }
    out.losses.push_back(static_cast<double>(loss_sum / static_cast<float>(dp)));
    optimizer.set_lr_scale(lr_factor(options.schedule, step));
    optimizer.step(params, grads);
  }
  out.params = std::move(params);
  return out;
}

}  // namespace canzona::train
