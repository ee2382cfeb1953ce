// The Megatron -> Hugging Face mapping of checkpoints (ckpt/hf_names.h) against a hand
// derivation written the other way round: from each HF tensor element to the Megatron param,
// TP shard and local element that holds it (HF's q_proj head i is Megatron fused-QKV block
// i / (H/G) at offset (i mod H/G) d; k and v follow the group's q heads; gate_proj row r is row r
// of fc1's logical [gate; up], which TP shard t holds as [gate_t; up_t]). Every HF element must be
// covered exactly once by the union of all TP shards, for TP 1, 2 and 4.
#include "canzona/ckpt/hf_names.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "canzona/ckpt/checkpoint.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/model/load.h"

namespace canzona::ckpt {
namespace {

// h 16, f 12, 2 layers, 8 heads in 4 groups of d 2, vocab 1024, untied, q/k norm (Qwen3).
model::TransformerConfig small_config(bool qkv_bias = false) {
  model::TransformerConfig c;
  c.name = "small";
  c.hidden = 16;
  c.ffn_hidden = 12;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_query_groups = 4;
  c.head_dim = 2;
  c.vocab_size = 1024;
  c.qk_norm = !qkv_bias;
  c.qkv_bias = qkv_bias;
  return c;
}

model::ModelSpec spec_for(const model::TransformerConfig& c, int tp, bool split = false) {
  model::BuildOptions b;
  b.tp = tp;
  b.qkv_split = split ? model::QkvSplit::kQkv : model::QkvSplit::kNone;
  b.split_fc1 = split;
  return model::build_transformer(c, b);
}

TEST(HfNames, TensorNamesAndShapesAreHuggingFaces) {
  const HfLayout hf(spec_for(small_config(), 1));
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> want = {
      {"model.embed_tokens.weight", {1024, 16}}};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    want.push_back({l + "self_attn.o_proj.weight", {16, 16}});
    want.push_back({l + "input_layernorm.weight", {16}});
    want.push_back({l + "self_attn.q_proj.weight", {16, 16}});
    want.push_back({l + "self_attn.k_proj.weight", {8, 16}});
    want.push_back({l + "self_attn.v_proj.weight", {8, 16}});
    want.push_back({l + "self_attn.q_norm.weight", {2}});
    want.push_back({l + "self_attn.k_norm.weight", {2}});
    want.push_back({l + "post_attention_layernorm.weight", {16}});
    want.push_back({l + "mlp.gate_proj.weight", {12, 16}});
    want.push_back({l + "mlp.up_proj.weight", {12, 16}});
    want.push_back({l + "mlp.down_proj.weight", {16, 12}});
  }
  want.push_back({"model.norm.weight", {16}});
  want.push_back({"lm_head.weight", {1024, 16}});
  ASSERT_EQ(hf.tensors().size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(hf.tensors()[i].name, want[i].first) << i;
    EXPECT_EQ(hf.tensors()[i].shape, want[i].second) << want[i].first;
  }
}

// (megatron param name, tp shard, local element) of every element of HF tensor `name`, by hand.
using Home = std::tuple<std::string, int, std::int64_t>;
std::vector<Home> homes(const model::TransformerConfig& c, int tp, const std::string& layer,
                        const std::string& name, std::int64_t rows, std::int64_t cols) {
  const std::int64_t d = c.head_dim, h = c.hidden, f = c.ffn_hidden;
  const std::int64_t per_group = c.num_heads / c.num_query_groups, block = (per_group + 2) * d;
  const std::int64_t qkv_rows = (c.num_heads + 2 * c.num_query_groups) * d;
  const std::string m = "decoder.layers." + layer + ".";
  std::vector<Home> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t col = 0; col < cols; ++col) {
      auto column_parallel = [&](const std::string& param, std::int64_t row, std::int64_t total,
                                 std::int64_t width) {
        const std::int64_t local = total / tp;
        out.emplace_back(param, static_cast<int>(row / local), (row % local) * width + col);
      };
      const bool bias = name.ends_with(".bias");
      const std::string qkv =
          m + (bias ? "self_attention.linear_qkv.bias" : "self_attention.linear_qkv.weight");
      const std::int64_t w = bias ? 1 : h;
      if (name.find("q_proj") != std::string::npos) {
        const std::int64_t head = r / d;
        column_parallel(qkv, (head / per_group) * block + (head % per_group) * d + r % d, qkv_rows,
                        w);
      } else if (name.find("k_proj") != std::string::npos) {
        column_parallel(qkv, (r / d) * block + per_group * d + r % d, qkv_rows, w);
      } else if (name.find("v_proj") != std::string::npos) {
        column_parallel(qkv, (r / d) * block + (per_group + 1) * d + r % d, qkv_rows, w);
      } else if (name.find("gate_proj") != std::string::npos ||
                 name.find("up_proj") != std::string::npos) {
        const std::int64_t shard = f / tp, t = r / shard;
        const std::int64_t local_row =
            (name.find("up_proj") != std::string::npos ? shard : 0) + r % shard;
        out.emplace_back(m + "mlp.linear_fc1.weight", static_cast<int>(t), local_row * h + col);
      } else if (name.find("o_proj") != std::string::npos ||
                 name.find("down_proj") != std::string::npos) {
        const std::string param =
            m + (name.find("o_proj") != std::string::npos ? "self_attention.linear_proj.weight"
                                                          : "mlp.linear_fc2.weight");
        const std::int64_t local = cols / tp;
        out.emplace_back(param, static_cast<int>(col / local), r * local + col % local);
      } else if (name == "model.embed_tokens.weight" || name == "lm_head.weight") {
        column_parallel(
            name == "lm_head.weight" ? "output_layer.weight" : "embedding.word_embeddings.weight",
            r, rows, h);
      } else {  // replicated norms: TP rank 0's copy
        std::string param = name == "model.norm.weight" ? "decoder.final_layernorm.weight" : "";
        if (name.ends_with("input_layernorm.weight"))
          param = m + "self_attention.linear_qkv.layer_norm_weight";
        if (name.ends_with("post_attention_layernorm.weight"))
          param = m + "mlp.linear_fc1.layer_norm_weight";
        if (name.ends_with("q_norm.weight")) param = m + "self_attention.q_layernorm.weight";
        if (name.ends_with("k_norm.weight")) param = m + "self_attention.k_layernorm.weight";
        out.emplace_back(param, 0, r * cols + col);
      }
    }
  }
  return out;
}

