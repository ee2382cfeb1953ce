// Built-in presets: names, the Qwen3 shapes of docs/references.md's table (hidden, intermediate,
// layers, heads, 8 KV heads, head_dim 128, vocab 151936, tied or not) and parameter counts
// (Qwen3-32B's published 32,762,123,264, and with the TP-padded vocabulary) written literally.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/model/load.h"

namespace canzona::model {
namespace {

using ::testing::HasSubstr;

TEST(Presets, NamesAreQwen3SizesThenSmallOnes) {
  EXPECT_EQ(preset_names(),
            (std::vector<std::string>{"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b",
                                      "qwen3-14b", "qwen3-32b", "qwen3-tiny", "qwen3-mini",
                                      "qwen3-cpu", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                      "qwen3-moe-cpu", "qwen3-moe-cpu-dense"}));
}

struct Qwen3Row {
  const char* name;
  std::int64_t hidden, ffn;
  int layers, heads;
  bool tied;
};

TEST(Presets, Qwen3ShapesMatchReferenceTable) {
  const Qwen3Row rows[] = {
      {"qwen3-0.6b", 1024, 3072, 28, 16, true},  {"qwen3-1.7b", 2048, 6144, 28, 16, true},
      {"qwen3-4b", 2560, 9728, 36, 32, true},    {"qwen3-8b", 4096, 12288, 36, 32, false},
      {"qwen3-14b", 5120, 17408, 40, 40, false}, {"qwen3-32b", 5120, 25600, 64, 64, false},
  };
  for (const Qwen3Row& row : rows) {
    SCOPED_TRACE(row.name);
    const TransformerConfig c = preset(row.name);
    EXPECT_EQ(c.name, row.name);
    EXPECT_EQ(c.hidden, row.hidden);
    EXPECT_EQ(c.ffn_hidden, row.ffn);
    EXPECT_EQ(c.num_layers, row.layers);
    EXPECT_EQ(c.num_heads, row.heads);
    EXPECT_EQ(c.tied_embeddings, row.tied);
    EXPECT_EQ(c.num_query_groups, 8);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.vocab_size, 151936);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(c.qkv_bias);
  }
}

TEST(Presets, SmallPresetsHaveRequestedShapes) {
  const TransformerConfig tiny = preset("qwen3-tiny");
  EXPECT_EQ(tiny.hidden, 128);
  EXPECT_EQ(tiny.ffn_hidden, 384);
  EXPECT_EQ(tiny.num_layers, 2);
  EXPECT_EQ(tiny.num_heads, 4);
  EXPECT_EQ(tiny.num_query_groups, 2);
  EXPECT_EQ(tiny.head_dim, 32);
  EXPECT_EQ(tiny.vocab_size, 512);
  EXPECT_TRUE(tiny.tied_embeddings);
  const TransformerConfig mini = preset("qwen3-mini");
  EXPECT_EQ(mini.hidden, 256);
  EXPECT_EQ(mini.ffn_hidden, 768);
  EXPECT_EQ(mini.num_layers, 4);
  EXPECT_EQ(mini.num_heads, 8);
  EXPECT_EQ(mini.num_query_groups, 4);
  EXPECT_EQ(mini.head_dim, 32);
  EXPECT_EQ(mini.vocab_size, 2048);
  EXPECT_FALSE(mini.tied_embeddings);
  EXPECT_TRUE(mini.qk_norm);
}

// docs/references.md: 32,762,123,264 params with V = 151936. By hand: per layer proj 5120 x 8192 =
// 41,943,040, qkv 10240 x 5120 = 52,428,800, fc1 51200 x 5120 = 262,144,000, fc2 5120 x 25600 =
// 131,072,000, norms 2 x 5120 + 2 x 128 = 10,496, so 487,598,336 x 64 = 31,206,293,504; plus
// embedding and output 2 x 151936 x 5120 = 1,555,824,640 and the final norm 5120.
TEST(Presets, Qwen3_32bHasPaperParamCount) {
  const ModelSpec m = build_transformer(preset("qwen3-32b"), {});
  EXPECT_EQ(m.total_numel(), 32'762'123'264LL);
  EXPECT_EQ(m.params.size(), 1u + 64u * 8u + 2u);
  EXPECT_EQ(m.arch.padded_vocab_size, 151936);  // already a multiple of 128
}

// At TP = 8 the vocabulary pads to ceil(151936 / 1024) * 1024 = 152576 (docs/references.md V_pad),
// adding 2 x 640 x 5120 = 6,553,600 params to embedding and output layer.
TEST(Presets, Qwen3_32bAtTp8CountsThePaddedVocabulary) {
  const ModelSpec m = build_transformer(preset("qwen3-32b"), {.tp = 8});
  EXPECT_EQ(m.arch.vocab_size, 151936);
  EXPECT_EQ(m.arch.padded_vocab_size, 152576);
  EXPECT_EQ(m.total_numel(), 32'768'676'864LL);
}

// Params of a spec: all, and those a token uses (every expert param times k / E: each token reaches
// k of each MoE layer's E experts).
struct Counts {
  std::int64_t total = 0, experts = 0, active = 0;
};
Counts counts(const TransformerConfig& c) {
  Counts n;
  for (const ParamSpec& p : build_transformer(c, {}).params) {
    n.total += p.numel();
    if (p.name.find(".mlp.experts.local_experts.") != std::string::npos) n.experts += p.numel();
  }
  n.active = c.num_experts == 0
                 ? n.total
                 : n.total - n.experts + n.experts / c.num_experts * c.experts_per_token;
  return n;
}

// Qwen3-30B-A3B (docs/references.md: 30.5B params, 3.3B activated). By hand: per layer qkv
// (32 + 2 x 4) x 128 = 5120 x 2048 = 10,485,760, proj 2048 x 4096 = 8,388,608, norms 2048 + 2048
// + 2 x 128 = 4,352, router 128 x 2048 = 262,144, experts 128 x (1536 x 2048 + 2048 x 768) =
// 128 x 4,718,592 = 603,979,776: 623,120,640 x 48 = 29,909,790,720; plus embedding and output
// 2 x 151936 x 2048 = 622,329,856 and the final norm 2048. Active: 8 of the 128 experts,
// 56,889,600 per layer.
TEST(Presets, Qwen3MoeHaveThePublishedParamCounts) {
  const TransformerConfig a3b = preset("qwen3-30b-a3b");
  EXPECT_EQ(a3b.hidden, 2048);
  EXPECT_EQ(a3b.num_layers, 48);
  EXPECT_EQ(a3b.num_heads, 32);
  EXPECT_EQ(a3b.num_query_groups, 4);
  EXPECT_EQ(a3b.moe_ffn_hidden, 768);
  const Counts small = counts(a3b);
  EXPECT_EQ(small.total, 30'532'122'624LL);
  EXPECT_EQ(small.active, 3'353'032'704LL);
  EXPECT_EQ(build_transformer(a3b, {}).active_numel(), 3'353'032'704LL);
  // Qwen3-235B-A22B (235B, 22B activated): per layer qkv 9216 x 4096 = 37,748,736, proj 4096 x
  // 8192 = 33,554,432, norms 8,448, router 524,288, experts 128 x 18,874,368 = 2,415,919,104:
  // 2,487,755,008 x 94, plus 2 x 151936 x 4096 = 1,244,659,712 and 4096.
  const Counts large = counts(preset("qwen3-235b-a22b"));
  EXPECT_EQ(large.total, 235'093'634'560LL);
  EXPECT_EQ(large.active, 22'190'763'520LL);
  EXPECT_EQ(build_transformer(preset("qwen3-235b-a22b"), {}).active_numel(), 22'190'763'520LL);
  EXPECT_EQ(build_transformer(preset("qwen3-32b"), {}).active_numel(), 32'762'123'264LL);
  // qwen3-moe-cpu: experts hold most of the params. Per layer qkv 384 x 256, proj 256 x 256,
  // norms 256 + 256 + 64, router 8 x 256, experts 8 x (1024 x 256 + 256 x 512) = 3,145,728:
  // 3,312,192 x 4, plus 2 x 4096 x 256 and 256.
  const Counts cpu = counts(preset("qwen3-moe-cpu"));
  EXPECT_EQ(cpu.total, 15'346'176LL);
  EXPECT_EQ(cpu.experts, 12'582'912LL);
  EXPECT_EQ(cpu.active, 5'908'992LL);
  // Its dense twin: per layer the same attention and norms (256 + 256 + 64), fc1 2048 x 256 and
  // fc2 256 x 1024 = 786,432, no router: 950,848 x 4, plus 2 x 4096 x 256 and 256 = 5,900,800,
  // the MoE's active params less its four 8 x 256 routers.
  const Counts dense = counts(preset("qwen3-moe-cpu-dense"));
  EXPECT_EQ(dense.total, 5'900'800LL);
  EXPECT_EQ(dense.experts, 0);
  EXPECT_EQ(dense.total, cpu.active - 4 * 8 * 256);
}

// A MoE layer in Megatron's layout: the attention as in a dense layer, then pre_mlp_layernorm,
// the router (element-wise) and each expert's fc1 and fc2 (matrices, not split over TP).
TEST(Presets, MoeLayerParamsFollowMegatronsLayout) {
  const ModelSpec m = build_transformer(preset("qwen3-moe-cpu"), {.tp = 2, .split_fc1 = true});
  std::vector<std::string> names;
  for (const ParamSpec& p : m.params)
    if (p.layer == 0) names.push_back(p.name);
  // The attention's 5 (proj, the QKV norm, QKV, q and k norms), the MLP norm, the router, and
  // 8 experts x (fc1, fc2).
  ASSERT_EQ(names.size(), 5u + 2u + 16u);
  EXPECT_EQ(names[5], "decoder.layers.0.pre_mlp_layernorm.weight");
  EXPECT_EQ(names[6], "decoder.layers.0.mlp.router.weight");
  EXPECT_EQ(names[7], "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight");
  EXPECT_EQ(names[8], "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight");
  EXPECT_EQ(names[22], "decoder.layers.0.mlp.experts.local_experts.7.linear_fc2.weight");
  for (const ParamSpec& p : m.params) {
    if (p.name.ends_with("mlp.router.weight")) {
      EXPECT_FALSE(p.is_matrix());
      EXPECT_EQ(p.shape, (std::vector<std::int64_t>{8, 256}));
    }
    if (p.name.find("local_experts") == std::string::npos) continue;
    EXPECT_TRUE(p.is_matrix()) << p.name;
    EXPECT_EQ(p.tp_split_dim, -1) << p.name;
    if (p.name.ends_with("linear_fc1.weight")) {
      EXPECT_EQ(p.shape, (std::vector<std::int64_t>{1024, 256}));
      ASSERT_EQ(p.pieces.size(), 2u);  // gate [0, 512) and up [512, 1024), whatever the TP
      EXPECT_EQ(p.pieces[0].row_ranges,
                (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 512}}));
      EXPECT_EQ(p.pieces[1].row_ranges,
                (std::vector<std::pair<std::int64_t, std::int64_t>>{{512, 1024}}));
    }
  }
  EXPECT_NO_THROW(validate(m, 2));
}

TEST(Presets, Qwen3_0_6bMatchesHuggingFaceParamCount) {
  const ModelSpec m = build_transformer(preset("qwen3-0.6b"), {});
  EXPECT_EQ(m.total_numel(), 596'049'920LL);
  EXPECT_EQ(m.params.back().name, "decoder.final_layernorm.weight");
}

TEST(Presets, EveryPresetValidatesAtTp1) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(validate(build_transformer(preset(name), {}), 1));
  }
}

TEST(Presets, SmallPresetsSupportSmallTp) {
  EXPECT_NO_THROW(validate(build_transformer(preset("qwen3-tiny"), {.tp = 2}), 2));
  EXPECT_NO_THROW(validate(build_transformer(preset("qwen3-mini"), {.tp = 4}), 4));
}

TEST(Presets, UnknownNameListsKnownPresets) {
  try {
    preset("qwen3-3b");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("qwen3-3b"));
    EXPECT_THAT(e.what(), HasSubstr("qwen3-0.6b"));
    EXPECT_THAT(e.what(), HasSubstr("qwen3-mini"));
  }
}

}  // namespace
}  // namespace canzona::model
