#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::model {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

const ParamSpec& find(const ModelSpec& m, const std::string& name) {
  for (const ParamSpec& p : m.params) {
    if (p.name == name) return p;
  }
  throw std::runtime_error("no param " + name);
}

const Piece& piece(const ParamSpec& p, const std::string& name) {
  for (const Piece& k : p.pieces) {
    if (k.name == name) return k;
  }
  throw std::runtime_error("no piece " + name + " in " + p.name);
}

struct Expected {
  std::string name;
  std::vector<std::int64_t> shape;
  int split;
  OptimizerClass optimizer;
  int layer;
};

TEST(Transformer, TinyParamsInMegatronRegistrationOrder) {
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {});
  constexpr auto kM = OptimizerClass::kMatrix;
  constexpr auto kE = OptimizerClass::kElementwise;
  std::vector<Expected> expected = {{"embedding.word_embeddings.weight", {512, 128}, 0, kE, -1}};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    const std::vector<Expected> layer = {
        {p + "self_attention.linear_proj.weight", {128, 128}, 1, kM, i},
        {p + "self_attention.linear_qkv.layer_norm_weight", {128}, -1, kE, i},
        {p + "self_attention.linear_qkv.weight", {256, 128}, 0, kM, i},
        {p + "self_attention.q_layernorm.weight", {32}, -1, kE, i},
        {p + "self_attention.k_layernorm.weight", {32}, -1, kE, i},
        {p + "mlp.linear_fc1.layer_norm_weight", {128}, -1, kE, i},
        {p + "mlp.linear_fc1.weight", {768, 128}, 0, kM, i},
        {p + "mlp.linear_fc2.weight", {128, 384}, 1, kM, i},
    };
    expected.insert(expected.end(), layer.begin(), layer.end());
  }
  expected.push_back({"decoder.final_layernorm.weight", {128}, -1, kE, -1});

  ASSERT_EQ(m.params.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(m.params[i].name, expected[i].name);
    EXPECT_EQ(m.params[i].shape, expected[i].shape);
    EXPECT_EQ(m.params[i].tp_split_dim, expected[i].split);
    EXPECT_EQ(m.params[i].optimizer, expected[i].optimizer);
    EXPECT_EQ(m.params[i].layer, expected[i].layer);
    EXPECT_EQ(m.params[i].stage, -1);
    EXPECT_TRUE(m.params[i].pieces.empty());
  }
  EXPECT_EQ(m.name, "qwen3-tiny");
  EXPECT_EQ(m.arch.num_layers, 2);
  EXPECT_EQ(m.arch.num_heads, 4);
  EXPECT_EQ(m.arch.num_query_groups, 2);
  EXPECT_EQ(m.arch.head_dim, 32);
  EXPECT_EQ(m.arch.vocab_size, 512);
  EXPECT_EQ(m.arch.padded_vocab_size, 512);
}

TEST(Transformer, Qwen3_32bLayerShapesMatchReferenceTable) {
  const ModelSpec m = build_transformer(preset("qwen3-32b"), {});
  const std::string p = "decoder.layers.63.";
  EXPECT_EQ(find(m, p + "self_attention.linear_proj.weight").shape,
            (std::vector<std::int64_t>{5120, 8192}));
  EXPECT_EQ(find(m, p + "self_attention.linear_qkv.weight").shape,
            (std::vector<std::int64_t>{10240, 5120}));
  EXPECT_EQ(find(m, p + "self_attention.q_layernorm.weight").shape,
            (std::vector<std::int64_t>{128}));
  EXPECT_EQ(find(m, p + "mlp.linear_fc1.weight").shape, (std::vector<std::int64_t>{51200, 5120}));
  EXPECT_EQ(find(m, p + "mlp.linear_fc2.weight").shape, (std::vector<std::int64_t>{5120, 25600}));
  EXPECT_EQ(m.params.back().name, "output_layer.weight");
  EXPECT_EQ(m.params.back().shape, (std::vector<std::int64_t>{151936, 5120}));
  EXPECT_EQ(m.params.back().tp_split_dim, 0);
  EXPECT_EQ(m.params.back().optimizer, OptimizerClass::kElementwise);
}

