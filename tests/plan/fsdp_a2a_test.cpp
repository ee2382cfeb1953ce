// The fsdp-a2a baseline's plan (src/plan/strategies/strategy_fsdp_a2a.cpp) against hand
// derivations: FSDP's equal flat shards of each bucket, owners by Dion's published rule
// (dion/opt_utils.py create_param_batches: matrices grouped by shape in order of first appearance,
// batches of dp consecutive matrices, the k-th of a batch on rank k) and the owner exchange each
// rank decodes.
#include <gtest/gtest.h>

#include "canzona/plan/plan.h"
#include "canzona/plan/rank_plan.h"

namespace canzona::plan {
namespace {

using model::OptimizerClass;

model::ParamSpec matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
  return {name, {rows, cols}, -1, OptimizerClass::kMatrix, -1, -1, {}};
}

model::ParamSpec vec(const std::string& name, std::int64_t n) {
  return {name, {n}, -1, OptimizerClass::kElementwise, -1, -1, {}};
}

PlanOptions fsdp(int dp) {
  PlanOptions o;
  o.strategy = Strategy::kFsdpA2a;
  o.dims.dp = dp;
  return o;
}

using Counts = std::vector<std::int64_t>;

// Registration order A(4x4) B(4x8) v(4) C(4x4) D(4x4) E(4x8), one bucket. Megatron's layout puts
// params in reverse order, each start rounded up to 64 elements: E [0, 32), D [64, 80),
// C [128, 144), v [192, 196), B [256, 288), A [320, 336); the end 336 rounds up to
// lcm(2, 128) = 128: 384 elements, equal shards [0, 192) and [192, 384).
// Dion: shape 4x4 = A, C, D -> batches [A, C], [D]; shape 4x8 = B, E -> batch [B, E].
TEST(FsdpA2a, OwnersFollowDionsShapeBatchesAndShardsAreEqual) {
  model::ModelSpec m;
  m.name = "dion-batches";
  m.params = {matrix("A", 4, 4), matrix("B", 4, 8), vec("v", 4),
              matrix("C", 4, 4), matrix("D", 4, 4), matrix("E", 4, 8)};
  const Plan plan = make_plan(m, fsdp(2));
  const StagePlan& s = plan.stages[0];
  ASSERT_EQ(s.layout.buckets.size(), 1u);
  EXPECT_EQ(s.layout.buckets[0].numel, 384);
  EXPECT_EQ(s.cuts, (std::vector<std::vector<std::int64_t>>{{0, 192, 384}}));
  const int A = 0, B = 1, v = 2, C = 3, D = 4, E = 5;
  EXPECT_EQ(s.owner_batches, (std::vector<std::vector<int>>{{A, C}, {D}, {B, E}}));
  EXPECT_EQ(s.owner[A], 0);
  EXPECT_EQ(s.owner[C], 1);
  EXPECT_EQ(s.owner[D], 0);
  EXPECT_EQ(s.owner[B], 0);
  EXPECT_EQ(s.owner[E], 1);
  EXPECT_EQ(s.owner[v], kDivided);
  for (const Task& t : s.tasks) {
    EXPECT_EQ(t.dp_owner, s.owner[t.param]);
    EXPECT_EQ(t.host, kAllTp);
  }

  const RankPlan r0 = decode_rank(m, plan, 0, 0, 0);
  const RankPlan r1 = decode_rank(m, plan, 0, 1, 0);
  EXPECT_EQ(r0.parts.dp_exchange, DpExchange::kOwnerAllToAll);
  for (const RankTask& t : r0.tasks) EXPECT_EQ(t.role, TaskRole::kOwnerGathered);
  ASSERT_EQ(r0.owner_batches.size(), 3u);
  // Batch [A, C]: A (owner 0) lies in shard 1, C (owner 1) in shard 0: each rank sends the other
  // the 16 elements of the matrix it holds but does not own.
  EXPECT_EQ(r0.owner_batches[0].owned, (std::vector<int>{A}));
  EXPECT_EQ(r0.owner_batches[0].send_counts, (Counts{0, 16}));
  EXPECT_EQ(r0.owner_batches[0].recv_counts, (Counts{0, 16}));
  EXPECT_EQ(r1.owner_batches[0].owned, (std::vector<int>{C}));
  EXPECT_EQ(r1.owner_batches[0].send_counts, (Counts{16, 0}));
  EXPECT_EQ(r1.owner_batches[0].recv_counts, (Counts{16, 0}));
  // Batch [D]: D lies in its owner's shard; rank 0 sends it to itself, rank 1 takes no part.
  EXPECT_EQ(r0.owner_batches[1].send_counts, (Counts{16, 0}));
  EXPECT_EQ(r0.owner_batches[1].recv_counts, (Counts{16, 0}));
  EXPECT_TRUE(r1.owner_batches[1].owned.empty());
  EXPECT_EQ(r1.owner_batches[1].send_counts, (Counts{0, 0}));
  // Batch [B, E]: B (owner 0) in shard 1, E (owner 1) in shard 0, 32 elements each.
  EXPECT_EQ(r0.owner_batches[2].send_counts, (Counts{0, 32}));
  EXPECT_EQ(r0.owner_batches[2].recv_counts, (Counts{0, 32}));
  EXPECT_EQ(r1.owner_batches[2].send_counts, (Counts{32, 0}));
  EXPECT_EQ(r1.owner_batches[2].recv_counts, (Counts{32, 0}));
  // v lies in shard 1: rank 1 updates all of it.
  EXPECT_TRUE(r0.elementwise.empty());
  ASSERT_EQ(r1.elementwise.size(), 1u);
  EXPECT_EQ(r1.elementwise[0].param, v);
  EXPECT_EQ(r1.elementwise[0].begin, 0);
  EXPECT_EQ(r1.elementwise[0].end, 4);
}

// M (16 x 16 = 256 elements) at [0, 256), w (8) at [256, 264); 384 elements, cut at 192: M
// straddles the cut. Its owner (rank 0, the first of its batch) gets elements [0, 192) from
// itself and [192, 256) from rank 1, which sends those 64 and gets them back updated.
TEST(FsdpA2a, AMatrixSplitByTheEqualCutIsGatheredPieceByPiece) {
  model::ModelSpec m;
  m.name = "straddle";
  m.params = {vec("w", 8), matrix("M", 16, 16)};
  const Plan plan = make_plan(m, fsdp(2));
  const StagePlan& s = plan.stages[0];
  EXPECT_EQ(s.cuts, (std::vector<std::vector<std::int64_t>>{{0, 192, 384}}));
  EXPECT_EQ(s.owner[1], 0);
  const RankPlan r0 = decode_rank(m, plan, 0, 0, 0);
  const RankPlan r1 = decode_rank(m, plan, 0, 1, 0);
  ASSERT_EQ(r0.owner_batches.size(), 1u);
  const OwnerBatch& b0 = r0.owner_batches[0];
  EXPECT_EQ(b0.recv_counts, (Counts{192, 64}));
  EXPECT_EQ(b0.recv_displs, (Counts{0, 192}));
  ASSERT_EQ(b0.receives.size(), 2u);
  EXPECT_EQ(b0.receives[0].begin, 0);
  EXPECT_EQ(b0.receives[0].numel, 192);
  EXPECT_EQ(b0.receives[1].begin, 192);
  EXPECT_EQ(b0.receives[1].numel, 64);
  EXPECT_EQ(b0.receives[1].offset, 192);
  const OwnerBatch& b1 = r1.owner_batches[0];
  EXPECT_EQ(b1.send_counts, (Counts{64, 0}));
  ASSERT_EQ(b1.sends.size(), 1u);
  EXPECT_EQ(b1.sends[0].begin, 192);
  EXPECT_EQ(b1.sends[0].numel, 64);
  EXPECT_TRUE(b1.owned.empty());
  // The same plan with another DP is another rule's outcome: at dp 3 the shards are 128 each.
  const Plan three = make_plan(m, fsdp(3));
  EXPECT_EQ(three.stages[0].cuts, (std::vector<std::vector<std::int64_t>>{{0, 128, 256, 384}}));
  EXPECT_NE(plan_hash(three), plan_hash(plan));
}

}  // namespace
}  // namespace canzona::plan
