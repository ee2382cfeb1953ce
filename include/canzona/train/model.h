// The Qwen3 decoder in libtorch with Megatron-style tensor parallelism (docs/design.md
// section 2 `train`), built from the same ModelSpec the planner uses.
//
// Architecture (HF Qwen3): token embedding; per layer: RMSNorm -> attention (fused QKV,
// grouped-query heads, per-head RMSNorm of q and k, RoPE with theta from the config, causal
// softmax in query blocks (src/train/attention.h), output projection) -> residual; RMSNorm ->
// SwiGLU MLP (down(silu(gate) * up)) -> residual; final RMSNorm; output layer (or the embedding
// when tied). Qwen2-style QKV bias is supported; no other biases. RMSNorm, SwiGLU and the attention
// input (split into heads, qk-norm, RoPE) are the fused kernels of src/train/fused.h.
//
// Params are the ModelSpec's, by Megatron name and TP-local shape (model/transformer.cpp):
// `embedding.word_embeddings.weight` [V/T, h] and `output_layer.weight` [V/T, h] vocabulary
// parallel; `linear_qkv.weight` [(H + 2G) d / T, h] column parallel, rows grouped per query group
// as [q heads of the group | k | v]; `linear_fc1.weight` [2f/T, h] = [gate_t; up_t]; row-parallel
// `linear_proj.weight` [h, H d / T] and `linear_fc2.weight` [h, f / T]; RMSNorm weights fused into
// the next linear's name (`linear_qkv.layer_norm_weight`, `linear_fc1.layer_norm_weight`) as in
// Megatron with Transformer Engine; `q_layernorm` / `k_layernorm` [d], replicated, applied to this
// rank's heads only, so their gradient is summed over TP (copy_to_tp on the weight).
//
// Mixture of experts (Qwen3-MoE, HF Qwen3MoeDecoderLayer): a MoE layer's MLP is RMSNorm
// (`pre_mlp_layernorm.weight`) -> the sparse block of train/moe.h (router `mlp.router.weight`
// [E, h], replicated over TP; experts `mlp.experts.local_experts.<e>.linear_fc{1,2}.weight`,
// whole on the EP rank that holds them: expert TP 1). The model of EP rank r of an EP group of
// size P holds experts [r E / P, (r + 1) E / P); the spec's other experts are not its params
// (holds() is false). Every TP rank routes all tokens; each sends its share of them
// (tp_layers.h: split_rows_to_tp) through the EP dispatch, and the outputs are gathered back.
//
// Storage. Every param is a leaf tensor over external memory (bind): the engine's param buffer,
// and its .grad a view of the engine's gradient buffer, so backward accumulates straight into the
// Megatron-layout buffer and nothing is copied. Unbound params use memory the model owns.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canzona/model/load.h"
#include "canzona/model/spec.h"
#include "canzona/train/moe.h"
#include "canzona/train/tp_layers.h"

namespace canzona::train {

// One pipeline stage of the model, split as the planner splits it (model::assign_stages): the
// layers evenly, or `layout[s]` on stage s (--pp-layout, model::stage_bounds); the embedding on
// the first stage; the final norm and the output layer on the last, which for tied embeddings
// reads its own copy of the word embedding (the plan's last-stage copy,
// plan::Plan::tied_embedding).
struct PipelineStage {
  int index = 0;
  int count = 1;
  std::vector<int> layout;  // layers per stage; empty: even
  bool first() const { return index == 0; }
  bool last() const { return index + 1 == count; }
};

class Qwen3Model {
 public:
  // Checks that the model's params and spec.params are one list: the same names, each with the
  // TP-local shape spec.params[p].local_shape(tp.size). Throws UsageError naming the first param
  // the model lacks, the spec lacks, or whose shape differs (both shapes). With kOwned the model
  // allocates (zeroed) memory for every param and gradient; with kBound it allocates none and
  // every param must be bind()-ed before use (the trainer binds the engine's buffers, so the
  // model never holds a second copy of the weights, not even while it is built).
  // A MoE model takes its EP group (`ep`; size 1: every expert here); a dense one refuses EP > 1.
  // A model of one pipeline stage (`stage`) holds that stage's params only; the spec's others are
  // not its params (holds() is false). Throws UsageError as model::stage_bounds (a layout that
  // does not fit the layers).
  enum class Storage { kOwned, kBound };
  // `dtype` is the params', their gradients' and the activations' (docs/precision.md: bf16
  // products accumulate in fp32 and round once; norms, softmax, RoPE, SwiGLU and the loss compute
  // in fp32 on widened values; activations between layers are bf16).
  Qwen3Model(const model::TransformerConfig& config, const model::ModelSpec& spec, TpGroup tp,
             Storage storage = Storage::kOwned, EpGroup ep = {}, PipelineStage stage = {},
             DType dtype = DType::kF32);
  ~Qwen3Model();
  Qwen3Model(const Qwen3Model&) = delete;
  Qwen3Model& operator=(const Qwen3Model&) = delete;

