// decode_rank and the sentinel decoders (rank_plan.h), without MPI.
//
// The central property, on random models and grids for every strategy: replay what every rank's
// RankPlan says it writes (element-wise slices, its own rows of local and redundantly computed
// tasks, every TP rank's rows of the tasks it hosts; with a param sync, to every DP replica) and
// require that every element of every param of every (DP, TP) replica is written exactly once.
// Also: the All-to-All counts of each micro group and of each owner-exchange batch match between
// every sender and receiver, an owner receives every element of the params it owns exactly once,
// the Reduce-Scatter shards tile each bucket, and a hand-built plan decodes to the values derived
// by hand.
#include "canzona/plan/rank_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "random_model.h"

namespace canzona::plan {
namespace {

using test_models::Case;
using test_models::kCases;

// Local elements of param p's shard on TP rank t covered by the rows of `map`.
void cover(const ShardMap& map, std::vector<int>& count) {
  for (const RowRun& run : map.runs)
    for (std::int64_t e = run.local_row * map.local_cols;
         e < (run.local_row + run.rows) * map.local_cols; ++e)
      ++count[static_cast<std::size_t>(e)];
}

void check_writes_once(const model::ModelSpec& m, const Plan& plan) {
  const int dp = plan.options.dims.dp, tp = plan.options.dims.tp;
  const StagePlan& stage = plan.stages[0];
  std::vector<std::int64_t> local_numel(m.params.size(), 0);
  for (const layout::Bucket& b : stage.layout.buckets)
    for (const layout::Slot& s : b.slots) local_numel[s.param] = s.numel;
  // writes[(d * tp + t)][param][element]
  std::vector<std::vector<std::vector<int>>> writes(static_cast<std::size_t>(dp * tp));
  for (auto& replica : writes) {
    replica.resize(m.params.size());
    for (int p : stage.params) replica[p].assign(static_cast<std::size_t>(local_numel[p]), 0);
  }
  for (int d = 0; d < dp; ++d)
    for (int t = 0; t < tp; ++t) {
      const RankPlan r = decode_rank(m, plan, 0, d, t);
      ASSERT_EQ(r.parts.dp_sync == DpSync::kReduceScatter,
                plan.options.strategy == Strategy::kAsc ||
                    plan.options.strategy == Strategy::kLbAsc ||
                    plan.options.strategy == Strategy::kLayerwise ||
                    plan.options.strategy == Strategy::kFsdpA2a);
      // The DP replicas a write on DP rank d reaches: all of them through a param sync.
      const bool synced = r.parts.param_sync != ParamSync::kNone;
      const int d_lo = synced ? 0 : d, d_hi = synced ? dp : d + 1;
      for (const ElementwiseUpdate& u : r.elementwise) {
        ASSERT_FALSE(m.params[u.param].is_matrix());
        ASSERT_LT(u.begin, u.end);
        for (int q = d_lo; q < d_hi; ++q)
          for (std::int64_t e = u.begin; e < u.end; ++e)
            ++writes[q * tp + t][u.param][static_cast<std::size_t>(e)];
      }
      for (const RankTask& rt : r.tasks) {
        const Task& task = stage.tasks[rt.task];
        const model::ParamSpec& p = m.params[task.param];
        if (rt.role == TaskRole::kHosted) {
          EXPECT_EQ(task.host, t);
          for (int q = d_lo; q < d_hi; ++q)
            for (int peer = 0; peer < tp; ++peer)
              cover(shard_map(p, task.piece, tp, peer), writes[q * tp + peer][task.param]);
        } else if (rt.role == TaskRole::kOwnerGathered) {
          // The owner's TP ranks each write their own rows (sent back to the shards' holders).
          EXPECT_EQ(plan.options.strategy, Strategy::kFsdpA2a);
          for (int q = d_lo; q < d_hi; ++q)
            cover(shard_map(p, task.piece, tp, t), writes[q * tp + t][task.param]);
        } else {
          EXPECT_EQ(rt.role == TaskRole::kLocal, tp == 1 || p.tp_split_dim < 0);
          for (int q = d_lo; q < d_hi; ++q)
            cover(shard_map(p, task.piece, tp, t), writes[q * tp + t][task.param]);
        }
      }
    }
  for (int rep = 0; rep < dp * tp; ++rep)
    for (int p : stage.params)
      for (std::size_t e = 0; e < writes[rep][p].size(); ++e)
        ASSERT_EQ(writes[rep][p][e], 1) << "replica (dp " << rep / tp << ", tp " << rep % tp
                                        << ") param " << m.params[p].name << " element " << e;
}

// Every micro group's gather All-to-All: what rank q sends to host h is what h expects from q,
// and the hosted tasks are the group's tasks with that host.
void check_groups_match(const model::ModelSpec& m, const Plan& plan) {
  const int dp = plan.options.dims.dp, tp = plan.options.dims.tp;
  for (int d = 0; d < dp; ++d) {
    std::vector<RankPlan> ranks;
    for (int t = 0; t < tp; ++t) ranks.push_back(decode_rank(m, plan, 0, d, t));
    const std::size_t groups = ranks[0].groups.size();
    for (const RankPlan& r : ranks) ASSERT_EQ(r.groups.size(), groups);
    for (std::size_t k = 0; k < groups; ++k)
      for (int q = 0; q < tp; ++q)
        for (int h = 0; h < tp; ++h) {
          ASSERT_EQ(ranks[q].groups[k].send_counts[h], ranks[h].groups[k].recv_counts[q])
              << "dp " << d << " group " << k << " from " << q << " to " << h;
          std::int64_t hosted = 0;
          for (const GroupHosted& g : ranks[h].groups[k].hosted) hosted += g.numel[q];
          EXPECT_EQ(hosted, ranks[h].groups[k].recv_counts[q]);
        }
  }
}

// Every owner-exchange batch: what DP rank q sends to owner o is what o expects from q, each piece
// lies in the sender's shard, and an owner's pieces of a param cover its local elements once.
void check_owner_batches(const model::ModelSpec& m, const Plan& plan) {
  const int dp = plan.options.dims.dp;
  const StagePlan& stage = plan.stages[0];
  std::vector<RankPlan> ranks;
  for (int d = 0; d < dp; ++d) ranks.push_back(decode_rank(m, plan, 0, d, 0));
  if (ranks[0].parts.dp_exchange != DpExchange::kOwnerAllToAll) {
    for (const RankPlan& r : ranks) EXPECT_TRUE(r.owner_batches.empty());
    EXPECT_TRUE(stage.owner_batches.empty());
    return;
  }
  std::vector<int> batched(m.params.size(), 0);
  for (const auto& batch : stage.owner_batches)
    for (int p : batch) ++batched[p];
  for (int p : stage.params) EXPECT_EQ(batched[p], m.params[p].is_matrix() ? 1 : 0);
  for (std::size_t k = 0; k < stage.owner_batches.size(); ++k) {
    for (int q = 0; q < dp; ++q)
      for (int o = 0; o < dp; ++o)
        ASSERT_EQ(ranks[q].owner_batches[k].send_counts[o],
                  ranks[o].owner_batches[k].recv_counts[q])
            << "batch " << k << " from " << q << " to " << o;
    for (int o = 0; o < dp; ++o) {
      std::map<int, std::vector<int>> seen;
      for (int p : ranks[o].owner_batches[k].owned) {
        EXPECT_EQ(stage.owner[p], o);
        seen[p].assign(static_cast<std::size_t>(m.params[p].local_numel(plan.options.dims.tp)), 0);
      }
      for (const OwnerPiece& piece : ranks[o].owner_batches[k].receives)
        for (std::int64_t e = piece.begin; e < piece.begin + piece.numel; ++e)
          ++seen.at(piece.param).at(static_cast<std::size_t>(e));
      for (const auto& [p, count] : seen)
        for (int c : count) ASSERT_EQ(c, 1) << m.params[p].name;
    }
  }
}

// Reduce-Scatter shards: counts and displacements tile every bucket in rank order.
void check_shards(const model::ModelSpec& m, const Plan& plan) {
  const RankPlan r = decode_rank(m, plan, 0, 0, 0);
  if (r.parts.dp_sync != DpSync::kReduceScatter) {
    EXPECT_TRUE(r.shards.empty());
    return;
  }
  const auto& buckets = plan.stages[0].layout.buckets;
  ASSERT_EQ(r.shards.size(), buckets.size());
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::int64_t next = 0;
    for (int d = 0; d < plan.options.dims.dp; ++d) {
      EXPECT_EQ(r.shards[b].displs[d], next);
      EXPECT_GE(r.shards[b].counts[d], 0);
      next += r.shards[b].counts[d];
    }
    EXPECT_EQ(next, buckets[b].numel);
  }
}

TEST(RankPlan, EveryElementOfEveryReplicaIsWrittenOnce) {
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 40; ++trial) {
    const int tp = 1 << (trial % 3);
    const model::ModelSpec m = test_models::random_model(rng, tp);
    for (const Case& c : kCases) {
      PlanOptions o;
      o.strategy = c.strategy;
      o.variant = c.variant;
      o.layerwise_tp = c.layerwise_tp;
      o.reorder_buckets = c.reorder_buckets;
      o.dims.dp = 1 + static_cast<int>(rng() % 6);
      o.dims.tp = tp;
      o.cmax_mb = 0.001 + (rng() % 4) * 0.004;  // many micro groups
      o.layout.bucket_size = 64 + static_cast<std::int64_t>(rng() % 4000);
      SCOPED_TRACE(::testing::Message()
                   << "trial " << trial << " " << to_string(c.strategy) << " "
                   << to_string(c.variant) << " dp " << o.dims.dp << " tp " << tp);
      const Plan plan = make_plan(m, o);
      check_writes_once(m, plan);
      check_groups_match(m, plan);
      check_owner_batches(m, plan);
      check_shards(m, plan);
    }
  }
}