void check_runs(const model::TransformerConfig& c, int tp) {
  const model::ModelSpec spec = spec_for(c, tp);
  const HfLayout hf(spec);
  // (tensor, hf element) -> where the runs put it; replicated params: shard 0's runs only.
  std::map<std::pair<int, std::int64_t>, Home> found;
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    const model::ParamSpec& param = spec.params[p];
    const int shards = param.tp_split_dim >= 0 ? tp : 1;
    for (int t = 0; t < shards; ++t) {
      std::int64_t next_local = 0;
      for (const ElementRun& run : hf.runs(static_cast<int>(p), tp, t)) {
        ASSERT_EQ(run.local, next_local) << param.name << " shard " << t;
        next_local += run.count;
        for (std::int64_t i = 0; i < run.count; ++i) {
          const auto key = std::make_pair(run.tensor, run.hf + i);
          ASSERT_TRUE(found.emplace(key, Home{param.name, t, run.local + i}).second)
              << "element " << run.hf + i << " of " << hf.tensors()[run.tensor].name
              << " mapped twice";
        }
      }
      ASSERT_EQ(next_local, param.local_numel(tp)) << param.name << " shard " << t;
    }
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < hf.tensors().size(); ++i) {
    const HfTensor& tensor = hf.tensors()[i];
    const std::string layer =
        tensor.name.rfind("model.layers.", 0) == 0 ? tensor.name.substr(13, 1) : "";
    const std::int64_t cols = tensor.shape.size() > 1 ? tensor.shape[1] : 1;
    const std::vector<Home> want = homes(c, tp, layer, tensor.name, tensor.shape[0], cols);
    ASSERT_EQ(static_cast<std::int64_t>(want.size()), tensor.numel());
    for (std::size_t e = 0; e < want.size(); ++e) {
      const auto it = found.find({static_cast<int>(i), static_cast<std::int64_t>(e)});
      ASSERT_NE(it, found.end()) << tensor.name << " element " << e << " not covered, tp " << tp;
      ASSERT_EQ(it->second, want[e]) << tensor.name << " element " << e << ", tp " << tp;
    }
    total += want.size();
  }
  EXPECT_EQ(found.size(), total);
}

TEST(HfNames, EveryShardElementLandsWhereTheHandDerivationSays) {
  for (int tp : {1, 2, 4}) check_runs(small_config(), tp);
}

