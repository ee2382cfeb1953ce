// Hugging Face config.json import (docs/references.md, "Hugging Face config.json keys"). Defaults
// follow transformers: num_key_value_heads = num_attention_heads, head_dim = hidden / heads,
// tie_word_embeddings = false. model_type picks the family: qwen3 (per-head q/k norm), qwen2
// (QKV bias), llama / mistral (neither, unless "attention_bias": true; the o_proj bias that flag
// also adds is not modelled, TransformerConfig has no field for it), qwen3_moe (qwen3 with
// experts: num_experts, num_experts_per_tok and moe_intermediate_size required;
// decoder_sparse_step 1, mlp_only_layers [], norm_topk_prob false and router_aux_loss_coef 0.001
// when absent, Qwen3MoeConfig's defaults).
#include <cmath>
#include <filesystem>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/model/limits.h"
#include "canzona/model/load.h"
#include "json_fields.h"

namespace canzona::model {
namespace {

using detail::get_int;
using detail::json;
using detail::present;
using detail::required;

// "Qwen3-8B" for ".../Qwen3-8B/config.json", else the file's stem.
std::string model_name(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.filename() == "config.json" && p.has_parent_path() && !p.parent_path().filename().empty() &&
      p.parent_path().filename() != ".") {
    return p.parent_path().filename().string();
  }
  return p.stem().string();
}

}  // namespace

