// Megatron-LM GPT model params of a dense decoder (docs/references.md, "Megatron TP layout").
//
// Terms: h = hidden, f = ffn_hidden, H = attention heads, G = query groups (KV heads),
// d = head_dim, V_pad = padded vocabulary. The *global matrix* of a TP-split param is the
// concatenation of its TP shards along tp_split_dim (spec.h), so piece rows index that.
//
// Fused QKV [(H + 2G) d, h]: rows are interleaved per query group, group g occupying the block
// [g B, (g + 1) B) with B = (H/G + 2) d, laid out [q x H/G | k | v]. TP splits whole groups, so
// the layout does not depend on tp.
//
// Fused fc1 [2f, h]: Megatron's TP-local shard t holds [gate_t; up_t] (f/tp rows each). The
// concatenation of the shards is therefore [gate_0; up_0; gate_1; up_1; ...], and the gate piece
// is the union over t of rows [t 2f/tp, t 2f/tp + f/tp). At tp = 1 this is the logical layout:
// gate = [0, f), up = [f, 2f). Concatenating a piece's ranges in order yields gate (or up) in
// its natural row order for every tp.
//
// Mixture of experts (Qwen3-MoE; Megatron's MoE layer with its sequential local experts): a MoE
// layer's MLP is `pre_mlp_layernorm` [h] (the norm is not fused into an fc1 there), the router
// `mlp.router.weight` [E, h] (element-wise: Megatron's rule for routers) and per expert e
// `mlp.experts.local_experts.<e>.linear_fc1.weight` [2 f_e, h] ([gate; up]) and
// `...linear_fc2.weight` [h, f_e]. Experts are not split over TP here (expert TP 1, every expert
// on every rank: expert parallelism 1), so their tp_split_dim is -1.
#include <algorithm>
#include <string>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/model/limits.h"
#include "canzona/model/load.h"