TEST(HfNames, QkvBiasSplitsIntoQKVBiases) {
  const model::TransformerConfig c = small_config(true);
  const HfLayout hf(spec_for(c, 2));
  bool seen = false;
  for (const HfTensor& t : hf.tensors())
    seen = seen || t.name == "model.layers.1.self_attn.v_proj.bias";
  EXPECT_TRUE(seen);
  for (int tp : {1, 2}) check_runs(c, tp);
}

TEST(HfNames, TaskNamesAndTheirTpDependence) {
  const model::TransformerConfig c = small_config();
  const model::ModelSpec fused = spec_for(c, 2), split = spec_for(c, 2, true);
  const HfLayout a(fused), b(split);
  auto index = [](const model::ModelSpec& s, const std::string& n) {
    for (std::size_t p = 0; p < s.params.size(); ++p)
      if (s.params[p].name == n) return static_cast<int>(p);
    return -1;
  };
  const int qkv = index(fused, "decoder.layers.1.self_attention.linear_qkv.weight");
  const int fc1 = index(fused, "decoder.layers.1.mlp.linear_fc1.weight");
  const int proj = index(fused, "decoder.layers.1.self_attention.linear_proj.weight");
  EXPECT_EQ(a.task_name(qkv, -1), "model.layers.1.self_attn.qkv_proj.weight");
  EXPECT_EQ(a.task_name(fc1, -1), "model.layers.1.mlp.gate_up_proj.weight");
  EXPECT_EQ(a.task_name(proj, -1), "model.layers.1.self_attn.o_proj.weight");
  // fc1 at TP 2 (f = 12): shard 0 holds gate 0..5, up 0..5; shard 1 gate 6..11, up 6..11.
  std::vector<std::int64_t> fc1_rows;
  for (std::int64_t r = 0; r < 6; ++r) fc1_rows.push_back(r);    // gate_0
  for (std::int64_t r = 12; r < 18; ++r) fc1_rows.push_back(r);  // up_0
  for (std::int64_t r = 6; r < 12; ++r) fc1_rows.push_back(r);   // gate_1
  for (std::int64_t r = 18; r < 24; ++r) fc1_rows.push_back(r);  // up_1
  EXPECT_EQ(a.task_logical_rows(fc1, -1, 2), fc1_rows);
  EXPECT_TRUE(a.task_logical_rows(fc1, -1, 1).empty());
  EXPECT_TRUE(a.task_logical_rows(qkv, -1, 2).empty());
  EXPECT_EQ(b.task_name(qkv, 0), "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(b.task_name(qkv, 2), "model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(b.task_name(fc1, 0), "model.layers.1.mlp.gate_proj.weight");
  EXPECT_EQ(b.task_name(fc1, 1), "model.layers.1.mlp.up_proj.weight");
  EXPECT_TRUE(b.task_logical_rows(fc1, 1, 2).empty());
  model::BuildOptions per_head;
  per_head.tp = 1;
  per_head.qkv_split = model::QkvSplit::kPerHead;
  const model::ModelSpec heads = model::build_transformer(c, per_head);
  const HfLayout h(heads);
  const int q = index(heads, "decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(h.task_name(q, 3), "model.layers.0.self_attn.q_proj.weight.head3");
  EXPECT_EQ(h.task_name(q, 9), "model.layers.0.self_attn.k_proj.weight.head1");
}

// A checkpoint's config.json reads back (model::read_hf_config) as the same model for each
// family it writes: qwen3 (q/k norm), qwen2 (QKV bias), llama (neither), tied or not.
TEST(HfNames, CheckpointConfigJsonReadsBackAsTheSameModel) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("canzona_hf_config_" + std::to_string(::getpid()) + ".json"))
                               .string();
  for (int family = 0; family < 3; ++family) {
    model::TransformerConfig c = small_config(family == 1);
    c.qk_norm = family == 0;
    c.tied_embeddings = family == 2;
    c.rope_theta = 5e5;
    c.rms_norm_eps = 1e-5;
    write_json_file(path, hf_config(c, 1024));
    const model::TransformerConfig back = model::read_hf_config(path);
    EXPECT_EQ(config_difference(back, c), "") << "family " << family;
    EXPECT_EQ(back.qk_norm, c.qk_norm);
    EXPECT_EQ(back.qkv_bias, c.qkv_bias);
  }
  std::filesystem::remove(path);
}

TEST(HfNames, AParamListModelHasNoHfLayout) {
  model::ModelSpec spec;
  spec.name = "list";
  spec.params.push_back({"w", {4, 4}, -1, model::OptimizerClass::kMatrix, -1, -1, {}});
  try {
    HfLayout hf(spec);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("param 'w' has no Hugging Face name"), std::string::npos)
        << e.what();
  }
}