TransformerConfig read_hf_config(const std::string& path) {
  const json j = read_json_file(path);
  detail::require_object(j, path);
  auto positive = [&](const char* key, std::int64_t max_value, const char* limit) {
    return get_int(required(j, path, key), path, key, 1, max_value, limit);
  };

  TransformerConfig c;
  c.name = model_name(path);
  const std::string type = detail::get_string(required(j, path, "model_type"), path, "model_type");
  CANZONA_REQUIRE(type == "qwen3" || type == "qwen3_moe" || type == "qwen2" || type == "llama" ||
                      type == "mistral",
                  path, ": unsupported model_type '", type,
                  "' (supported: qwen3, qwen3_moe, qwen2, llama, mistral)");
  c.hidden = positive("hidden_size", kMaxHidden, "kMaxHidden");
  c.ffn_hidden = positive("intermediate_size", kMaxFfnHidden, "kMaxFfnHidden");
  c.num_layers = static_cast<int>(positive("num_hidden_layers", kMaxLayers, "kMaxLayers"));
  c.num_heads = static_cast<int>(positive("num_attention_heads", kMaxHeads, "kMaxHeads"));
  c.num_query_groups =
      present(j, "num_key_value_heads")
          ? static_cast<int>(positive("num_key_value_heads", kMaxHeads, "kMaxHeads"))
          : c.num_heads;
  if (present(j, "head_dim")) {
    c.head_dim = static_cast<int>(positive("head_dim", kMaxHeadDim, "kMaxHeadDim"));
  } else {
    CANZONA_REQUIRE(c.hidden % c.num_heads == 0, path, ": hidden_size ", c.hidden,
                    " not divisible by num_attention_heads ", c.num_heads,
                    " (needed because head_dim is absent)");
    const std::int64_t head_dim = c.hidden / c.num_heads;
    CANZONA_REQUIRE(head_dim <= kMaxHeadDim, path,
                    ": head_dim = hidden_size / num_attention_heads = ", head_dim,
                    " must lie in [1, ", kMaxHeadDim, "] (kMaxHeadDim)");
    c.head_dim = static_cast<int>(head_dim);
  }
  c.vocab_size = positive("vocab_size", kMaxVocab, "kMaxVocab");
  c.tied_embeddings = present(j, "tie_word_embeddings") &&
                      detail::get_bool(j.at("tie_word_embeddings"), path, "tie_word_embeddings");
  CANZONA_REQUIRE(c.num_heads % c.num_query_groups == 0, path, ": num_attention_heads ",
                  c.num_heads, " not divisible by num_key_value_heads ", c.num_query_groups);

  const bool attention_bias = present(j, "attention_bias") &&
                              detail::get_bool(j.at("attention_bias"), path, "attention_bias");
  // Optional floats of the training model; their HF defaults when absent.
  auto positive_float = [&](const char* key, double fallback) {
    if (!present(j, key)) return fallback;
    const json& v = j.at(key);
    CANZONA_REQUIRE(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0.0, path,
                    ": ", key, " must be a positive finite number (got ", v.dump(), ")");
    return v.get<double>();
  };
  c.rope_theta = positive_float("rope_theta", 1e4);
  // transformers 5 writes rope_theta inside "rope_parameters" (with the rope_type); 4.x wrote it at
  // the top level, with "rope_scaling" for the other RoPE types. Only the default RoPE is modelled:
  // a scaled one (yarn, linear, dynamic, llama3, ...) is recorded in unsupported_rope, which the
  // planner ignores and `train` refuses rather than training it as the default one.
  if (present(j, "rope_parameters")) {
    const json& rope = j.at("rope_parameters");
    CANZONA_REQUIRE(rope.is_object(), path, ": rope_parameters must be an object (got ",
                    rope.dump(), ")");
    const std::string rope_type =
        present(rope, "rope_type")
            ? detail::get_string(rope.at("rope_type"), path, "rope_parameters.rope_type")
            : "default";
    if (rope_type != "default")
      c.unsupported_rope = "rope_parameters.rope_type '" + rope_type + "'";
    if (present(rope, "rope_theta")) {
      const json& v = rope.at("rope_theta");
      CANZONA_REQUIRE(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0.0,
                      path, ": rope_parameters.rope_theta must be a positive finite number (got ",
                      v.dump(), ")");
      CANZONA_REQUIRE(!present(j, "rope_theta") || c.rope_theta == v.get<double>(), path,
                      ": rope_theta ", c.rope_theta, " and rope_parameters.rope_theta ",
                      v.get<double>(), " disagree");
      c.rope_theta = v.get<double>();
    }
  }
  if (present(j, "rope_scaling") && c.unsupported_rope.empty())
    c.unsupported_rope = "rope_scaling " + j.at("rope_scaling").dump();
  c.rms_norm_eps = positive_float("rms_norm_eps", 1e-6);
  // transformers' defaults when the key is absent: Qwen3Config / Qwen2Config 32768, LlamaConfig
  // 2048, MistralConfig 4096 x 32.
  const std::int64_t default_positions = type == "llama"     ? 2048
                                         : type == "mistral" ? 131072
                                                             : 32768;
  c.max_position_embeddings =
      present(j, "max_position_embeddings")
          ? get_int(j.at("max_position_embeddings"), path, "max_position_embeddings", 1,
                    kMaxPositions, "kMaxPositions")
          : default_positions;
  c.qk_norm = type == "qwen3" || type == "qwen3_moe";
  c.qkv_bias = type == "qwen2" || attention_bias;
  if (type == "qwen3_moe") {
    c.num_experts = static_cast<int>(positive("num_experts", kMaxExperts, "kMaxExperts"));
    c.experts_per_token =
        static_cast<int>(get_int(required(j, path, "num_experts_per_tok"), path,
                                 "num_experts_per_tok", 1, c.num_experts, "num_experts"));
    c.moe_ffn_hidden = positive("moe_intermediate_size", kMaxFfnHidden, "kMaxFfnHidden");
    if (present(j, "decoder_sparse_step"))
      c.sparse_step = static_cast<int>(positive("decoder_sparse_step", kMaxLayers, "kMaxLayers"));
    if (present(j, "mlp_only_layers")) {
      const json& layers = j.at("mlp_only_layers");
      CANZONA_REQUIRE(layers.is_array() && static_cast<std::int64_t>(layers.size()) <= kMaxLayers,
                      path, ": mlp_only_layers must be an array of layer indices");
      for (const json& layer : layers)
        c.mlp_only_layers.push_back(static_cast<int>(
            get_int(layer, path, "mlp_only_layers", 0, c.num_layers - 1, "num_hidden_layers - 1")));
    }
    c.norm_topk_prob = present(j, "norm_topk_prob") &&
                       detail::get_bool(j.at("norm_topk_prob"), path, "norm_topk_prob");
    c.router_aux_loss_coef = 0.001;
    if (present(j, "router_aux_loss_coef")) {
      const json& v = j.at("router_aux_loss_coef");
      CANZONA_REQUIRE(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0.0,
                      path, ": router_aux_loss_coef must be a finite number >= 0 (got ", v.dump(),
                      ")");
      c.router_aux_loss_coef = v.get<double>();
    }
  }
  return c;
}

}  // namespace canzona::model
