// The thread backend's PP and embedding groups (grid.h): sizes, ranks and members in order for
// several shapes, written out by hand for the small ones; an all-reduce over embedding() sums the
// first and the last stage only; the expert grid's PP and embedding groups.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

using Members = std::vector<std::uint64_t>;

// What each world rank saw: its PP group's and embedding group's members (world ranks, in group
// rank order; empty when the rank is in no embedding group).
struct Seen {
  Members pp, embedding;
  int pp_rank = -1, pp_size = -1, embedding_rank = -1, embedding_size = -1;
  bool in_embedding = false;
};

std::vector<Seen> pipeline_groups(const ParallelDims& dims) {
  std::vector<Seen> seen(dims.world());
  run_on_thread_grid(dims, ReduceMode::kDeterministic, [&](Grid& grid) {
    const int w = grid.world().rank();
    Seen& s = seen[w];  // each thread writes its own element
    s.pp = grid.pp().all_gather_u64(w);
    s.pp_rank = grid.pp().rank();
    s.pp_size = grid.pp().size();
    s.in_embedding = grid.in_embedding_group();
    if (s.in_embedding) {
      s.embedding = grid.embedding().all_gather_u64(w);
      s.embedding_rank = grid.embedding().rank();
      s.embedding_size = grid.embedding().size();
    }
  });
  return seen;
}

TEST(ThreadGridPipeline, Dp2Tp1Pp2WrittenOut) {
  // World rank = pp * 2 + dp: stage 0 is {0, 1}, stage 1 {2, 3}; PP groups {0, 2} and {1, 3},
  // which are also the embedding groups (two stages: both are first or last).
  const std::vector<Seen> seen = pipeline_groups({.dp = 2, .tp = 1, .pp = 2});
  const Members pp[] = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  for (int w = 0; w < 4; ++w) {
    SCOPED_TRACE(testing::Message() << "world rank " << w);
    EXPECT_EQ(seen[w].pp, pp[w]);
    EXPECT_EQ(seen[w].pp_rank, w / 2);
    EXPECT_EQ(seen[w].pp_size, 2);
    EXPECT_TRUE(seen[w].in_embedding);
    EXPECT_EQ(seen[w].embedding, pp[w]);
    EXPECT_EQ(seen[w].embedding_rank, w / 2);
    EXPECT_EQ(seen[w].embedding_size, 2);
  }
}

TEST(ThreadGridPipeline, Dp1Tp2Pp4WrittenOut) {
  // World rank = pp * 2 + tp: PP groups {0, 2, 4, 6} and {1, 3, 5, 7}; embedding groups {0, 6}
  // and {1, 7}; ranks 2..5 (stages 1 and 2) are in none.
  const std::vector<Seen> seen = pipeline_groups({.dp = 1, .tp = 2, .pp = 4});
  const Members even = {0, 2, 4, 6}, odd = {1, 3, 5, 7};
  const Members embedding_even = {0, 6}, embedding_odd = {1, 7};
  for (int w = 0; w < 8; ++w) {
    SCOPED_TRACE(testing::Message() << "world rank " << w);
    EXPECT_EQ(seen[w].pp, w % 2 ? odd : even);
    EXPECT_EQ(seen[w].pp_rank, w / 2);
    EXPECT_EQ(seen[w].pp_size, 4);
    const bool member = w < 2 || w > 5;
    EXPECT_EQ(seen[w].in_embedding, member);
    EXPECT_EQ(seen[w].embedding, member ? (w % 2 ? embedding_odd : embedding_even) : Members{});
    EXPECT_EQ(seen[w].embedding_rank, member ? (w < 2 ? 0 : 1) : -1);
    EXPECT_EQ(seen[w].embedding_size, member ? 2 : -1);
  }
}

TEST(ThreadGridPipeline, Dp2Tp2Pp1EveryRankIsItsOwnGroup) {
  const std::vector<Seen> seen = pipeline_groups({.dp = 2, .tp = 2, .pp = 1});
  for (int w = 0; w < 4; ++w) {
    SCOPED_TRACE(testing::Message() << "world rank " << w);
    const Members alone = {static_cast<std::uint64_t>(w)};
    EXPECT_EQ(seen[w].pp, alone);
    EXPECT_EQ(seen[w].pp_rank, 0);
    EXPECT_EQ(seen[w].pp_size, 1);
    EXPECT_TRUE(seen[w].in_embedding);
    EXPECT_EQ(seen[w].embedding, alone);
    EXPECT_EQ(seen[w].embedding_rank, 0);
    EXPECT_EQ(seen[w].embedding_size, 1);
  }
}

