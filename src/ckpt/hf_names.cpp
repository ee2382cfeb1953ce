// Megatron params <-> Hugging Face tensors (hf_names.h).
#include "canzona/ckpt/hf_names.h"

#include <utility>

#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::ckpt {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::int64_t HfTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

HfLayout::HfLayout(const model::ModelSpec& spec, Naming naming) : spec_(spec) {
  if (naming == Naming::kOwn) {
    for (const model::ParamSpec& param : spec.params) {
      of_param_.push_back({static_cast<int>(tensors_.size())});
      tensors_.push_back({param.name, param.own_shape()});
      kind_.push_back(Kind::kPlain);
      fused_name_.emplace_back();
    }
    own_names_ = true;
    return;
  }
  const model::ArchInfo& a = spec.arch;
  const std::int64_t d = a.head_dim, heads = a.num_heads, groups = a.num_query_groups;
  for (const model::ParamSpec& param : spec.params) {
    const std::string& n = param.name;
    std::string prefix;
    std::string rest = n;
    const std::string layers = "decoder.layers.";
    if (n.rfind(layers, 0) == 0) {
      const std::size_t dot = n.find('.', layers.size());
      CANZONA_REQUIRE(dot != std::string::npos, "checkpoint: param '", n, "' has no layer index");
      prefix = "model.layers." + n.substr(layers.size(), dot - layers.size()) + ".";
      rest = n.substr(dot + 1);
    }
    auto add = [&](std::string name, std::vector<std::int64_t> shape) {
      tensors_.push_back({std::move(name), std::move(shape)});
      return static_cast<int>(tensors_.size()) - 1;
    };
    std::vector<int> mine;
    Kind kind = Kind::kPlain;
    std::string fused;  // the name of an unsplit fused param's task
    const std::vector<std::int64_t>& s = param.shape;
    if (prefix.empty()) {
      if (n == "embedding.word_embeddings.weight") {
        mine.push_back(add("model.embed_tokens.weight", s));
      } else if (n == "decoder.final_layernorm.weight") {
        mine.push_back(add("model.norm.weight", s));
      } else if (n == "output_layer.weight") {
        mine.push_back(add("lm_head.weight", s));
      }
    } else if (rest == "self_attention.linear_qkv.layer_norm_weight") {
      mine.push_back(add(prefix + "input_layernorm.weight", s));
    } else if (rest == "self_attention.linear_qkv.weight" ||
               rest == "self_attention.linear_qkv.bias") {
      CANZONA_REQUIRE(d > 0 && heads > 0 && groups > 0 && s[0] == (heads + 2 * groups) * d,
                      "checkpoint: param '", n, "' needs the model's head counts");
      kind = Kind::kQkv;
      const std::string kind_suffix = ends_with(rest, ".bias") ? ".bias" : ".weight";
      std::vector<std::int64_t> q = s, kv = s;
      q[0] = heads * d;
      kv[0] = groups * d;
      mine.push_back(add(prefix + "self_attn.q_proj" + kind_suffix, q));
      mine.push_back(add(prefix + "self_attn.k_proj" + kind_suffix, kv));
      mine.push_back(add(prefix + "self_attn.v_proj" + kind_suffix, kv));
    } else if (rest == "self_attention.q_layernorm.weight") {
      mine.push_back(add(prefix + "self_attn.q_norm.weight", s));
    } else if (rest == "self_attention.k_layernorm.weight") {
      mine.push_back(add(prefix + "self_attn.k_norm.weight", s));
    } else if (rest == "self_attention.linear_proj.weight") {
      mine.push_back(add(prefix + "self_attn.o_proj.weight", s));
    } else if (rest == "mlp.linear_fc1.layer_norm_weight") {
      mine.push_back(add(prefix + "post_attention_layernorm.weight", s));
    } else if (rest == "mlp.linear_fc1.weight") {
      kind = Kind::kFc1;
      std::vector<std::int64_t> half = s;
      half[0] = s[0] / 2;
      mine.push_back(add(prefix + "mlp.gate_proj.weight", half));
      mine.push_back(add(prefix + "mlp.up_proj.weight", half));
    } else if (rest == "mlp.linear_fc2.weight") {
      mine.push_back(add(prefix + "mlp.down_proj.weight", s));
    } else if (rest == "pre_mlp_layernorm.weight") {  // a MoE layer's MLP norm
      mine.push_back(add(prefix + "post_attention_layernorm.weight", s));
    } else if (rest == "mlp.router.weight") {
      mine.push_back(add(prefix + "mlp.gate.weight", s));
    } else if (const std::string experts = "mlp.experts.local_experts.";
               rest.rfind(experts, 0) == 0) {
      const std::size_t dot = rest.find('.', experts.size());
      const std::string e =
          rest.substr(experts.size(), dot == std::string::npos ? 0 : dot - experts.size());
      const std::string expert = prefix + "mlp.experts." + e + ".";
      const std::string tail = dot == std::string::npos ? "" : rest.substr(dot + 1);
      if (!e.empty() && tail == "linear_fc1.weight") {
        kind = Kind::kFc1;
        std::vector<std::int64_t> half = s;
        half[0] = s[0] / 2;
        mine.push_back(add(expert + "gate_proj.weight", half));
        mine.push_back(add(expert + "up_proj.weight", half));
        fused = expert + "gate_up_proj.weight";
      } else if (!e.empty() && tail == "linear_fc2.weight") {
        mine.push_back(add(expert + "down_proj.weight", s));
      }
    }
    if (kind == Kind::kQkv) fused = prefix + "self_attn.qkv_proj.weight";
    if (kind == Kind::kFc1 && fused.empty()) fused = prefix + "mlp.gate_up_proj.weight";
    CANZONA_REQUIRE(!mine.empty(), "checkpoint: param '", n,
                    "' has no Hugging Face name (checkpoints need a transformer model: a preset or "
                    "a config.json)");
    of_param_.push_back(std::move(mine));
    kind_.push_back(kind);
    fused_name_.push_back(std::move(fused));
  }
}