// A MoE layer's HF names (Qwen3-MoE): small_config with 3 experts of f_e 6 in layer 0 (layer 1
// keeps the dense MLP). By hand: expert e's fc1 [12, 16] is [gate_proj; up_proj], rows 0..5 the
// gate's, 6..11 the up's, whole on every TP rank (experts are not split), so each shard's runs are
// gate elements 0..95 then up elements 0..95; the router is mlp.gate, the MLP norm
// post_attention_layernorm; an unsplit fc1's task is experts.<e>.gate_up_proj, its pieces
// gate_proj and up_proj; the config writes and reads back as the same model.
int index_of(const model::ModelSpec& s, const std::string& n) {
  for (std::size_t p = 0; p < s.params.size(); ++p)
    if (s.params[p].name == n) return static_cast<int>(p);
  ADD_FAILURE() << "no param " << n;
  return 0;
}

TEST(HfNames, MoeLayersUseQwen3MoesNames) {
  model::TransformerConfig c = small_config();
  c.num_experts = 3;
  c.experts_per_token = 2;
  c.moe_ffn_hidden = 6;
  c.mlp_only_layers = {1};
  for (bool split : {false, true}) {
    model::BuildOptions b;
    b.tp = 2;
    b.split_fc1 = split;
    const model::ModelSpec spec = model::build_transformer(c, b);
    const HfLayout hf(spec);
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (const HfTensor& t : hf.tensors()) shapes[t.name] = t.shape;
    const std::string l = "model.layers.0.";
    EXPECT_EQ(shapes[l + "post_attention_layernorm.weight"], (std::vector<std::int64_t>{16}));
    EXPECT_EQ(shapes[l + "mlp.gate.weight"], (std::vector<std::int64_t>{3, 16}));
    for (int e = 0; e < 3; ++e) {
      const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
      EXPECT_EQ(shapes[x + "gate_proj.weight"], (std::vector<std::int64_t>{6, 16}));
      EXPECT_EQ(shapes[x + "up_proj.weight"], (std::vector<std::int64_t>{6, 16}));
      EXPECT_EQ(shapes[x + "down_proj.weight"], (std::vector<std::int64_t>{16, 6}));
    }
    EXPECT_EQ(shapes.count("model.layers.1.mlp.gate_proj.weight"), 1u);  // dense layer 1
    EXPECT_EQ(shapes.size(), hf.tensors().size());
    const int fc1 =
        index_of(spec, "decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight");
    const std::string x = l + "mlp.experts.1.";
    for (int t = 0; t < 2; ++t) {
      const std::vector<ElementRun> runs = hf.runs(fc1, 2, t);
      ASSERT_EQ(runs.size(), 2u);
      EXPECT_EQ(hf.tensors()[static_cast<std::size_t>(runs[0].tensor)].name,
                x + "gate_proj.weight");
      EXPECT_EQ(hf.tensors()[static_cast<std::size_t>(runs[1].tensor)].name, x + "up_proj.weight");
      EXPECT_EQ(std::make_tuple(runs[0].local, runs[0].hf, runs[0].count),
                std::make_tuple(std::int64_t{0}, std::int64_t{0}, std::int64_t{96}));
      EXPECT_EQ(std::make_tuple(runs[1].local, runs[1].hf, runs[1].count),
                std::make_tuple(std::int64_t{96}, std::int64_t{0}, std::int64_t{96}));
    }
    if (split) {
      EXPECT_EQ(hf.task_name(fc1, 0), x + "gate_proj.weight");
      EXPECT_EQ(hf.task_name(fc1, 1), x + "up_proj.weight");
    } else {
      EXPECT_EQ(hf.task_name(fc1, -1), x + "gate_up_proj.weight");
      EXPECT_TRUE(hf.task_logical_rows(fc1, -1, 2).empty());
    }
    EXPECT_EQ(
        hf.task_name(index_of(spec, "decoder.layers.1.mlp.linear_fc1.weight"), split ? 0 : -1),
        split ? "model.layers.1.mlp.gate_proj.weight" : "model.layers.1.mlp.gate_up_proj.weight");
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("canzona_moe_config_" + std::to_string(::getpid()) + ".json"))
                               .string();
  write_json_file(path, hf_config(c, 1024));
  const model::TransformerConfig back = model::read_hf_config(path);
  std::filesystem::remove(path);
  EXPECT_EQ(config_difference(back, c), "");
  EXPECT_EQ(back.mlp_only_layers, std::vector<int>{1});
  model::TransformerConfig other = c;
  other.mlp_only_layers.clear();
  EXPECT_EQ(config_difference(back, other),
            "layer 1 has experts in one and not the other (decoder_sparse_step, mlp_only_layers)");
}

