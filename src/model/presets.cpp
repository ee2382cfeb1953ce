// Built-in models. Qwen3 dense shapes from docs/references.md ("Qwen3 dense configurations"); the
// tiny and mini presets keep the Qwen3 architecture at sizes that run for real on a 2-core machine.
#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::model {
namespace {

TransformerConfig qwen3(std::string name, std::int64_t hidden, std::int64_t ffn, int layers,
                        int heads, bool tied) {
  TransformerConfig c;
  c.name = std::move(name);
  c.hidden = hidden;
  c.ffn_hidden = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_query_groups = 8;
  c.head_dim = 128;
  c.vocab_size = 151936;
  c.tied_embeddings = tied;
  c.qk_norm = true;
  return c;
}

TransformerConfig small(std::string name, std::int64_t hidden, std::int64_t ffn, int layers,
                        int heads, int groups, std::int64_t vocab, bool tied) {
  TransformerConfig c = qwen3(std::move(name), hidden, ffn, layers, heads, tied);
  c.num_query_groups = groups;
  c.head_dim = 32;
  c.vocab_size = vocab;
  return c;
}

// Sized for real training on a 2-core CPU (canzona train): 22M params, head_dim 64, a 4096-entry
// vocabulary (byte tokens or a SentencePiece model up to 4096 pieces), untied output layer.
TransformerConfig cpu_training() {
  TransformerConfig c = small("qwen3-cpu", 512, 1536, 6, 8, 2, 4096, false);
  c.head_dim = 64;
  return c;
}

// Qwen3-MoE (docs/references.md, "Qwen3-MoE configurations"): 128 experts, top-8, 4 KV heads,
// every layer sparse, untied.
TransformerConfig qwen3_moe(std::string name, std::int64_t hidden, std::int64_t ffn,
                            std::int64_t expert_ffn, int layers, int heads) {
  TransformerConfig c = qwen3(std::move(name), hidden, ffn, layers, heads, false);
  c.num_query_groups = 4;
  c.num_experts = 128;
  c.experts_per_token = 8;
  c.moe_ffn_hidden = expert_ffn;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = 0.001;
  return c;
}

// A Qwen3-MoE small enough for a 2-core CPU: 8 experts, top-2, 4 layers; the experts hold 12.6M
// (82%) of its 15.3M params; a token uses 5.9M (2 experts per layer, attention, embeddings).
TransformerConfig cpu_moe() {
  TransformerConfig c = small("qwen3-moe-cpu", 256, 1024, 4, 8, 2, 4096, false);
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.moe_ffn_hidden = 512;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = 0.001;
  return c;
}

// qwen3-moe-cpu's dense twin: the same model with one SwiGLU MLP of FFN 1024 = top-2 x 512 in
// place of each MoE block, so a token uses the same params (all but the 2,048-element routers):
// the model tokens/s of a MoE run are compared against.
TransformerConfig cpu_moe_dense() {
  TransformerConfig c = small("qwen3-moe-cpu-dense", 256, 1024, 4, 8, 2, 4096, false);
  return c;
}

const std::vector<TransformerConfig>& presets() {
  static const std::vector<TransformerConfig> all = {
      qwen3("qwen3-0.6b", 1024, 3072, 28, 16, true),
      qwen3("qwen3-1.7b", 2048, 6144, 28, 16, true),
      qwen3("qwen3-4b", 2560, 9728, 36, 32, true),
      qwen3("qwen3-8b", 4096, 12288, 36, 32, false),
      qwen3("qwen3-14b", 5120, 17408, 40, 40, false),
      qwen3("qwen3-32b", 5120, 25600, 64, 64, false),
      small("qwen3-tiny", 128, 384, 2, 4, 2, 512, true),
      small("qwen3-mini", 256, 768, 4, 8, 4, 2048, false),
      cpu_training(),
      qwen3_moe("qwen3-30b-a3b", 2048, 6144, 768, 48, 32),
      qwen3_moe("qwen3-235b-a22b", 4096, 12288, 1536, 94, 64),
      cpu_moe(),
      cpu_moe_dense(),
  };
  return all;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const TransformerConfig& c : presets()) names.push_back(c.name);
  return names;
}

TransformerConfig preset(const std::string& name) {
  const auto& all = presets();
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const TransformerConfig& c) { return c.name == name; });
  if (it != all.end()) return *it;
  std::string known;
  for (const TransformerConfig& c : all) known += (known.empty() ? "" : ", ") + c.name;
  throw UsageError(str("unknown preset '", name, "' (known presets: ", known, ")"));
}

}  // namespace canzona::model