// A hand-built stage: one bucket [w (matrix 4 x 4, 16 elements) | pad | b (vector, 8)] cut at
// 16 and 20 over 3 DP ranks: w owned by rank 0, b divided: rank 1 updates b[0, 4), rank 2
// b[4, 8); task w hosted on TP rank 1 of 2 in group 0 of DP rank 0.
TEST(RankPlan, DecodesAHandBuiltPlan) {
  model::ModelSpec m;
  m.name = "hand";
  m.params.push_back({"w", {8, 4}, 0, model::OptimizerClass::kMatrix, -1, -1, {}});
  m.params.push_back({"b", {8}, -1, model::OptimizerClass::kElementwise, -1, -1, {}});
  Plan plan;
  plan.options.strategy = Strategy::kLbAsc;
  plan.options.dims.dp = 3;
  plan.options.dims.tp = 2;
  StagePlan s;
  s.params = {0, 1};
  s.layout.buckets = {{0, 24, {{0, 0, 16}, {1, 16, 8}}}};
  s.layout.numel = 24;
  s.cuts = {{0, 16, 20, 24}};
  s.owner = {0, kDivided};
  Task t;
  t.param = 0;
  t.rows = 8;
  t.cols = 4;
  t.dp_owner = 0;
  t.host = 1;
  t.group = 0;
  s.tasks = {t};
  s.groups = {{MicroGroup{{0}, 1.0, 128}}, {}, {}};
  plan.stages = {s};

  EXPECT_EQ(slot_dp_ranks(s, 0, s.layout.buckets[0].slots[1], 3).begin, 1);
  EXPECT_EQ(slot_dp_ranks(s, 0, s.layout.buckets[0].slots[1], 3).end, 3);
  EXPECT_EQ(slot_part(s, 0, s.layout.buckets[0].slots[1], 1),
            (std::pair<std::int64_t, std::int64_t>{0, 4}));
  EXPECT_EQ(slot_part(s, 0, s.layout.buckets[0].slots[1], 2),
            (std::pair<std::int64_t, std::int64_t>{4, 8}));
  EXPECT_EQ(task_dp_ranks(t, 3).begin, 0);
  EXPECT_EQ(task_dp_ranks(t, 3).end, 1);
  EXPECT_EQ(task_tp_ranks(t, 2).begin, 1);

  const RankPlan host = decode_rank(m, plan, 0, 0, 1);
  ASSERT_EQ(host.tasks.size(), 1u);
  EXPECT_EQ(host.tasks[0].role, TaskRole::kHosted);
  EXPECT_TRUE(host.elementwise.empty());
  ASSERT_EQ(host.groups.size(), 1u);
  // Each TP rank holds 4 of w's 8 rows (split on dim 0): 16 elements to the host, from both.
  EXPECT_EQ(host.groups[0].send_counts, (std::vector<std::int64_t>{0, 16}));
  EXPECT_EQ(host.groups[0].recv_counts, (std::vector<std::int64_t>{16, 16}));
  EXPECT_EQ(host.groups[0].recv_displs, (std::vector<std::int64_t>{0, 16}));
  ASSERT_EQ(host.groups[0].hosted.size(), 1u);
  EXPECT_EQ(host.groups[0].hosted[0].offsets, (std::vector<std::int64_t>{0, 16}));
  EXPECT_EQ(host.shards[0].counts, (std::vector<std::int64_t>{16, 4, 4}));
  EXPECT_EQ(host.shards[0].displs, (std::vector<std::int64_t>{0, 16, 20}));

  const RankPlan other = decode_rank(m, plan, 0, 0, 0);
  EXPECT_TRUE(other.tasks.empty());
  EXPECT_EQ(other.groups[0].send_counts, (std::vector<std::int64_t>{0, 16}));
  EXPECT_TRUE(other.groups[0].hosted.empty());

  const RankPlan second = decode_rank(m, plan, 0, 2, 0);
  ASSERT_EQ(second.elementwise.size(), 1u);
  EXPECT_EQ(second.elementwise[0].param, 1);
  EXPECT_EQ(second.elementwise[0].begin, 4);
  EXPECT_EQ(second.elementwise[0].end, 8);
  EXPECT_TRUE(second.groups.empty());
}

}  // namespace
}  // namespace canzona::plan