namespace canzona::model {
namespace {

std::string indexed(const char* kind, std::int64_t i) {
  std::string name(kind);
  name += std::to_string(i);
  return name;
}

std::vector<Piece> qkv_pieces(const TransformerConfig& c, QkvSplit split) {
  const std::int64_t d = c.head_dim;
  const std::int64_t heads_per_group = c.num_heads / c.num_query_groups;
  const std::int64_t block = (heads_per_group + 2) * d;
  std::vector<Piece> pieces;
  if (split == QkvSplit::kQkv) {
    Piece q{"q", {}}, k{"k", {}}, v{"v", {}};
    for (std::int64_t g = 0; g < c.num_query_groups; ++g) {
      const std::int64_t base = g * block;
      q.row_ranges.emplace_back(base, base + heads_per_group * d);
      k.row_ranges.emplace_back(base + heads_per_group * d, base + (heads_per_group + 1) * d);
      v.row_ranges.emplace_back(base + (heads_per_group + 1) * d, base + block);
    }
    pieces = {q, k, v};
  } else if (split == QkvSplit::kPerHead) {
    for (std::int64_t j = 0; j < c.num_heads; ++j) {
      const std::int64_t begin = (j / heads_per_group) * block + (j % heads_per_group) * d;
      pieces.push_back({indexed("q", j), {{begin, begin + d}}});
    }
    for (const char* kind : {"k", "v"}) {
      const std::int64_t offset = (heads_per_group + (kind[0] == 'v' ? 1 : 0)) * d;
      for (std::int64_t g = 0; g < c.num_query_groups; ++g) {
        const std::int64_t begin = g * block + offset;
        pieces.push_back({indexed(kind, g), {{begin, begin + d}}});
      }
    }
  }
  return pieces;
}

std::vector<Piece> fc1_pieces(std::int64_t ffn, int tp) {
  const std::int64_t shard = ffn / tp;
  Piece gate{"gate", {}}, up{"up", {}};
  for (std::int64_t t = 0; t < tp; ++t) {
    const std::int64_t base = t * 2 * shard;
    gate.row_ranges.emplace_back(base, base + shard);
    up.row_ranges.emplace_back(base + shard, base + 2 * shard);
  }
  return {gate, up};
}

void check_config(const TransformerConfig& c, const BuildOptions& options) {
  const int tp = options.tp;
  CANZONA_REQUIRE(tp > 0, "tp must be positive, got tp=", tp);
  const std::string m = str("model '", c.name, "': ");
  require_in_range(c.hidden, 1, kMaxHidden, m + "hidden", "kMaxHidden");
  require_in_range(c.ffn_hidden, 1, kMaxFfnHidden, m + "ffn_hidden", "kMaxFfnHidden");
  require_in_range(c.num_layers, 1, kMaxLayers, m + "num_layers", "kMaxLayers");
  require_in_range(c.num_heads, 1, kMaxHeads, m + "num_heads", "kMaxHeads");
  require_in_range(c.num_query_groups, 1, kMaxHeads, m + "num_query_groups", "kMaxHeads");
  require_in_range(c.head_dim, 1, kMaxHeadDim, m + "head_dim", "kMaxHeadDim");
  require_in_range(c.vocab_size, 1, kMaxVocab, m + "vocab_size", "kMaxVocab");
  if (c.is_moe()) {
    require_in_range(c.num_experts, 1, kMaxExperts, m + "num_experts", "kMaxExperts");
    require_in_range(c.experts_per_token, 1, c.num_experts, m + "num_experts_per_tok",
                     "num_experts");
    require_in_range(c.moe_ffn_hidden, 1, kMaxFfnHidden, m + "moe_intermediate_size",
                     "kMaxFfnHidden");
    require_in_range(c.sparse_step, 1, kMaxLayers, m + "decoder_sparse_step", "kMaxLayers");
    for (int layer : c.mlp_only_layers)
      require_in_range(layer, 0, c.num_layers - 1, m + "mlp_only_layers entry",
                       "num_hidden_layers - 1");
  }
  CANZONA_REQUIRE(c.num_heads % c.num_query_groups == 0, "model '", c.name, "': num_heads ",
                  c.num_heads, " not divisible by num_query_groups ", c.num_query_groups);
  CANZONA_REQUIRE(c.num_heads % tp == 0, "model '", c.name, "': ", c.num_heads,
                  " attention heads not divisible by tp=", tp, " (Megatron splits heads over TP)");
  CANZONA_REQUIRE(c.num_query_groups % tp == 0, "model '", c.name, "': ", c.num_query_groups,
                  " query groups (KV heads) not divisible by tp=", tp,
                  " (Megatron splits query groups over TP)");
  CANZONA_REQUIRE(c.ffn_hidden % tp == 0, "model '", c.name, "': ffn_hidden ", c.ffn_hidden,
                  " not divisible by tp=", tp);

  // Counts of what build_transformer() will allocate, bounded before it allocates.
  const std::int64_t layers = c.num_layers;
  std::int64_t moe_layers = 0;
  for (int i = 0; i < c.num_layers; ++i) moe_layers += c.moe_layer(i) ? 1 : 0;
  const std::int64_t per_layer_params = 6 + (c.qkv_bias ? 1 : 0) + (c.qk_norm ? 2 : 0);
  // A MoE layer has a router and 2 per expert instead of fc1 and fc2.
  const std::int64_t per_moe_layer = 2 * std::int64_t{c.num_experts} - 1;
  const std::int64_t params =
      checked_add(checked_add(checked_mul(layers, per_layer_params, m + "params"),
                              checked_mul(moe_layers, per_moe_layer, m + "params"), m + "params"),
                  c.tied_embeddings ? 2 : 3, m + "params");
  require_in_range(params, 1, kMaxParams, m + "params", "kMaxParams");
  std::int64_t qkv_pieces = 0, qkv_ranges = 0;
  const std::int64_t heads_and_groups = c.num_heads + 2 * std::int64_t{c.num_query_groups};
  if (options.qkv_split == QkvSplit::kQkv) {
    qkv_pieces = 3;
    qkv_ranges = 3 * std::int64_t{c.num_query_groups};
  } else if (options.qkv_split == QkvSplit::kPerHead) {
    qkv_pieces = heads_and_groups;
    qkv_ranges = heads_and_groups;
  }
  const std::int64_t fc1_pieces = options.split_fc1 ? 2 : 0;
  const std::int64_t fc1_ranges = options.split_fc1 ? 2 * std::int64_t{tp} : 0;
  // A MoE layer's fc1 pieces: gate and up of each expert (one row range each: experts are not
  // TP-split).
  const std::int64_t expert_fc1 = options.split_fc1 ? 2 * std::int64_t{c.num_experts} : 0;
  const std::int64_t pieces =
      checked_add(checked_mul(layers, qkv_pieces + fc1_pieces, m + "pieces"),
                  checked_mul(moe_layers, expert_fc1 - fc1_pieces, m + "pieces"), m + "pieces");
  require_in_range(pieces, 0, kMaxPieces, m + "pieces", "kMaxPieces");
  const std::int64_t ranges =
      checked_add(checked_mul(layers, qkv_ranges + fc1_ranges, m + "piece row ranges"),
                  checked_mul(moe_layers, expert_fc1 - fc1_ranges, m + "piece row ranges"),
                  m + "piece row ranges");
  require_in_range(ranges, 0, kMaxRowRanges, m + "piece row ranges", "kMaxRowRanges");
}

}  // namespace

bool TransformerConfig::moe_layer(int i) const {
  return num_experts > 0 && sparse_step > 0 && (i + 1) % sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end();
}

QkvSplit parse_qkv_split(const std::string& name) {
  if (name == "none") return QkvSplit::kNone;
  if (name == "qkv") return QkvSplit::kQkv;
  if (name == "head") return QkvSplit::kPerHead;
  throw UsageError(str("--split-qkv must be none, qkv or head (got '", name, "')"));
}

const char* to_string(QkvSplit split) {
  switch (split) {
    case QkvSplit::kNone:
      return "none";
    case QkvSplit::kQkv:
      return "qkv";
    case QkvSplit::kPerHead:
      return "head";
  }
  return "?";
}

std::int64_t padded_vocab_size(std::int64_t vocab_size, int tp) {
  CANZONA_REQUIRE(tp > 0, "tp must be positive, got tp=", tp);
  CANZONA_REQUIRE(vocab_size >= 0, "vocab_size must be >= 0, got ", vocab_size);
  const std::int64_t multiple = checked_mul(128, tp, "padded vocabulary: 128 x tp");
  const std::int64_t blocks = checked_add(vocab_size, multiple - 1, "padded vocabulary") / multiple;
  return checked_mul(blocks, multiple, "padded vocabulary");
}

ModelSpec build_transformer(const TransformerConfig& c, const BuildOptions& options) {
  check_config(c, options);
  ModelSpec model;
  model.name = c.name;
  model.arch = {c.num_layers,  c.num_heads,        c.num_query_groups,
                c.head_dim,    c.vocab_size,       padded_vocab_size(c.vocab_size, options.tp),
                c.num_experts, c.experts_per_token};
  model.arch.tied_embeddings = c.tied_embeddings;
  const std::int64_t h = c.hidden;
  const std::int64_t d = c.head_dim;
  const std::int64_t vocab = model.arch.padded_vocab_size;
  const std::int64_t qkv_rows = (c.num_heads + 2LL * c.num_query_groups) * d;

  auto add = [&model](std::string name, std::vector<std::int64_t> shape, int split, int layer,
                      std::vector<Piece> pieces = {}) {
    const OptimizerClass optimizer = default_optimizer_class(name, shape);
    model.params.push_back(
        {std::move(name), std::move(shape), split, optimizer, layer, -1, std::move(pieces)});
  };

  add("embedding.word_embeddings.weight", {vocab, h}, 0, -1);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    add(p + "self_attention.linear_proj.weight", {h, c.num_heads * d}, 1, i);
    add(p + "self_attention.linear_qkv.layer_norm_weight", {h}, -1, i);
    add(p + "self_attention.linear_qkv.weight", {qkv_rows, h}, 0, i,
        qkv_pieces(c, options.qkv_split));
    if (c.qkv_bias) add(p + "self_attention.linear_qkv.bias", {qkv_rows}, 0, i);
    if (c.qk_norm) {
      add(p + "self_attention.q_layernorm.weight", {d}, -1, i);
      add(p + "self_attention.k_layernorm.weight", {d}, -1, i);
    }
    if (c.moe_layer(i)) {
      const std::int64_t f = c.moe_ffn_hidden;
      add(p + "pre_mlp_layernorm.weight", {h}, -1, i);
      add(p + "mlp.router.weight", {c.num_experts, h}, -1, i);
      for (int e = 0; e < c.num_experts; ++e) {
        const std::string x = p + "mlp.experts.local_experts." + std::to_string(e) + ".";
        add(x + "linear_fc1.weight", {2 * f, h}, -1, i,
            options.split_fc1 ? fc1_pieces(f, 1) : std::vector<Piece>{});
        add(x + "linear_fc2.weight", {h, f}, -1, i);
      }
      continue;
    }
    add(p + "mlp.linear_fc1.layer_norm_weight", {h}, -1, i);
    add(p + "mlp.linear_fc1.weight", {2 * c.ffn_hidden, h}, 0, i,
        options.split_fc1 ? fc1_pieces(c.ffn_hidden, options.tp) : std::vector<Piece>{});
    add(p + "mlp.linear_fc2.weight", {h, c.ffn_hidden}, 1, i);
  }
  add("decoder.final_layernorm.weight", {h}, -1, -1);
  if (!c.tied_embeddings) add("output_layer.weight", {vocab, h}, 0, -1);
  return model;
}

}  // namespace canzona::model

namespace canzona::model {

std::int64_t logical_row(const ParamSpec& param, int tp, int t, std::int64_t r) {
  if (param.tp_split_dim != 0) return r;
  const std::int64_t local_rows = param.local_shape(tp)[0];
  // Dense ("mlp.linear_fc1.weight") and expert ("...local_experts.<e>.linear_fc1.weight") fc1.
  const bool fc1 = param.name.ends_with("mlp.linear_fc1.weight") ||
                   (is_expert_param(param) && param.name.ends_with(".linear_fc1.weight"));
  if (fc1) {
    const std::int64_t half = local_rows / 2;  // f / tp
    const std::int64_t f = param.shape[0] / 2;
    return r < half ? t * half + r : f + t * half + (r - half);
  }
  return t * local_rows + r;
}

}  // namespace canzona::model
