#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "test_util.h"

namespace canzona::model {
namespace {

using ::testing::AllOf;
using testing::data_path;
using testing::expect_same_model;
using testing::file_bytes;
using ::testing::HasSubstr;
using testing::scratch_dir;
using testing::scratch_file;
using ::testing::ThrowsMessage;

void expect_list_error(const std::string& params_json, const std::string& message) {
  const std::string path =
      scratch_file("params.json", R"({"name": "t", "params": )" + params_json + "}");
  EXPECT_THAT([&] { read_param_list(path); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr(path + ": "), HasSubstr(message))));
}

TEST(ParamList, RoundTripIsByteIdentical) {
  ModelSpec model = build_transformer(preset("qwen3-mini"),
                                      {.tp = 2, .qkv_split = QkvSplit::kQkv, .split_fc1 = true});
  model.params[0].stage = 0;
  model.params.back().stage = 1;
  const std::string first = (scratch_dir() / "first.json").string();
  const std::string second = (scratch_dir() / "second.json").string();
  write_param_list(first, model);
  const ModelSpec read_back = read_param_list(first);
  expect_same_model(read_back, model);
  write_param_list(second, read_back);
  EXPECT_EQ(file_bytes(first), file_bytes(second));
  EXPECT_GT(file_bytes(first).size(), 1000u);
}

TEST(ParamList, PerHeadPiecesRoundTrip) {
  const ModelSpec model =
      build_transformer(preset("qwen3-tiny"), {.qkv_split = QkvSplit::kPerHead});
  const std::string path = (scratch_dir() / "heads.json").string();
  write_param_list(path, model);
  expect_same_model(read_param_list(path), model);
}

TEST(ParamList, ReadsFixtureWithDefaults) {
  const ModelSpec m = read_param_list(data_path("toy_params.json"));
  EXPECT_EQ(m.name, "toy");
  EXPECT_EQ(m.arch.num_layers, 0);
  ASSERT_EQ(m.params.size(), 7u);
  const ParamSpec& embedding = m.params[0];
  EXPECT_EQ(embedding.shape, (std::vector<std::int64_t>{256, 16}));
  EXPECT_EQ(embedding.tp_split_dim, 0);
  EXPECT_EQ(embedding.optimizer, OptimizerClass::kElementwise);
  EXPECT_EQ(embedding.layer, -1);
  EXPECT_EQ(embedding.stage, -1);
  const ParamSpec& qkv = m.params[1];
  EXPECT_EQ(qkv.optimizer, OptimizerClass::kMatrix);
  EXPECT_EQ(qkv.layer, 0);
  ASSERT_EQ(qkv.pieces.size(), 2u);
  EXPECT_EQ(qkv.pieces[1].name, "kv");
  EXPECT_EQ(qkv.pieces[1].row_ranges,
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{16, 48}}));
  EXPECT_EQ(m.params[2].tp_split_dim, -1);
  EXPECT_EQ(m.params[2].optimizer, OptimizerClass::kElementwise);
  EXPECT_EQ(m.params[3].optimizer, OptimizerClass::kElementwise);  // explicit beats the rule
  EXPECT_EQ(m.params[4].optimizer, OptimizerClass::kElementwise);  // router
  EXPECT_EQ(m.params[5].stage, 0);
  EXPECT_NO_THROW(validate(m, 2));
}

TEST(ParamList, ArchRoundTripsAndMissingNameDefaultsToPath) {
  const std::string path =
      scratch_file("arch.json", R"({"arch": {"num_layers": 3, "num_heads": 4}, "params": [
        {"name": "w", "shape": [4, 4], "layer": 2}]})");
  const ModelSpec m = read_param_list(path);
  EXPECT_EQ(m.name, path);
  EXPECT_EQ(m.arch.num_layers, 3);
  EXPECT_EQ(m.arch.num_heads, 4);
  EXPECT_EQ(m.arch.num_query_groups, 0);
}

TEST(ParamList, RejectsMissingKeys) {
  expect_list_error(R"([{"name": "a", "shape": [2]}, {"name": "b"}])",
                    "params[1]: key 'shape' missing");
  expect_list_error(R"([{"shape": [2]}])", "params[0]: key 'name' missing");
  expect_list_error(R"([{"name": "w", "shape": [4, 4], "pieces": [{"name": "q"}]}])",
                    "params[0].pieces[0]: key 'rows' missing");
  const std::string path = scratch_file("no_params.json", R"({"name": "t"})");
  EXPECT_THAT([&] { read_param_list(path); },
              ThrowsMessage<UsageError>(HasSubstr(path + ": key 'params' missing")));
}

