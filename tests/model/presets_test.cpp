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
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b",
                                                      "qwen3-8b", "qwen3-14b", "qwen3-32b",
                                                      "qwen3-tiny", "qwen3-mini", "qwen3-cpu"}));
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