TEST(Transformer, TiedPresetsHaveNoOutputLayer) {
  for (const char* name : {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-tiny"}) {
    const ModelSpec m = build_transformer(preset(name), {});
    EXPECT_EQ(m.params.back().name, "decoder.final_layernorm.weight") << name;
  }
  const ModelSpec mini = build_transformer(preset("qwen3-mini"), {});
  EXPECT_EQ(mini.params.back().name, "output_layer.weight");
  EXPECT_EQ(mini.params.back().layer, -1);
}

TEST(Transformer, QkvBiasFollowsQkvWeightAndQkNormIsOptional) {
  TransformerConfig c = preset("qwen3-tiny");
  c.qkv_bias = true;
  c.qk_norm = false;
  const ModelSpec m = build_transformer(c, {});
  EXPECT_EQ(m.params[3].name, "decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(m.params[4].name, "decoder.layers.0.self_attention.linear_qkv.bias");
  EXPECT_EQ(m.params[4].shape, (std::vector<std::int64_t>{256}));
  EXPECT_EQ(m.params[4].tp_split_dim, 0);
  EXPECT_EQ(m.params[4].optimizer, OptimizerClass::kElementwise);
  EXPECT_EQ(m.params[5].name, "decoder.layers.0.mlp.linear_fc1.layer_norm_weight");
}

TEST(Transformer, PaddedVocabIsMultipleOf128Tp) {
  struct Row {
    std::int64_t vocab;
    int tp;
    std::int64_t padded;
  };
  for (const Row& r : {Row{151936, 1, 151936}, Row{151936, 2, 152064}, Row{151936, 4, 152064},
                       Row{151936, 8, 152576}, Row{512, 3, 768}, Row{1, 1, 128}, Row{128, 1, 128},
                       Row{129, 1, 256}}) {
    EXPECT_EQ(padded_vocab_size(r.vocab, r.tp), r.padded) << r.vocab << " tp=" << r.tp;
  }
  const ModelSpec m = build_transformer(preset("qwen3-8b"), {.tp = 8});
  EXPECT_EQ(m.arch.padded_vocab_size, 152576);
  EXPECT_EQ(m.params.front().shape, (std::vector<std::int64_t>{152576, 4096}));
  EXPECT_EQ(m.params.back().shape, (std::vector<std::int64_t>{152576, 4096}));
}

TEST(Transformer, OptimizerRuleExcludesEmbeddingOutputAndRouter) {
  EXPECT_EQ(default_optimizer_class("embedding.word_embeddings.weight", {512, 128}),
            OptimizerClass::kElementwise);
  EXPECT_EQ(default_optimizer_class("output_layer.weight", {512, 128}),
            OptimizerClass::kElementwise);
  EXPECT_EQ(default_optimizer_class("decoder.layers.0.mlp.router.weight", {8, 128}),
            OptimizerClass::kElementwise);
  EXPECT_EQ(default_optimizer_class("decoder.layers.0.mlp.linear_fc2.weight", {128, 384}),
            OptimizerClass::kMatrix);
  EXPECT_EQ(default_optimizer_class("decoder.layers.0.mlp.linear_fc2.bias", {128}),
            OptimizerClass::kElementwise);
  const ModelSpec m = build_transformer(preset("qwen3-mini"), {});
  for (const ParamSpec& p : m.params) {
    const bool excluded =
        p.name == "embedding.word_embeddings.weight" || p.name == "output_layer.weight";
    EXPECT_EQ(p.is_matrix(), p.shape.size() == 2 && !excluded) << p.name;
  }
}

TEST(Transformer, QkvSplitInterleavesPerQueryGroup) {
  // qwen3-tiny: 4 heads, 2 groups, head_dim 32 -> per group [q q | k | v], 128 rows.
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {.qkv_split = QkvSplit::kQkv});
  const ParamSpec& qkv = find(m, "decoder.layers.1.self_attention.linear_qkv.weight");
  ASSERT_EQ(qkv.pieces.size(), 3u);
  EXPECT_EQ(qkv.pieces[0].name, "q");
  EXPECT_EQ(qkv.pieces[1].name, "k");
  EXPECT_EQ(qkv.pieces[2].name, "v");
  EXPECT_EQ(qkv.pieces[0].row_ranges, (Ranges{{0, 64}, {128, 192}}));
  EXPECT_EQ(qkv.pieces[1].row_ranges, (Ranges{{64, 96}, {192, 224}}));
  EXPECT_EQ(qkv.pieces[2].row_ranges, (Ranges{{96, 128}, {224, 256}}));
  EXPECT_EQ(qkv.pieces[0].rows(), 128);
  EXPECT_EQ(qkv.pieces[1].rows(), 64);
  EXPECT_TRUE(find(m, "decoder.layers.1.mlp.linear_fc1.weight").pieces.empty());
}

TEST(Transformer, PerHeadSplitHasOnePiecePerHead) {
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {.qkv_split = QkvSplit::kPerHead});
  const ParamSpec& qkv = find(m, "decoder.layers.0.self_attention.linear_qkv.weight");
  std::vector<std::string> names;
  for (const Piece& k : qkv.pieces) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"q0", "q1", "q2", "q3", "k0", "k1", "v0", "v1"}));
  EXPECT_EQ(piece(qkv, "q0").row_ranges, (Ranges{{0, 32}}));
  EXPECT_EQ(piece(qkv, "q1").row_ranges, (Ranges{{32, 64}}));
  EXPECT_EQ(piece(qkv, "k0").row_ranges, (Ranges{{64, 96}}));
  EXPECT_EQ(piece(qkv, "v0").row_ranges, (Ranges{{96, 128}}));
  EXPECT_EQ(piece(qkv, "q2").row_ranges, (Ranges{{128, 160}}));
  EXPECT_EQ(piece(qkv, "q3").row_ranges, (Ranges{{160, 192}}));
  EXPECT_EQ(piece(qkv, "k1").row_ranges, (Ranges{{192, 224}}));
  EXPECT_EQ(piece(qkv, "v1").row_ranges, (Ranges{{224, 256}}));
}

