// Where the bytes of a Megatron-layout model live in a Hugging Face-layout checkpoint
// (checkpoint.h): every element of every TP shard of every spec param is one element of one HF
// tensor of full, un-sharded shape, so a checkpoint does not depend on DP, TP or strategy.
//
// Names (HF Qwen3 / Qwen2 / Llama, `model.layers.<i>.` written L.):
//   embedding.word_embeddings.weight          model.embed_tokens.weight [V_pad, h]
//   L.self_attention.linear_qkv.layer_norm_weight  L.input_layernorm.weight [h]
//   L.self_attention.linear_qkv.weight (bias)      L.self_attn.{q,k,v}_proj.weight (bias)
//   L.self_attention.q_layernorm / k_layernorm     L.self_attn.q_norm / k_norm.weight [d]
//   L.self_attention.linear_proj.weight            L.self_attn.o_proj.weight [h, H d]
//   L.mlp.linear_fc1.layer_norm_weight             L.post_attention_layernorm.weight [h]
//   L.mlp.linear_fc1.weight                        L.mlp.{gate,up}_proj.weight [f, h]
//   L.mlp.linear_fc2.weight                        L.mlp.down_proj.weight [h, f]
//   MoE layers (Qwen3-MoE, expert e):
//   L.pre_mlp_layernorm.weight                     L.post_attention_layernorm.weight [h]
//   L.mlp.router.weight                            L.mlp.gate.weight [E, h]
//   L.mlp.experts.local_experts.<e>.linear_fc1.weight  L.mlp.experts.<e>.{gate,up}_proj.weight
//   L.mlp.experts.local_experts.<e>.linear_fc2.weight  L.mlp.experts.<e>.down_proj.weight
//   decoder.final_layernorm.weight                 model.norm.weight [h]
//   output_layer.weight                            lm_head.weight [V_pad, h]
// The fused QKV's rows are grouped per query group ([q x H/G | k | v] per group, model/load.h);
// q_proj holds the q heads in head order, k_proj and v_proj the groups in order. The vocabulary
// keeps its Megatron padding (V_pad rows; config.json's vocab_size says V_pad).
//
// Matrix-optimizer state is per task (model/spec.h): a task's name is the HF tensor it is (q, k,
// v, gate and up pieces; o_proj, down_proj), `L.self_attn.qkv_proj.weight` for an unsplit QKV
// (grouped row order), `L.mlp.gate_up_proj.weight` for an unsplit fc1 (an expert's:
// `L.mlp.experts.<e>.gate_up_proj.weight`),
// `L.self_attn.q_proj.weight.head7` for per-head pieces. An unsplit fc1's task rows follow the TP
// degree ([gate_0; up_0; gate_1; up_1; ...], Megatron's shard layout); checkpoints store its state
// in the logical [gate; up] row order (task_logical_rows), so it moves to any TP.
//
// A param-list model (a user's own PyTorch module through the Python package) has no Hugging Face
// names to map to: under Naming::kOwn every param is one tensor of its own name and full shape (a
// PyTorch state_dict's names) and a task is named after its param (`<param>.<piece>` for a piece).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canzona/model/spec.h"

namespace canzona::ckpt {

struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // full shape
  std::int64_t numel() const;
};

// `count` consecutive local elements of a shard, from local element `local`, are elements
// [hf, hf + count) (row-major) of HF tensor `tensor`.
struct ElementRun {
  int tensor = 0;
  std::int64_t local = 0;
  std::int64_t hf = 0;
  std::int64_t count = 0;
};

// How params are named in a checkpoint: kHuggingFace for the transformer (presets, config.json),
// kOwn for a param list (each param under its own name).
enum class Naming { kHuggingFace, kOwn };

class HfLayout {
 public:
  // Under kHuggingFace throws UsageError naming the param when a spec param is not one of the
  // transformer's (a param-list model has no HF layout; use kOwn).
  explicit HfLayout(const model::ModelSpec& spec, Naming naming = Naming::kHuggingFace);

  // Every HF tensor, in spec param order (a fused param's tensors in q, k, v / gate, up order).
  const std::vector<HfTensor>& tensors() const { return tensors_; }
  // Indices into tensors() of spec param p.
  const std::vector<int>& tensors_of(int p) const { return of_param_[static_cast<std::size_t>(p)]; }
  // Where TP shard t (of tp) of spec param p goes, in local element order, adjacent runs merged.
  // Covers [0, local numel) exactly once.
  std::vector<ElementRun> runs(int p, int tp, int t) const;
  // The name of the matrix the optimizer updates for task (p, piece): see the file comment.
  std::string task_name(int p, int piece) const;
  // The logical row (tp = 1 order) of each row of task (p, piece) at TP degree tp; empty when
  // they are the same (all tasks but an unsplit fc1 at tp > 1).
  std::vector<std::int64_t> task_logical_rows(int p, int piece, int tp) const;

 private:
  // Spec param p's logical row -> {tensor index, row in it}.
  std::pair<int, std::int64_t> hf_row(int p, std::int64_t logical_row) const;

  enum class Kind { kPlain, kQkv, kFc1 };
  model::ModelSpec spec_;
  std::vector<HfTensor> tensors_;
  std::vector<std::vector<int>> of_param_;
  std::vector<Kind> kind_;
  std::vector<std::string> fused_name_;  // an unsplit fused param's task name, else ""
  bool own_names_ = false;               // Naming::kOwn
};

}  // namespace canzona::ckpt
