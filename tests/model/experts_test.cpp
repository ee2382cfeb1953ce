// model::expert_part, expert_index and the expert fc1's logical rows: the expert buffer one EP
// rank holds, against names and row ranges derived by hand from Megatron's expert layout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/model/spec.h"

namespace canzona::model {
namespace {

using ::testing::HasSubstr;

ParamSpec named(const std::string& name) {
  return {name, {2, 2}, -1, OptimizerClass::kMatrix, 0, -1, {}};
}

TEST(ExpertIndex, ReadsMegatronAndHfNames) {
  EXPECT_EQ(expert_index(named("decoder.layers.0.mlp.experts.local_experts.12.linear_fc1.weight")),
            12);
  EXPECT_EQ(expert_index(named("model.layers.3.mlp.experts.7.gate_proj.weight")), 7);
  EXPECT_EQ(expert_index(named("decoder.layers.0.mlp.experts.linear_fc1.weight")), -1);
  EXPECT_EQ(expert_index(named("decoder.layers.0.mlp.experts.7")), -1);
  EXPECT_EQ(expert_index(named("decoder.layers.0.mlp.linear_fc1.weight")), -1);
  // Any module path (a user's own MoE block): the component after a component "experts".
  EXPECT_EQ(expert_index(named("blocks.1.moe.experts.3.w1.weight")), 3);
  EXPECT_EQ(expert_index(named("experts.11.fc2")), 11);
  EXPECT_EQ(expert_index(named("blocks.1.myexperts.3.w1")), -1);
  EXPECT_EQ(expert_index(named("blocks.1.experts.x.3.w1")), -1);
  EXPECT_TRUE(is_expert_param(named("blocks.1.moe.experts.3.w1.weight")));
  EXPECT_FALSE(is_expert_param(named("blocks.1.moe.router.weight")));
}

// qwen3-moe-cpu: 4 MoE layers of 8 experts, hidden 256, expert FFN 512. EP rank 1 of 2 holds
// experts 4..7 of every layer; ETP 2 splits fc1 by rows (shard t = [gate_t; up_t], 256 rows
// each) and fc2 by columns.
TEST(ExpertPart, EpRankHoldsItsExpertsSplitOverEtp) {
  const ModelSpec m = build_transformer(preset("qwen3-moe-cpu"), {.tp = 1, .split_fc1 = true});
  ASSERT_TRUE(has_experts(m));
  const ExpertPart part = expert_part(m, 2, 2, 1);
  ASSERT_EQ(part.model.params.size(), 4u * 4 * 2);
  ASSERT_EQ(part.source.size(), part.model.params.size());
  EXPECT_EQ(part.model.params[0].name,
            "decoder.layers.0.mlp.experts.local_experts.4.linear_fc1.weight");
  EXPECT_EQ(part.model.params[1].name,
            "decoder.layers.0.mlp.experts.local_experts.4.linear_fc2.weight");
  EXPECT_EQ(part.model.params[7].name,
            "decoder.layers.0.mlp.experts.local_experts.7.linear_fc2.weight");
  EXPECT_EQ(part.model.params[8].name,
            "decoder.layers.1.mlp.experts.local_experts.4.linear_fc1.weight");
  for (std::size_t i = 0; i < part.source.size(); ++i)
    EXPECT_EQ(m.params[part.source[i]].name, part.model.params[i].name);
  const ParamSpec& fc1 = part.model.params[0];
  const ParamSpec& fc2 = part.model.params[1];
  EXPECT_EQ(fc1.shape, (std::vector<std::int64_t>{1024, 256}));
  EXPECT_EQ(fc1.tp_split_dim, 0);
  EXPECT_EQ(fc2.tp_split_dim, 1);
  EXPECT_EQ(fc1.layer, 0);
  ASSERT_EQ(fc1.pieces.size(), 2u);
  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(fc1.pieces[0].row_ranges, (Ranges{{0, 256}, {512, 768}}));
  EXPECT_EQ(fc1.pieces[1].row_ranges, (Ranges{{256, 512}, {768, 1024}}));
  EXPECT_EQ(part.model.arch.num_experts, 8);
  EXPECT_EQ(part.model.arch.experts_per_token, 2);
  EXPECT_EQ(part.model.arch.num_layers, 4);
  EXPECT_EQ(part.model.arch.num_heads, 0);  // heads are the dense part's
  // ETP 1 keeps experts whole.
  const ExpertPart whole = expert_part(m, 4, 1, 0);
  ASSERT_EQ(whole.model.params.size(), 4u * 2 * 2);
  EXPECT_EQ(whole.model.params[0].tp_split_dim, -1);
  EXPECT_EQ(whole.model.params[0].pieces[0].row_ranges, (Ranges{{0, 512}}));
  EXPECT_EQ(whole.model.params[3].name,
            "decoder.layers.0.mlp.experts.local_experts.1.linear_fc2.weight");
}

// Expert TP shard t of fc1 holds [gate_t; up_t]: local row r of shard 1 (of 2, 512 rows) is gate
// row 256 + r for r < 256 and up row 512 + 256 + (r - 256) after.
TEST(ExpertPart, Fc1LogicalRowsFollowTheEtpShards) {
  const ModelSpec m = build_transformer(preset("qwen3-moe-cpu"), {.tp = 1});
  const ParamSpec fc1 = expert_part(m, 1, 2, 0).model.params[0];
  EXPECT_EQ(logical_row(fc1, 2, 1, 0), 256);
  EXPECT_EQ(logical_row(fc1, 2, 1, 255), 511);
  EXPECT_EQ(logical_row(fc1, 2, 1, 256), 768);
  EXPECT_EQ(logical_row(fc1, 2, 0, 256), 512);
}

TEST(ExpertPart, RejectsBadGroupsInOneLine) {
  const ModelSpec moe = build_transformer(preset("qwen3-moe-cpu"), {.tp = 1});
  const ModelSpec dense = build_transformer(preset("qwen3-tiny"), {.tp = 1});
  auto message = [](auto f) {
    try {
      f();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([&] { expert_part(moe, 3, 1, 0); }),
              HasSubstr("--ep 3 does not divide the 8 experts of model 'qwen3-moe-cpu'"));
  EXPECT_THAT(message([&] { expert_part(moe, 1, 3, 0); }),
              HasSubstr("--etp 3 does not divide its expert FFN width 512"));
  EXPECT_THAT(message([&] { expert_part(dense, 1, 1, 0); }),
              HasSubstr("need a mixture-of-experts model (model 'qwen3-tiny' has no experts)"));
  ModelSpec split = moe;
  for (ParamSpec& p : split.params)
    if (is_expert_param(p)) p.tp_split_dim = 0;
  EXPECT_THAT(message([&] { expert_part(split, 1, 1, 0); }), HasSubstr("split by --etp, not --tp"));
  ModelSpec nameless = moe;
  for (ParamSpec& p : nameless.params)
    if (is_expert_param(p)) p.name += ".x";  // still an expert, index intact
  nameless.params.push_back(
      {"decoder.layers.0.mlp.experts.bias", {4}, -1, OptimizerClass::kElementwise, 0, -1, {}});
  EXPECT_THAT(message([&] { expert_part(nameless, 1, 1, 0); }),
              HasSubstr("needs an expert index in [0, 8)"));
}

}  // namespace
}  // namespace canzona::model