TEST(Transformer, Fc1SplitIsGateThenUpAtTp1) {
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {.split_fc1 = true});
  const ParamSpec& fc1 = find(m, "decoder.layers.0.mlp.linear_fc1.weight");
  ASSERT_EQ(fc1.pieces.size(), 2u);
  EXPECT_EQ(fc1.pieces[0].name, "gate");
  EXPECT_EQ(fc1.pieces[0].row_ranges, (Ranges{{0, 384}}));
  EXPECT_EQ(fc1.pieces[1].name, "up");
  EXPECT_EQ(fc1.pieces[1].row_ranges, (Ranges{{384, 768}}));
  EXPECT_TRUE(find(m, "decoder.layers.0.self_attention.linear_qkv.weight").pieces.empty());
}

TEST(Transformer, Fc1SplitFollowsTpShardLayout) {
  // Each TP shard of fc1 is [gate_t; up_t]; global rows are the shards concatenated.
  const ModelSpec m = build_transformer(preset("qwen3-tiny"), {.tp = 2, .split_fc1 = true});
  const ParamSpec& fc1 = find(m, "decoder.layers.0.mlp.linear_fc1.weight");
  EXPECT_EQ(piece(fc1, "gate").row_ranges, (Ranges{{0, 192}, {384, 576}}));
  EXPECT_EQ(piece(fc1, "up").row_ranges, (Ranges{{192, 384}, {576, 768}}));
}

