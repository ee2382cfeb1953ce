// Where models come from: built-in presets, Hugging Face config.json files, and explicit
// parameter-list JSON files; plus pipeline-stage assignment.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/model/spec.h"

namespace canzona::model {

// A decoder-only transformer (Qwen3, Qwen2, Llama, Mistral families; Qwen3-MoE when
// num_experts > 0).
struct TransformerConfig {
  std::string name;
  std::int64_t hidden = 0;
  std::int64_t ffn_hidden = 0;  // intermediate_size
  int num_layers = 0;
  int num_heads = 0;
  int num_query_groups = 0;  // num_key_value_heads
  int head_dim = 0;          // defaults to hidden / num_heads in HF configs that omit it
  std::int64_t vocab_size = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;  // Qwen2 has QKV bias; Qwen3, Llama, Mistral do not
  bool qk_norm = false;   // Qwen3 per-head q_layernorm / k_layernorm
  // Used by the training model only (train/model.h); the planner ignores them.
  double rope_theta = 1e6;     // RoPE base (HF rope_theta; Qwen3 1e6, Llama 1e4 / 5e5)
  double rms_norm_eps = 1e-6;  // HF rms_norm_eps
  // A RoPE other than the default one, as the config names it ("rope_parameters.rope_type 'yarn'",
  // "rope_scaling {...}"); empty for the default RoPE. The planner does not depend on it; the
  // training model, which computes only the default RoPE, refuses a config that sets it.
  std::string unsupported_rope;
  // The longest sequence the model is made for (HF max_position_embeddings): bounds
  // `train --seq-len`. Qwen3 presets 40960, as the Qwen3 configs say.
  std::int64_t max_position_embeddings = 40960;

  // Mixture of experts (HF qwen3_moe). num_experts = 0: every layer has the dense MLP.
  int num_experts = 0;                // num_experts
  int experts_per_token = 0;          // num_experts_per_tok (top-k)
  std::int64_t moe_ffn_hidden = 0;    // moe_intermediate_size: each expert's intermediate size
  int sparse_step = 1;                // decoder_sparse_step
  std::vector<int> mlp_only_layers;   // layers that keep the dense MLP (ffn_hidden)
  bool norm_topk_prob = false;        // renormalise the top-k router probabilities
  double router_aux_loss_coef = 0.0;  // the load-balancing loss's weight (training)