std::pair<int, std::int64_t> HfLayout::hf_row(int p, std::int64_t row) const {
  const std::vector<int>& mine = of_param_[static_cast<std::size_t>(p)];
  switch (kind_[static_cast<std::size_t>(p)]) {
    case Kind::kPlain:
      return {mine[0], row};
    case Kind::kFc1: {
      const std::int64_t f = spec_.params[static_cast<std::size_t>(p)].shape[0] / 2;
      return row < f ? std::pair{mine[0], row} : std::pair{mine[1], row - f};
    }
    case Kind::kQkv: {
      const model::ArchInfo& a = spec_.arch;
      const std::int64_t d = a.head_dim, per_group = a.num_heads / a.num_query_groups;
      const std::int64_t block = (per_group + 2) * d;
      const std::int64_t g = row / block, o = row % block;
      if (o < per_group * d) return {mine[0], g * per_group * d + o};
      if (o < (per_group + 1) * d) return {mine[1], g * d + o - per_group * d};
      return {mine[2], g * d + o - (per_group + 1) * d};
    }
  }
  return {mine[0], row};
}

std::vector<ElementRun> HfLayout::runs(int p, int tp, int t) const {
  const model::ParamSpec& param = spec_.params[static_cast<std::size_t>(p)];
  const std::vector<std::int64_t> local = param.local_shape(tp);
  const std::int64_t rows = local[0], cols = local.size() > 1 ? local[1] : 1;
  const std::int64_t col0 = param.tp_split_dim == 1 ? t * cols : 0;
  std::vector<ElementRun> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    // A param-list param's TP shards are plain slices (no fc1 gate/up interleave by name).
    const std::int64_t logical = !own_names_               ? model::logical_row(param, tp, t, r)
                                 : param.tp_split_dim == 0 ? t * rows + r
                                                           : r;
    const auto [tensor, hr] = hf_row(p, logical);
    // A param-list tensor holds the planned shape's elements in its own shape (tensor_shape).
    const std::vector<std::int64_t>& shape =
        own_names_ ? param.shape : tensors_[static_cast<std::size_t>(tensor)].shape;
    const std::int64_t hf_cols = shape.size() > 1 ? shape[1] : 1;
    const ElementRun run{tensor, r * cols, hr * hf_cols + col0, cols};
    if (!out.empty()) {
      ElementRun& last = out.back();
      if (last.tensor == run.tensor && last.local + last.count == run.local &&
          last.hf + last.count == run.hf) {
        last.count += run.count;
        continue;
      }
    }
    out.push_back(run);
  }
  return out;
}

std::string HfLayout::task_name(int p, int piece) const {
  const std::size_t i = static_cast<std::size_t>(p);
  const std::vector<int>& mine = of_param_[i];
  if (piece < 0) {
    if (kind_[i] != Kind::kPlain) return fused_name_[i];
    return tensors_[static_cast<std::size_t>(mine[0])].name;
  }
  const std::string& name = spec_.params[i].pieces[static_cast<std::size_t>(piece)].name;
  if (own_names_) return tensors_[static_cast<std::size_t>(mine[0])].name + "." + name;
  if (kind_[i] == Kind::kFc1)
    return tensors_[static_cast<std::size_t>(mine[name == "up" ? 1 : 0])].name;
  CANZONA_CHECK(kind_[i] == Kind::kQkv && !name.empty(), "piece '", name, "' of ",
                spec_.params[i].name);
  const int which = name[0] == 'q' ? 0 : name[0] == 'k' ? 1 : 2;
  const std::string& base =
      tensors_[static_cast<std::size_t>(mine[static_cast<std::size_t>(which)])].name;
  return name.size() == 1 ? base : base + ".head" + name.substr(1);
}

std::vector<std::int64_t> HfLayout::task_logical_rows(int p, int piece, int tp) const {
  const model::ParamSpec& param = spec_.params[static_cast<std::size_t>(p)];
  // Only a TP-split fc1 has rows in another order at tp > 1 (an expert's is not split).
  if (piece >= 0 || tp == 1 || kind_[static_cast<std::size_t>(p)] != Kind::kFc1 ||
      param.tp_split_dim != 0)
    return {};
  const std::int64_t local_rows = param.local_shape(tp)[0];
  std::vector<std::int64_t> logical;
  for (int t = 0; t < tp; ++t)
    for (std::int64_t r = 0; r < local_rows; ++r)
      logical.push_back(model::logical_row(param, tp, t, r));
  return logical;
}

}  // namespace canzona::ckpt