  int num_params() const;  // the spec's, held or not
  const PipelineStage& stage() const;
  // Whether spec param p is this model's (false for another EP rank's experts and another
  // stage's params).
  bool holds(int p) const;
  // Leaf tensor of spec param p (TP-local shape), requires_grad. Throws Error unless holds(p).
  torch::Tensor& param(int p);
  DType dtype() const;
  // Makes param p a view of `value` and its gradient a view of `grad` (local numel each; the
  // gradient accumulates there in place). The values are not changed. `value` has the model's
  // dtype; `grad` too, or fp32 in a bf16 model (--grad-reduce-in-fp32, Megatron's main_grad):
  // then each backward's bf16 gradient is added into `grad` in fp32 right after autograd
  // accumulated it, by a hook on the param's accumulator that runs before any hook added later,
  // and param(p).grad() is left undefined.
  void bind(int p, TypedSpan value, TypedSpan grad);
  // Makes param p a view of `value` with no gradient buffer: each backward's gradient of it is
  // param(p).grad(), autograd's own tensor (the last stage's tied-embedding copy, whose gradient
  // goes to the first stage after every micro-batch).
  void bind_value(int p, TypedSpan value);
  // The forward reads params segment by segment: the embedding; per layer its attention
  // (qkv norm, qkv weight and bias, q/k norms, output projection), then its MLP (fc1 norm, fc1,
  // fc2; a MoE layer: pre-MLP norm, router, this EP rank's experts' fc1 and fc2 in expert order);
  // the final norm with the output layer (or the tied embedding again). Spec indices.
  const std::vector<std::vector<int>>& forward_segments() const;
  // Hooks around each segment s (index into forward_segments): before_forward before its first
  // read, after_forward after its last; before_backward when a backward reaches the segment's
  // output, before any of its own backward runs (set only when gradients are recorded). A read of
  // a param outside the running segment throws Error (the schedule would not have gathered it).
  struct SegmentHooks {
    std::function<void(int)> before_forward;
    std::function<void(int)> after_forward;
    std::function<void(int)> before_backward;
    std::function<void()> poll;  // before every param read: lets collectives in flight progress
  };
  void set_segment_hooks(SegmentHooks hooks);

  // Per-token next-token loss [B * S] of inputs/targets [B, S] (int64 token ids < padded
  // vocabulary), identical on every TP rank. The whole model (one stage) only.
  torch::Tensor token_losses(const torch::Tensor& inputs, const torch::Tensor& targets);
  // This stage's forward: `input` is the token ids [B, S] on the first stage, the previous
  // stage's output [B, S, hidden] (of the model's dtype) elsewhere; returns the hidden state [B, S,
  // hidden] for the next stage, or on the last stage the per-token losses [B * S] of `targets`.
  torch::Tensor stage_forward(const torch::Tensor& input, const torch::Tensor& targets);
  // This rank's logits columns [B, S, V/T] (tests).
  torch::Tensor local_logits(const torch::Tensor& inputs);
  // Hugging Face's load-balancing loss (moe.h) of the last forward's MoE layers, over that
  // forward's tokens, autograd-connected to the routers (identical on every TP rank); undefined
  // for a dense model. The training loss adds router_aux_loss_coef times it.
  torch::Tensor load_balancing_loss() const;
  // The last forward's routing over this stage's MoE layers (moe.h: stage_routing); undefined
  // tensors for a dense model or a stage without MoE layers.
  StageRouting stage_routing() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Initial value of the TP-local shard `tp_rank` of spec param `param` (local numel floats into
// `out`), independent of the TP degree: every element is drawn from a counter-based normal
// generator of (seed, param name, the element's logical index), where the logical index counts
// rows of the un-split weight in HF order (fc1: all gate rows, then all up rows). Weights
// N(0, 0.02), Megatron's scaled init N(0, 0.02 / sqrt(2 layers)) for linear_proj and linear_fc2,
// RMSNorm weights 1, biases 0. Throws UsageError when out has the wrong size.
void init_param(const model::ParamSpec& param, const model::TransformerConfig& config, int tp,
                int tp_rank, std::uint64_t seed, std::span<float> out);

// Shard tp_rank of a global (tp = 1 layout) tensor of `param`: the rows / columns / elements the
// rank holds, applying fc1's [gate_t; up_t] interleave. Used to compare a TP run with a single
// process. `global` has param.numel() elements; returns local numel.
std::vector<float> shard_of(const model::ParamSpec& param, int tp, int tp_rank,
                            std::span<const float> global);

}  // namespace canzona::train