// Naming::kOwn (a param-list model): each param one tensor of its own name and full shape, its
// TP shards plain slices along the split dim. By hand: shard t of a dim-0 split [6, 2] at TP 2
// holds rows 3t..3t+2, i.e. elements [6t, 6t + 6); shard t of a dim-1 split [2, 4] holds
// columns 2t, 2t+1 of each row, i.e. runs {row 0: [2t, 2t+2), row 1: [4 + 2t, 4 + 2t + 2)}. The
// fc1 name gets no gate/up interleave here (that is the transformer's layout, not a list's).
TEST(HfNames, OwnNamesKeepEachParamWholeUnderItsName) {
  model::ModelSpec spec;
  spec.name = "list";
  spec.params.push_back(
      {"b.mlp.linear_fc1.weight", {6, 2}, 0, model::OptimizerClass::kMatrix, -1, -1, {}});
  spec.params.push_back({"proj.weight", {2, 4}, 1, model::OptimizerClass::kMatrix, -1, -1, {}});
  spec.params.push_back({"norm.weight", {3}, -1, model::OptimizerClass::kElementwise, -1, -1, {}});
  const HfLayout hf(spec, Naming::kOwn);
  ASSERT_EQ(hf.tensors().size(), 3u);
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(hf.tensors()[static_cast<std::size_t>(p)].name,
              spec.params[static_cast<std::size_t>(p)].name);
    EXPECT_EQ(hf.tensors()[static_cast<std::size_t>(p)].shape,
              spec.params[static_cast<std::size_t>(p)].shape);
    EXPECT_EQ(hf.tensors_of(p), std::vector<int>{p});
    EXPECT_EQ(hf.task_name(p, -1), spec.params[static_cast<std::size_t>(p)].name);
    EXPECT_TRUE(hf.task_logical_rows(p, -1, 2).empty());
  }
  auto runs = [&](int p, int t) {
    std::vector<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>> out;
    for (const ElementRun& r : hf.runs(p, 2, t)) out.emplace_back(r.tensor, r.local, r.hf, r.count);
    return out;
  };
  using Runs = std::vector<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>>;
  EXPECT_EQ(runs(0, 0), (Runs{{0, 0, 0, 6}}));
  EXPECT_EQ(runs(0, 1), (Runs{{0, 0, 6, 6}}));
  EXPECT_EQ(runs(1, 0), (Runs{{1, 0, 0, 2}, {1, 2, 4, 2}}));
  EXPECT_EQ(runs(1, 1), (Runs{{1, 0, 2, 2}, {1, 2, 6, 2}}));
  EXPECT_EQ(runs(2, 1), (Runs{{2, 0, 0, 3}}));
}

// params_difference names the first param that differs, in each field it compares.
TEST(HfNames, ParamsDifferenceNamesTheFirstDifference) {
  model::ModelSpec a;
  a.params.push_back({"w", {4, 4}, 0, model::OptimizerClass::kMatrix, 0, -1, {}});
  a.params.push_back({"n", {4}, -1, model::OptimizerClass::kElementwise, 0, -1, {}});
  model::ModelSpec b = a;
  b.params[0].layer = 3;  // the plan's business, not the model's
  EXPECT_EQ(params_difference(a, b), "");
  b.params[1].shape = {5};
  EXPECT_EQ(params_difference(a, b), "param 1 'n' shape [4] vs [5]");
  b = a;
  b.params[0].tp_split_dim = 1;
  EXPECT_EQ(params_difference(a, b), "param 0 'w' tp_split_dim 0 vs 1");
  b = a;
  b.params[0].optimizer = model::OptimizerClass::kElementwise;
  EXPECT_EQ(params_difference(a, b), "param 0 'w' optimizer matrix vs elementwise");
  b = a;
  b.params[1].name = "m";
  EXPECT_EQ(params_difference(a, b), "param 1 'n' vs 'm'");
  b.params.pop_back();
  EXPECT_EQ(params_difference(a, b), "2 params vs 1");
}

}  // namespace
}  // namespace canzona::ckpt