  bool is_moe() const { return num_experts > 0; }
  // HF Qwen3-MoE's rule: layer i has experts when it is not in mlp_only_layers, num_experts > 0
  // and (i + 1) is a multiple of sparse_step.
  bool moe_layer(int i) const;
};

// How QKV is split into optimizer tasks before the matrix optimizer.
enum class QkvSplit { kNone, kQkv, kPerHead };

// "none" | "qkv" | "head" (the --split-qkv flag); throws UsageError otherwise.
QkvSplit parse_qkv_split(const std::string& name);
// The flag text of a split: "none" | "qkv" | "head".
const char* to_string(QkvSplit split);

struct BuildOptions {
  int tp = 1;                            // pads the vocabulary to a multiple of 128 * tp
  QkvSplit qkv_split = QkvSplit::kNone;  // kQkv: q, k, v pieces; kPerHead: one piece per head
  bool split_fc1 = false;                // gate and up pieces
};

// Megatron vocabulary padding: ceil(vocab_size / (128 tp)) * 128 tp. Throws UsageError when tp <=
// 0, vocab_size < 0 or the result overflows int64.
std::int64_t padded_vocab_size(std::int64_t vocab_size, int tp);

// Names of the built-in presets, in a stable order: qwen3-0.6b ... qwen3-32b, then small ones.
std::vector<std::string> preset_names();
// The preset's config; throws UsageError listing the known presets when `name` is unknown.
TransformerConfig preset(const std::string& name);

// Reads a Hugging Face config.json (Qwen3, Qwen2, Llama, Mistral keys). Throws UsageError naming
// the file and the key when a key is missing, has the wrong type, or is inconsistent.
TransformerConfig read_hf_config(const std::string& path);

// Megatron params of the transformer in registration order (docs/references.md, "Megatron TP
// layout"), with optimizer classes assigned and pieces per `options`. Piece rows index the global
// matrix, which is the concatenation of the TP shards along dim 0 (see transformer.cpp for what
// that means for fc1). Throws UsageError when a size is not positive or exceeds its limit
// (limits.h: kMaxHidden, kMaxFfnHidden, kMaxLayers, kMaxHeads, kMaxHeadDim, kMaxVocab), when the
// params, pieces or piece row ranges it would build exceed kMaxParams, kMaxPieces or kMaxRowRanges
// (checked before anything is allocated), or when tp does not divide heads, query groups or
// ffn_hidden, or query groups do not divide heads.
ModelSpec build_transformer(const TransformerConfig& config, const BuildOptions& options);

// Row of the logical weight (the tp = 1 matrix in Hugging Face row order; for fc1 all gate rows,
// then all up rows) that local row r of TP shard t of `param` holds: t x local rows + r for
// column-parallel params except fc1 (dense or expert "....linear_fc1.weight", whose shard t holds
// [gate_t; up_t]);
// r for row-parallel and replicated params (their split, if any, is along columns). 1-D params
// count elements as rows.
std::int64_t logical_row(const ParamSpec& param, int tp, int t, std::int64_t r);

// Explicit parameter lists:
//   {"name": "...",
//    "arch": {"num_layers", "num_heads", "num_query_groups", "head_dim", "vocab_size",
//             "padded_vocab_size", "num_experts", "experts_per_token"},
//    "params": [{"name", "shape", "matrix_view": [rows, cols], "tp_split_dim",
//                "optimizer": "matrix" | "elementwise", "layer", "stage",
//                "pieces": [{"name", "rows": [[begin, end], ...]}]}]}
// Required: "params"; per param "name" and "shape"; per piece "name" and "rows". Defaults:
// name = the path, arch keys 0 (unknown), tp_split_dim -1, optimizer default_optimizer_class()
// ("matrix" when a matrix_view is given), layer -1, stage -1, no pieces. "shape" is the tensor's
// own (0 to kMaxTensorDims dims): a 1-D or 2-D one is planned as it is; another is planned as the
// row-major 2-D "matrix_view" (same numel) when given, else as [numel] for AdamW (a matrix
// optimizer for it needs the view), with ParamSpec::tensor_shape keeping the own shape. Unknown
// keys in a param, piece or arch are errors (usually typos). Bounds (limits.h), checked while
// reading so a small file cannot make us allocate without bound: at most kMaxParams params,
// kMaxPieces pieces and kMaxRowRanges row ranges in the file, dims each in [1, kMaxDim], layer in
// [-1, kMaxLayers), stage and tp_split_dim >= -1, arch counts within kMaxLayers / kMaxHeads /
// kMaxHeadDim, vocab sizes within kMaxDim. Throws UsageError naming the file, the param index, the
// key and the limit. The writer emits every field, so write -> read -> write reproduces the file
// byte for byte.
ModelSpec read_param_list(const std::string& path);
// The same from a parsed document; `where` names it in messages (the path, or e.g. "params" for a
// list built in memory by the Python package).
ModelSpec param_list_from_json(const nlohmann::json& j, const std::string& where);
void write_param_list(const std::string& path, const ModelSpec& model);
// The document write_param_list writes.
nlohmann::json param_list_json(const ModelSpec& model);

// Resolves the --model argument: a preset name, a path to a HF config.json, or a path to a param
// list (recognised by its "params" key). Applies `options` where the source is a transformer
// config; validates the result against options.tp.
ModelSpec load_model(const std::string& model_arg, const BuildOptions& options);

// The first layer of each of `pp` pipeline stages, then num_layers: pp + 1 bounds. An empty
// `layout` splits the layers evenly (pp must divide them); otherwise stage s holds layout[s]
// layers (--pp-layout: Megatron's --decoder-first-pipeline-num-layers and
// --decoder-last-pipeline-num-layers are the layout's first and last entries). Throws
// UsageError naming the flag when pp <= 0, pp does not divide the layers (no layout), or the
// layout has not pp entries, an entry below 1, or a sum other than num_layers.
std::vector<int> stage_bounds(const std::string& model_name, std::int64_t num_layers, int pp,
                              const std::vector<int>& layout);

// Pipeline stage of every param (index-aligned with model.params) for `pp` stages: transformer
// layers split by stage_bounds (evenly, or by `layout`), model-level params before the first
// layer on stage 0, after the last layer on stage pp-1, explicit ParamSpec::stage wins. Every
// returned stage lies in [0, pp). Throws UsageError when pp <= 0, a layer or the layer count is
// outside [0, kMaxLayers) / [1, kMaxLayers], stage_bounds refuses, or an explicit stage is out of
// range.
std::vector<int> assign_stages(const ModelSpec& model, int pp, const std::vector<int>& layout = {});

}  // namespace canzona::model