TEST(Transformer, PiecesCoverEveryRowExactlyOnce) {
  for (const char* name : {"qwen3-tiny", "qwen3-mini", "qwen3-32b"}) {
    for (QkvSplit split : {QkvSplit::kQkv, QkvSplit::kPerHead}) {
      for (int tp : {1, 2}) {
        const ModelSpec m =
            build_transformer(preset(name), {.tp = tp, .qkv_split = split, .split_fc1 = true});
        for (const ParamSpec& p : m.params) {
          if (p.pieces.empty()) continue;
          std::vector<int> hits(p.rows(), 0);
          for (const Piece& k : p.pieces) {
            for (auto [b, e] : k.row_ranges) {
              for (std::int64_t r = b; r < e; ++r) ++hits[r];
            }
          }
          const auto bad = std::find_if(hits.begin(), hits.end(), [](int h) { return h != 1; });
          ASSERT_EQ(bad, hits.end())
              << name << " " << p.name << " tp=" << tp << " row " << (bad - hits.begin());
        }
        EXPECT_NO_THROW(validate(m, tp));
      }
    }
  }
}

TEST(Transformer, RejectsTpNotDividingQueryGroups) {
  EXPECT_THAT(
      [] { build_transformer(preset("qwen3-tiny"), {.tp = 4}); },
      ThrowsMessage<UsageError>(HasSubstr("2 query groups (KV heads) not divisible by tp=4")));
}

TEST(Transformer, RejectsTpNotDividingHeads) {
  TransformerConfig c = preset("qwen3-tiny");
  c.num_heads = 6;
  c.num_query_groups = 6;
  c.hidden = 192;
  EXPECT_THAT([&] { build_transformer(c, {.tp = 4}); },
              ThrowsMessage<UsageError>(HasSubstr("6 attention heads not divisible by tp=4")));
}

TEST(Transformer, RejectsGroupsNotDividingHeads) {
  TransformerConfig c = preset("qwen3-tiny");
  c.num_query_groups = 3;
  EXPECT_THAT(
      [&] { build_transformer(c, {}); },
      ThrowsMessage<UsageError>(HasSubstr("num_heads 4 not divisible by num_query_groups 3")));
}

TEST(Transformer, RejectsNonPositiveSizes) {
  TransformerConfig c = preset("qwen3-tiny");
  c.ffn_hidden = 0;
  EXPECT_THAT([&] { build_transformer(c, {}); },
              ThrowsMessage<UsageError>(HasSubstr("ffn_hidden = 0 must lie in [1, ")));
  EXPECT_THAT([] { build_transformer(preset("qwen3-tiny"), {.tp = 0}); },
              ThrowsMessage<UsageError>(HasSubstr("tp=0")));
}

// Configs asking for unbounded sizes are refused before anything is allocated, naming the limit;
// sizes that once wrapped around into a "negative dimension" now name theirs.
TEST(Transformer, SizesBeyondTheLimitsAreRefusedBeforeBuilding) {
  auto refused = [](TransformerConfig c, const std::string& limit, BuildOptions o = {}) {
    EXPECT_THAT([&] { build_transformer(c, o); }, ThrowsMessage<UsageError>(HasSubstr(limit)));
  };
  const TransformerConfig tiny = preset("qwen3-tiny");
  TransformerConfig c = tiny;
  c.num_layers = 1000000000;
  refused(c, "kMaxLayers");
  c = tiny;
  c.hidden = std::int64_t{1} << 62;
  refused(c, "kMaxHidden");
  c = tiny;
  c.ffn_hidden = std::int64_t{1} << 62;
  refused(c, "kMaxFfnHidden");
  c = tiny;
  c.vocab_size = std::int64_t{1} << 60;
  refused(c, "kMaxVocab");
  c = tiny;
  c.num_heads = c.num_query_groups = 1 << 20;
  refused(c, "kMaxHeads");
  c = tiny;
  c.num_layers = 4096;
  c.num_heads = c.num_query_groups = 65536;
  c.head_dim = 1;
  BuildOptions per_head;
  per_head.qkv_split = QkvSplit::kPerHead;
  refused(c, "kMaxPieces", per_head);
  EXPECT_THAT([] { padded_vocab_size(INT64_MAX, 1); },
              ThrowsMessage<UsageError>(HasSubstr("padded vocabulary")));
}

}  // namespace
}  // namespace canzona::model
