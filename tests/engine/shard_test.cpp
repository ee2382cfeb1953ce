// ShardMap: the TP shards of a task, packed and unpacked, rebuild exactly the task matrix the
// single-process reference sees, for every split dim, piece layout and tp.
#include "canzona/engine/shard.h"

#include <gtest/gtest.h>

#include <numeric>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "synthetic.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

// The task matrix taken straight from the global tensor: the piece's global rows, in order.
std::vector<float> task_from_global(const model::ParamSpec& p, int piece,
                                    const std::vector<float>& global) {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {{0, p.rows()}};
  if (piece >= 0) ranges = p.pieces[piece].row_ranges;
  std::vector<float> out;
  for (auto [b, e] : ranges)
    out.insert(out.end(), global.begin() + b * p.cols(), global.begin() + e * p.cols());
  return out;
}

void check_param(const model::ModelSpec& model, int index, int tp) {
  const model::ParamSpec& p = model.params[index];
  std::vector<float> global(static_cast<std::size_t>(p.numel()));
  fill_init(p, index, 1, 0, 7, global);
  const int pieces = p.pieces.empty() ? 1 : static_cast<int>(p.pieces.size());
  for (int k = 0; k < pieces; ++k) {
    const int piece = p.pieces.empty() ? -1 : k;
    const std::vector<float> want = task_from_global(p, piece, global);
    std::vector<float> via_local(want.size(), -9.0f), via_packed(want.size(), -9.0f);
    std::int64_t packed_total = 0;
    for (int t = 0; t < tp; ++t) {
      std::vector<float> local(static_cast<std::size_t>(p.local_numel(tp)));
      fill_init(p, index, tp, t, 7, local);
      const engine::ShardMap map = engine::shard_map(p, piece, tp, t);
      EXPECT_EQ(map.task_rows * map.task_cols, static_cast<std::int64_t>(want.size()));
      engine::local_to_task(map, local.data(), via_local.data());
      std::vector<float> packed(static_cast<std::size_t>(map.numel()));
      engine::local_to_packed(map, local.data(), packed.data());
      engine::packed_to_task(map, packed.data(), via_packed.data());
      packed_total += map.numel();
      // Back again: the task matrix restores exactly this shard's mapped elements.
      std::vector<float> restored(local.size(), 0.0f), repacked(packed.size(), 0.0f);
      engine::task_to_packed(map, want.data(), repacked.data());
      EXPECT_EQ(repacked, packed) << p.name << " piece " << piece << " tp " << t;
      engine::packed_to_local(map, packed.data(), restored.data());
      std::vector<float> restored2(local.size(), 0.0f);
      engine::task_to_local(map, want.data(), restored2.data());
      EXPECT_EQ(restored, restored2);
      if (piece < 0) {
        EXPECT_EQ(restored, local) << p.name << " tp " << t;
      }
    }
    EXPECT_EQ(packed_total,
              static_cast<std::int64_t>(want.size()) * (p.tp_split_dim < 0 && tp > 1 ? tp : 1));
    EXPECT_EQ(via_local, want) << p.name << " piece " << piece << " tp " << tp;
    EXPECT_EQ(via_packed, want) << p.name << " piece " << piece << " tp " << tp;
  }
}

TEST(ShardMap, ToyModelShardsRebuildEveryTask) {
  const model::ModelSpec m = testing::toy_model();
  for (int tp : {1, 2, 4})
    for (std::size_t p = 0; p < m.params.size(); ++p) check_param(m, static_cast<int>(p), tp);
}

TEST(ShardMap, QwenPiecesRebuildAtEveryTp) {
  for (int tp : {1, 2}) {
    model::BuildOptions build;
    build.tp = tp;
    build.qkv_split = model::QkvSplit::kPerHead;
    build.split_fc1 = true;
    const model::ModelSpec m = model::build_transformer(model::preset("qwen3-tiny"), build);
    for (std::size_t p = 0; p < m.params.size(); ++p) check_param(m, static_cast<int>(p), tp);
  }
}

TEST(ShardMap, Fc1GateOfEveryShardComesFirst) {
  model::BuildOptions build;
  build.tp = 2;
  build.split_fc1 = true;
  const model::ModelSpec m = model::build_transformer(model::preset("qwen3-tiny"), build);
  const model::ParamSpec* fc1 = nullptr;
  for (const auto& p : m.params)
    if (p.name.find("linear_fc1.weight") != std::string::npos) fc1 = &p;
  ASSERT_NE(fc1, nullptr);
  // Shard t holds [gate_t; up_t]: the gate piece takes the first half of each shard's rows.
  const engine::ShardMap gate1 = engine::shard_map(*fc1, 0, 2, 1);
  ASSERT_EQ(gate1.runs.size(), 1u);
  EXPECT_EQ(gate1.runs[0].local_row, 0);
  EXPECT_EQ(gate1.runs[0].task_row, fc1->rows() / 4);
  EXPECT_EQ(gate1.runs[0].rows, fc1->rows() / 4);
}

TEST(ShardMap, RowParallelShardsAreColumnBlocks) {
  const model::ModelSpec m = testing::toy_model();
  const model::ParamSpec& proj = m.params[4];
  const engine::ShardMap map = engine::shard_map(proj, -1, 2, 1);
  EXPECT_EQ(map.local_cols, 24);
  EXPECT_EQ(map.task_cols, 48);
  ASSERT_EQ(map.runs.size(), 1u);
  EXPECT_EQ(map.runs[0].task_col, 24);
  EXPECT_EQ(map.numel(), 32 * 24);
}

TEST(ShardMap, RejectsBadPiece) {
  const model::ModelSpec m = testing::toy_model();
  EXPECT_THROW(engine::shard_map(m.params[2], 3, 1, 0), UsageError);
}

}  // namespace
}  // namespace canzona::runtime