// Larger shapes against the rule: PP members (pp' * dp + dp_i) * tp + tp_i for pp' = 0..pp-1;
// embedding members the first and the last of them.
TEST(ThreadGridPipeline, EveryShapeFollowsTheRule) {
  const ParallelDims shapes[] = {
      {.dp = 3, .tp = 2, .pp = 2}, {.dp = 1, .tp = 1, .pp = 3}, {.dp = 2, .tp = 1, .pp = 5}};
  for (const ParallelDims& dims : shapes) {
    SCOPED_TRACE(to_string(dims));
    const std::vector<Seen> seen = pipeline_groups(dims);
    for (int w = 0; w < dims.world(); ++w) {
      const int tp = w % dims.tp, dp = w / dims.tp % dims.dp, pp = w / (dims.tp * dims.dp);
      Members want;
      for (int s = 0; s < dims.pp; ++s) want.push_back((s * dims.dp + dp) * dims.tp + tp);
      EXPECT_EQ(seen[w].pp, want) << "world rank " << w;
      EXPECT_EQ(seen[w].pp_rank, pp);
      const bool member = pp == 0 || pp == dims.pp - 1;
      EXPECT_EQ(seen[w].in_embedding, member) << "world rank " << w;
      if (member) {
        EXPECT_EQ(seen[w].embedding, (Members{want.front(), want.back()}));
      }
    }
  }
}

// Each embedding rank contributes v(w)[j] = 1000 w + j; the sum is v(first)[j] + v(last)[j],
// exact in fp32 at these magnitudes. Middle stages' embedding() is a canzona::Error.
TEST(ThreadGridPipeline, AllReduceOverEmbeddingSumsTheFirstAndLastStage) {
  for (ReduceMode mode : {ReduceMode::kNative, ReduceMode::kDeterministic}) {
    const ParallelDims dims{.dp = 2, .tp = 1, .pp = 3};
    std::atomic<int> summed{0}, refused{0};
    run_on_thread_grid(dims, mode, [&](Grid& grid) {
      const int w = grid.world().rank();
      const int dp = grid.coord().dp;
      if (!grid.in_embedding_group()) {
        EXPECT_THROW(grid.embedding(), Error);
        ++refused;
        return;
      }
      std::vector<float> values(5);
      for (int j = 0; j < 5; ++j) values[j] = static_cast<float>(1000 * w + j);
      grid.embedding().all_reduce(values, values).wait();
      // World rank = pp * 2 + dp: first stage rank dp, last stage rank 4 + dp.
      for (int j = 0; j < 5; ++j)
        EXPECT_EQ(values[j], static_cast<float>(1000 * dp + j + 1000 * (4 + dp) + j))
            << "world rank " << w << ", element " << j;
      ++summed;
    });
    EXPECT_EQ(summed.load(), 4);
    EXPECT_EQ(refused.load(), 2);
  }
}

// The expert grid of DP 2 x TP 2 x PP 3, EP 2: each stage's l = dp * 2 + tp has the same expert
// coordinates on every stage, so the expert grid's PP group of world rank w is {l, l + 4, l + 8}
// (l = w % 4) and its embedding group {l, l + 8}; the expert grid's ranks on stage 1 are in none.
TEST(ThreadGridPipeline, ExpertGridHasThePipelineAndEmbeddingGroupsOfItsStages) {
  const ParallelDims dims{.dp = 2, .tp = 2, .pp = 3, .ep = 2};
  std::vector<ExpertGroups> groups = make_thread_expert_groups(dims, ReduceMode::kNative);
  std::vector<Seen> seen(12);
  run_on_thread_grid(dims, ReduceMode::kNative, [&](Grid& grid) {
    const int w = grid.world().rank();
    Grid& expert = *groups[w].grid;
    seen[w].pp = expert.pp().all_gather_u64(w);
    seen[w].pp_rank = expert.pp().rank();
    seen[w].in_embedding = expert.in_embedding_group();
    if (seen[w].in_embedding) seen[w].embedding = expert.embedding().all_gather_u64(w);
    EXPECT_EQ(expert.dims(), (ParallelDims{.dp = 2, .tp = 1, .pp = 3}));
  });
  for (int w = 0; w < 12; ++w) {
    SCOPED_TRACE(testing::Message() << "world rank " << w);
    const std::uint64_t l = w % 4;
    EXPECT_EQ(seen[w].pp, (Members{l, l + 4, l + 8}));
    EXPECT_EQ(seen[w].pp_rank, w / 4);
    EXPECT_EQ(seen[w].in_embedding, w / 4 != 1);
    EXPECT_EQ(seen[w].embedding, (w / 4 != 1 ? Members{l, l + 8} : Members{}));
  }
}

}  // namespace
}  // namespace canzona::comm