TEST(ParamList, RejectsWrongTypes) {
  expect_list_error(R"({"name": "a"})", "key 'params' must be an array");
  expect_list_error(R"([3])", "params[0]: expected a JSON object");
  expect_list_error(R"([{"name": 7, "shape": [2]}])", "params[0]: key 'name' must be a string");
  expect_list_error(R"([{"name": "a", "shape": 2}])",
                    "params[0]: key 'shape' must be an array of positive integers");
  expect_list_error(R"([{"name": "a", "shape": [1, 1, 1, 1, 1, 1, 1, 1, 1]}])",
                    "params[0]: key 'shape' has 9 dimensions; at most 8 (kMaxTensorDims)");
  expect_list_error(R"([{"name": "a", "shape": [2, 0]}])",
                    "params[0]: key 'shape[1]' must be a positive integer");
  expect_list_error(R"([{"name": "a", "shape": [2], "tp_split_dim": -2}])",
                    "params[0]: key 'tp_split_dim' must be an integer >= -1");
  expect_list_error(R"([{"name": "a", "shape": [2], "layer": "1"}])",
                    "params[0]: key 'layer' must be an integer >= -1");
  expect_list_error(R"([{"name": "a", "shape": [2], "optimizer": "muon"}])",
                    "params[0]: key 'optimizer' must be \"matrix\" or \"elementwise\"");
  expect_list_error(R"([{"name": "a", "shape": [2, 2], "pieces": {}}])",
                    "params[0]: key 'pieces' must be an array");
  expect_list_error(R"([{"name": "a", "shape": [2, 2], "pieces": [{"name": "q", "rows": [[0]]}]}])",
                    "params[0].pieces[0]: key 'rows[0]' must be a [begin, end] pair");
  expect_list_error(
      R"([{"name": "a", "shape": [2, 2], "pieces": [{"name": "q", "rows": [[-1, 2]]}]}])",
      "params[0].pieces[0]: key 'rows[0][0]' must be an integer >= 0");
}

// A 0-D, 3-D or 4-D tensor (a scale, a position table, a conv filter) is planned as [numel] for
// AdamW, or as its declared row-major matrix_view for the matrix optimizer; the file keeps its own
// shape, and write -> read reproduces both.
TEST(ParamList, TensorsOfAnyRankArePlannedAsAViewAndKeepTheirShape) {
  const std::string path = scratch_file("shapes.json", R"({"name": "vit", "params": [
      {"name": "scale", "shape": []},
      {"name": "pos", "shape": [1, 17, 32]},
      {"name": "conv.weight", "shape": [32, 3, 8, 8], "matrix_view": [32, 192]},
      {"name": "w", "shape": [32, 32]}]})");
  const ModelSpec m = read_param_list(path);
  ASSERT_EQ(m.params.size(), 4u);
  EXPECT_EQ(m.params[0].shape, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(m.params[0].own_shape(), (std::vector<std::int64_t>{}));
  EXPECT_EQ(m.params[0].optimizer, OptimizerClass::kElementwise);
  EXPECT_EQ(m.params[1].shape, (std::vector<std::int64_t>{544}));
  EXPECT_EQ(m.params[1].own_shape(), (std::vector<std::int64_t>{1, 17, 32}));
  EXPECT_EQ(m.params[1].optimizer, OptimizerClass::kElementwise);
  EXPECT_EQ(m.params[2].shape, (std::vector<std::int64_t>{32, 192}));
  EXPECT_EQ(m.params[2].own_shape(), (std::vector<std::int64_t>{32, 3, 8, 8}));
  EXPECT_EQ(m.params[2].optimizer, OptimizerClass::kMatrix);
  EXPECT_FALSE(m.params[3].tensor_shape.has_value());
  validate(m, 1);
  const std::string again = (scratch_dir() / "shapes_again.json").string();
  write_param_list(again, m);
  const ModelSpec back = read_param_list(again);
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_EQ(back.params[i].shape, m.params[i].shape) << i;
    EXPECT_EQ(back.params[i].own_shape(), m.params[i].own_shape()) << i;
    EXPECT_EQ(back.params[i].optimizer, m.params[i].optimizer) << i;
  }
  ModelSpec split = m;
  split.params[1].shape = {17, 32};
  split.params[1].tp_split_dim = 0;
  EXPECT_THAT([&] { validate(split, 1); },
              ThrowsMessage<UsageError>(HasSubstr("param 'pos' of tensor shape [1, 17, 32] cannot "
                                                  "be split over TP")));
}

TEST(ParamList, RejectsAMatrixViewOfAnotherSizeAndAMatrixWithoutOne) {
  expect_list_error(R"([{"name": "c", "shape": [4, 3, 2, 2], "matrix_view": [4, 13]}])",
                    "params[0]: 'matrix_view' [4, 13] has 52 elements, 'shape' 48");
  expect_list_error(R"([{"name": "c", "shape": [4, 3, 2, 2], "matrix_view": [48]}])",
                    "params[0]: key 'matrix_view' must be [rows, cols], got 1 dimensions");
  expect_list_error(R"([{"name": "c", "shape": [4, 3, 2], "optimizer": "matrix"}])",
                    "params[0]: a param of 3 dims needs 'matrix_view' [rows, cols] for the "
                    "matrix optimizer");
}

TEST(ParamList, RejectsUnknownKeys) {
  expect_list_error(R"([{"name": "a", "shape": [2], "tp_split": 0}])",
                    "params[0]: unknown key 'tp_split'");
  const std::string path = scratch_file(
      "arch.json", R"({"arch": {"layers": 3}, "params": [{"name": "w", "shape": [4]}]})");
  EXPECT_THAT([&] { read_param_list(path); },
              ThrowsMessage<UsageError>(HasSubstr(path + ": arch: unknown key 'layers'")));
}

}  // namespace
}  // namespace canzona::model
