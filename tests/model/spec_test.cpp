#include "canzona/model/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/model/limits.h"

namespace canzona::model {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ParamSpec matrix(std::string name, std::int64_t rows, std::int64_t cols, int split = -1) {
  return {std::move(name), {rows, cols}, split, OptimizerClass::kMatrix, 0, -1, {}};
}

ParamSpec vector1d(std::string name, std::int64_t n) {
  return {std::move(name), {n}, -1, OptimizerClass::kElementwise, -1, -1, {}};
}

ModelSpec model_of(std::vector<ParamSpec> params) {
  ModelSpec m;
  m.name = "toy";
  m.params = std::move(params);
  return m;
}

void expect_invalid(const ModelSpec& m, int tp, const std::string& message) {
  EXPECT_THAT([&] { validate(m, tp); }, ThrowsMessage<UsageError>(HasSubstr(message)));
}

TEST(ParamSpec, SizesAndLocalShapes) {
  const ParamSpec row_parallel = matrix("w", 6, 8, 1);
  EXPECT_EQ(row_parallel.numel(), 48);
  EXPECT_EQ(row_parallel.rows(), 6);
  EXPECT_EQ(row_parallel.cols(), 8);
  EXPECT_EQ(row_parallel.local_shape(4), (std::vector<std::int64_t>{6, 2}));
  EXPECT_EQ(row_parallel.local_numel(4), 12);
  const ParamSpec column_parallel = matrix("w", 6, 8, 0);
  EXPECT_EQ(column_parallel.local_shape(3), (std::vector<std::int64_t>{2, 8}));
  const ParamSpec norm = vector1d("n", 5);
  EXPECT_EQ(norm.cols(), 1);
  EXPECT_EQ(norm.rows(), 5);
  EXPECT_EQ(norm.local_shape(4), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(norm.local_numel(4), 5);
  EXPECT_FALSE(norm.is_matrix());
}

TEST(ParamSpec, PieceRowsSumRanges) {
  const Piece piece{"q", {{0, 64}, {128, 192}, {300, 301}}};
  EXPECT_EQ(piece.rows(), 129);
}

TEST(ModelSpec, TotalNumelSumsParams) {
  EXPECT_EQ(model_of({matrix("a", 3, 4), vector1d("b", 5)}).total_numel(), 17);
}

TEST(Validate, AcceptsWellFormedModel) {
  ModelSpec m = model_of({matrix("a", 8, 4, 0), vector1d("b", 5)});
  m.params[0].pieces = {{"x", {{0, 2}, {6, 8}}}, {"y", {{2, 6}}}};
  EXPECT_NO_THROW(validate(m, 2));
}

TEST(Validate, RejectsNonPositiveTp) {
  expect_invalid(model_of({vector1d("b", 5)}), 0, "tp=0");
  expect_invalid(model_of({vector1d("b", 5)}), -2, "tp=-2");
}

TEST(Validate, RejectsEmptyModel) {
  expect_invalid(model_of({}), 1, "model 'toy' has no params");
}

TEST(Validate, RejectsZeroAndNegativeDimensions) {
  expect_invalid(model_of({matrix("w0", 0, 4)}), 1, "param 'w0' has a zero-size dimension");
  expect_invalid(model_of({matrix("wn", 3, -4)}), 1, "param 'wn' has a negative dimension");
  ParamSpec scalar = vector1d("s", 1);
  scalar.shape.clear();
  expect_invalid(model_of({scalar}), 1, "param 's' has shape []");
}

TEST(Validate, RejectsDuplicateNames) {
  expect_invalid(model_of({vector1d("b", 5), matrix("a", 2, 2), vector1d("b", 5)}), 1,
                 "duplicate param name 'b' (params 0 and 2)");
}

TEST(Validate, RejectsSplitDimOutOfRange) {
  ParamSpec norm = vector1d("norm", 8);
  norm.tp_split_dim = 1;
  expect_invalid(model_of({norm}), 1, "param 'norm': tp_split_dim 1 out of range");
  expect_invalid(model_of({matrix("w", 4, 4, -2)}), 1, "param 'w': tp_split_dim -2 out of range");
}

TEST(Validate, RejectsSplitDimNotDivisibleByTp) {
  expect_invalid(model_of({matrix("fc2", 8, 10, 1)}), 4,
                 "param 'fc2': dim 1 (size 10) not divisible by tp=4");
  EXPECT_NO_THROW(validate(model_of({matrix("fc2", 8, 10, 1)}), 5));
}

TEST(Validate, RejectsMatrixOptimizerOnVector) {
  ParamSpec norm = vector1d("norm", 8);
  norm.optimizer = OptimizerClass::kMatrix;
  expect_invalid(model_of({norm}), 1, "param 'norm': the matrix optimizer needs a 2-D shape");
}

TEST(Validate, RejectsHeadsOrGroupsNotDivisibleByTp) {
  ModelSpec m = model_of({matrix("w", 16, 16, 0)});
  m.arch.num_heads = 12;
  m.arch.num_query_groups = 4;
  EXPECT_NO_THROW(validate(m, 4));
  expect_invalid(m, 8, "12 attention heads not divisible by tp=8");
  m.arch.num_heads = 8;
  expect_invalid(m, 8, "4 query groups (KV heads) not divisible by tp=8");
}

TEST(Validate, RejectsPieceOutOfRange) {
  ModelSpec m = model_of({matrix("qkv", 8, 4)});
  m.params[0].pieces = {{"q", {{0, 4}}}, {"k", {{4, 9}}}};
  expect_invalid(m, 1, "param 'qkv': piece 'k' rows [4, 9) out of range for 8 rows");
  m.params[0].pieces = {{"q", {{0, 4}}}, {"k", {{5, 5}}}};
  expect_invalid(m, 1, "piece 'k' rows [5, 5) out of range");
}

TEST(Validate, RejectsOverlappingPieces) {
  ModelSpec m = model_of({matrix("qkv", 8, 4)});
  m.params[0].pieces = {{"q", {{0, 5}}}, {"k", {{4, 8}}}};
  expect_invalid(m, 1, "param 'qkv': pieces overlap at row 4");
}

TEST(Validate, RejectsPiecesLeavingRowsUncovered) {
  ModelSpec m = model_of({matrix("qkv", 8, 4)});
  m.params[0].pieces = {{"q", {{0, 3}}}, {"k", {{4, 8}}}};
  expect_invalid(m, 1, "param 'qkv': pieces leave rows [3, 4) uncovered");
  m.params[0].pieces = {{"q", {{0, 3}}}};
  expect_invalid(m, 1, "param 'qkv': pieces leave rows [3, 8) uncovered");
}

TEST(Validate, RejectsMalformedPieces) {
  ModelSpec m = model_of({matrix("qkv", 8, 4)});
  m.params[0].pieces = {{"q", {{0, 4}}}, {"q", {{4, 8}}}};
  expect_invalid(m, 1, "param 'qkv': duplicate piece 'q'");
  m.params[0].pieces = {{"q", {{0, 8}}}, {"k", {}}};
  expect_invalid(m, 1, "param 'qkv': piece 'k' has no rows");
  ModelSpec e = model_of({vector1d("norm", 8)});
  e.params[0].pieces = {{"a", {{0, 8}}}};
  expect_invalid(e, 1, "param 'norm': pieces are only allowed on matrix-optimizer params");
}

TEST(Validate, RejectsNegativeLayerOrStage) {
  ParamSpec p = vector1d("n", 4);
  p.layer = -3;
  expect_invalid(model_of({p}), 1, "param 'n': layer -3 is negative");
  p.layer = 0;
  p.stage = -2;
  expect_invalid(model_of({p}), 1, "param 'n': stage -2 is negative");
}

// Element counts that overflow int64 are UsageErrors naming the param, never wrapped values; and
// counts inside int64 still obey the element limits (limits.h), each named in the message.
TEST(Validate, RejectsElementCountsBeyondInt64AndTheLimits) {
  EXPECT_THAT([] { (void)matrix("w", std::int64_t{1} << 32, std::int64_t{1} << 32).numel(); },
              ThrowsMessage<UsageError>(HasSubstr("param 'w': numel")));
  expect_invalid(model_of({matrix("w", std::int64_t{1} << 32, std::int64_t{1} << 32)}), 1,
                 "overflows a 64-bit integer");
  expect_invalid(model_of({vector1d("v", kMaxDim + 1)}), 1, "kMaxDim");
  expect_invalid(model_of({matrix("w", std::int64_t{1} << 31, std::int64_t{1} << 31)}), 1,
                 "kMaxParamNumel");
  std::vector<ParamSpec> big;
  for (const char* name : {"a", "b", "c", "d", "e"})
    big.push_back(matrix(name, std::int64_t{1} << 20, std::int64_t{1} << 20));
  expect_invalid(model_of(big), 1, "kMaxModelNumel");
  ParamSpec layer = vector1d("l", 4);
  layer.layer = 2147483647;
  expect_invalid(model_of({layer}), 1, "kMaxLayers");
  ModelSpec arch = model_of({vector1d("v", 4)});
  arch.arch.num_heads = 1 << 30;
  expect_invalid(arch, 1, "kMaxHeads");
}

TEST(Validate, RejectsTooManyParams) {
  std::vector<ParamSpec> params(static_cast<std::size_t>(kMaxParams) + 1, vector1d("", 1));
  for (std::size_t i = 0; i < params.size(); ++i) params[i].name = str("p", i);
  expect_invalid(model_of(std::move(params)), 1, "kMaxParams");
}

TEST(Validate, RejectsTooManyPiecesOrRowRanges) {
  ParamSpec w = matrix("w", kMaxPieces + 1, 1);
  for (std::int64_t r = 0; r <= kMaxPieces; ++r)
    w.pieces.push_back({str("p", r), {{r, r + 1}}});
  expect_invalid(model_of({w}), 1, "kMaxPieces");
  ParamSpec ranges = matrix("r", kMaxRowRanges + 1, 1);
  Piece all{"all", {}};
  for (std::int64_t r = 0; r <= kMaxRowRanges; ++r) all.row_ranges.emplace_back(r, r + 1);
  ranges.pieces.push_back(std::move(all));
  expect_invalid(model_of({ranges}), 1, "kMaxRowRanges");
}

}  // namespace
}  // namespace canzona::model
