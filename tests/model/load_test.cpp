#include "canzona/model/load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "test_util.h"

namespace canzona::model {
namespace {

using ::testing::AllOf;
using testing::data_path;
using ::testing::HasSubstr;
using testing::scratch_file;
using ::testing::ThrowsMessage;

TEST(Load, PresetNameBuildsPresetWithOptions) {
  const ModelSpec m = load_model("qwen3-tiny", {.tp = 2, .qkv_split = QkvSplit::kQkv});
  EXPECT_EQ(m.name, "qwen3-tiny");
  EXPECT_EQ(m.params[3].pieces.size(), 3u);
  EXPECT_EQ(m.arch.padded_vocab_size, 512);
}

TEST(Load, HfConfigPathAndDirectory) {
  const ModelSpec from_file = load_model(data_path("Qwen3-0.6B/config.json"), {.tp = 8});
  EXPECT_EQ(from_file.name, "Qwen3-0.6B");
  EXPECT_EQ(from_file.params[0].shape, (std::vector<std::int64_t>{152576, 1024}));
  const ModelSpec from_dir = load_model(data_path("Qwen3-0.6B"), {});
  EXPECT_EQ(from_dir.total_numel(), 596'049'920LL);
}

TEST(Load, ParamListRecognisedByParamsKey) {
  const ModelSpec m = load_model(data_path("toy_params.json"), {.qkv_split = QkvSplit::kPerHead});
  EXPECT_EQ(m.name, "toy");
  EXPECT_EQ(m.params.size(), 7u);
  EXPECT_EQ(m.params[1].pieces.size(), 2u);  // explicit pieces, options do not apply
}

TEST(Load, UnknownNameListsPresets) {
  EXPECT_THAT([] { load_model("qwen9-huge", {}); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("unknown model 'qwen9-huge'"),
                                              HasSubstr("qwen3-0.6b"), HasSubstr("qwen3-tiny"))));
}

TEST(Load, ValidatesAgainstTp) {
  EXPECT_THAT([] { load_model("qwen3-tiny", {.tp = 4}); },
              ThrowsMessage<UsageError>(HasSubstr("not divisible by tp=4")));
  EXPECT_THAT(
      [] { load_model(data_path("toy_params.json"), {.tp = 3}); },
      ThrowsMessage<UsageError>(HasSubstr(
          "param 'embedding.word_embeddings.weight': dim 0 (size 256) not divisible by tp=3")));
  const std::string dup = scratch_file(
      "dup.json", R"({"params": [{"name": "w", "shape": [4]}, {"name": "w", "shape": [4]}]})");
  EXPECT_THAT([&] { load_model(dup, {}); },
              ThrowsMessage<UsageError>(HasSubstr("duplicate param name 'w'")));
}

}  // namespace
}  // namespace canzona::model
