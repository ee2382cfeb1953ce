// make_mpi_grid over every factorisation dp x tp x pp of the world size (ctest runs np 1..4 and
// 8): coordinates in Megatron order and DP, TP, PP and embedding groups with the right members in
// the right order, written out by hand for the shapes of 4 and 8 ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"
#include "test_util.h"

namespace canzona::comm {
namespace {

std::vector<ParallelDims> factorisations(int world_size) {
  std::vector<ParallelDims> shapes;
  for (int dp = 1; dp <= world_size; ++dp) {
    for (int tp = 1; dp * tp <= world_size; ++tp) {
      if (world_size % (dp * tp) == 0)
        shapes.push_back(ParallelDims{.dp = dp, .tp = tp, .pp = world_size / (dp * tp)});
    }
  }
  return shapes;
}

// The sum over `members` of their world ranks, as an all-reduce of one float on `comm` forms it
// (exact: small integers).
void expect_all_reduce_sums(Communicator& comm, int world_rank,
                            const std::vector<std::uint64_t>& members) {
  float sum = static_cast<float>(world_rank);
  comm.all_reduce(std::span<const float>(&sum, 1), std::span<float>(&sum, 1)).wait();
  float expected = 0;
  for (std::uint64_t r : members) expected += static_cast<float>(r);
  EXPECT_EQ(sum, expected);
}

TEST(MpiGrid, GroupsFollowMegatronOrderForEveryShape) {
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  for (const ParallelDims& shape : factorisations(world_size)) {
    SCOPED_TRACE(to_string(shape));
    auto grid = make_mpi_grid(shape, ReduceMode::kNative);
    EXPECT_EQ(grid->dims(), shape);
    const GridCoord c = grid->coord();
    EXPECT_EQ(world_rank, (c.pp * shape.dp + c.dp) * shape.tp + c.tp);
    EXPECT_EQ(grid->world().rank(), world_rank);
    EXPECT_EQ(grid->world().size(), world_size);
    EXPECT_EQ(grid->dp().rank(), c.dp);
    EXPECT_EQ(grid->dp().size(), shape.dp);
    EXPECT_EQ(grid->tp().rank(), c.tp);
    EXPECT_EQ(grid->tp().size(), shape.tp);
    EXPECT_EQ(grid->pp().rank(), c.pp);
    EXPECT_EQ(grid->pp().size(), shape.pp);

    std::vector<std::uint64_t> dp_members(shape.dp), tp_members(shape.tp), pp_members(shape.pp);
    for (int d = 0; d < shape.dp; ++d) dp_members[d] = (c.pp * shape.dp + d) * shape.tp + c.tp;
    for (int t = 0; t < shape.tp; ++t) tp_members[t] = (c.pp * shape.dp + c.dp) * shape.tp + t;
    for (int p = 0; p < shape.pp; ++p) pp_members[p] = (p * shape.dp + c.dp) * shape.tp + c.tp;
    EXPECT_EQ(grid->dp().all_gather_u64(world_rank), dp_members);
    EXPECT_EQ(grid->tp().all_gather_u64(world_rank), tp_members);
    EXPECT_EQ(grid->pp().all_gather_u64(world_rank), pp_members);

    // A collective on each group sums exactly its members.
    expect_all_reduce_sums(grid->dp(), world_rank, dp_members);
    expect_all_reduce_sums(grid->tp(), world_rank, tp_members);
    expect_all_reduce_sums(grid->pp(), world_rank, pp_members);

    // The embedding group: the first and the last of the PP members (one rank at pp 1).
    const bool member = c.pp == 0 || c.pp == shape.pp - 1;
    EXPECT_EQ(grid->in_embedding_group(), member);
    if (member) {
      std::vector<std::uint64_t> embedding_members = {pp_members.front()};
      if (shape.pp > 1) embedding_members.push_back(pp_members.back());
      EXPECT_EQ(grid->embedding().size(), std::ssize(embedding_members));
      EXPECT_EQ(grid->embedding().rank(), c.pp == 0 ? 0 : 1);
      EXPECT_EQ(grid->embedding().all_gather_u64(world_rank), embedding_members);
      expect_all_reduce_sums(grid->embedding(), world_rank, embedding_members);
    } else {
      EXPECT_THROW(grid->embedding(), Error);
    }
  }
}

// Each rank's PP and embedding group members (world ranks in group order; {} for none) written
// out for the shapes of one world size; the same expectation runs on every rank of the shape.
struct PipelineCase {
  ParallelDims dims;
  std::vector<std::vector<std::uint64_t>> pp, embedding;  // by world rank
};

void expect_pipeline_groups(const PipelineCase& want) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  SCOPED_TRACE(to_string(want.dims));
  auto grid = make_mpi_grid(want.dims, ReduceMode::kDeterministic);
  EXPECT_EQ(grid->pp().all_gather_u64(world_rank), want.pp[world_rank]);
  const std::vector<std::uint64_t>& embedding = want.embedding[world_rank];
  EXPECT_EQ(grid->in_embedding_group(), !embedding.empty());
  if (grid->in_embedding_group()) {
    EXPECT_EQ(grid->embedding().all_gather_u64(world_rank), embedding);
    // Values 1000 w + j summed over the members: exact in fp32.
    std::vector<float> values(3);
    for (int j = 0; j < 3; ++j) values[j] = static_cast<float>(1000 * world_rank + j);
    grid->embedding().all_reduce(values, values).wait();
    for (int j = 0; j < 3; ++j) {
      float want_sum = 0;
      for (std::uint64_t r : embedding) want_sum += static_cast<float>(1000 * r + j);
      EXPECT_EQ(values[j], want_sum) << "element " << j;
    }
  }
}

TEST(MpiGrid, PipelineAndEmbeddingGroupsWrittenOutAtFourRanks) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != 4) GTEST_SKIP() << "written out for 4 ranks";
  const PipelineCase cases[] = {
      // world rank = pp x 2 + dp
      {{.dp = 2, .tp = 1, .pp = 2},
       {{0, 2}, {1, 3}, {0, 2}, {1, 3}},
       {{0, 2}, {1, 3}, {0, 2}, {1, 3}}},
      // world rank = pp x 2 + tp
      {{.dp = 1, .tp = 2, .pp = 2},
       {{0, 2}, {1, 3}, {0, 2}, {1, 3}},
       {{0, 2}, {1, 3}, {0, 2}, {1, 3}}},
      // world rank = pp: ranks 1 and 2 are middle stages
      {{.dp = 1, .tp = 1, .pp = 4},
       {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}},
       {{0, 3}, {}, {}, {0, 3}}},
      // one stage: every rank alone
      {{.dp = 2, .tp = 2, .pp = 1}, {{0}, {1}, {2}, {3}}, {{0}, {1}, {2}, {3}}},
  };
  for (const PipelineCase& c : cases) expect_pipeline_groups(c);
}

TEST(MpiGrid, PipelineAndEmbeddingGroupsWrittenOutAtEightRanks) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != 8) GTEST_SKIP() << "written out for 8 ranks";
  const std::vector<std::uint64_t> even = {0, 2, 4, 6}, odd = {1, 3, 5, 7};
  const PipelineCase cases[] = {
      // world rank = pp x 2 + tp: stages 1 and 2 (ranks 2..5) are in no embedding group
      {{.dp = 1, .tp = 2, .pp = 4},
       {even, odd, even, odd, even, odd, even, odd},
       {{0, 6}, {1, 7}, {}, {}, {}, {}, {0, 6}, {1, 7}}},
      // world rank = pp x 4 + dp x 2 + tp
      {{.dp = 2, .tp = 2, .pp = 2},
       {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}},
       {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}}},
  };
  for (const PipelineCase& c : cases) expect_pipeline_groups(c);
}

// Megatron's expert groups over every shape and every (ep, etp) whose product divides dp x tp:
// each group's members, in order, are the world ranks a hand loop over the grid picks (same pp;
// inside the stage l = dp_index x tp + tp_index gives etp = l % etp, ep = (l / etp) % ep,
// edp = l / (etp x ep)).
TEST(MpiGrid, ExpertGroupsFollowMegatronsExpertOrder) {
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  struct Where {
    int pp, edp, ep, etp;
  };
  for (const ParallelDims& shape : factorisations(world_size)) {
    const int stage = shape.dp * shape.tp;
    for (int ep = 1; ep <= stage; ++ep)
      for (int etp = 1; ep * etp <= stage; ++etp) {
        if (stage % (ep * etp) != 0) continue;
        SCOPED_TRACE(testing::Message() << "dp " << shape.dp << " x tp " << shape.tp << " x pp "
                                        << shape.pp << ", ep " << ep << " etp " << etp);
        ParallelDims dims = shape;
        dims.ep = ep;
        dims.etp = etp;
        auto grid = make_mpi_grid(dims, ReduceMode::kNative);
        auto where = [&](int w) {
          const int l = w % stage;
          return Where{w / stage, l / (etp * ep), (l / etp) % ep, l % etp};
        };
        const Where me = where(world_rank);
        ExpertGroups g = make_mpi_expert_groups(*grid, ReduceMode::kNative);
        EXPECT_EQ(g.coord.edp, me.edp);
        EXPECT_EQ(g.coord.ep, me.ep);
        EXPECT_EQ(g.coord.etp, me.etp);
        std::vector<std::uint64_t> edp, etp_members, ep_members, slice, pp_members;
        for (int w = 0; w < world_size; ++w) {
          const Where o = where(w);
          if (o.edp == me.edp && o.ep == me.ep && o.etp == me.etp) pp_members.push_back(w);
          if (o.pp != me.pp) continue;
          if (o.ep == me.ep && o.etp == me.etp) edp.push_back(w);
          if (o.edp == me.edp && o.ep == me.ep) etp_members.push_back(w);
          if (o.edp == me.edp && o.etp == me.etp) ep_members.push_back(w);
        }
        // The slice (the expert grid's world): every pp stage's ranks of this EP index, in
        // (pp, edp, etp) order.
        for (int pp = 0; pp < shape.pp; ++pp)
          for (int e = 0; e < stage / (ep * etp); ++e)
            for (int t = 0; t < etp; ++t) slice.push_back(pp * stage + (e * ep + me.ep) * etp + t);
        EXPECT_EQ(g.grid->dp().all_gather_u64(world_rank), edp);
        EXPECT_EQ(g.grid->tp().all_gather_u64(world_rank), etp_members);
        EXPECT_EQ(g.ep->all_gather_u64(world_rank), ep_members);
        EXPECT_EQ(g.grid->world().all_gather_u64(world_rank), slice);
        // PP group: every stage's rank of these expert coordinates, in pp order; embedding group
        // its first and last.
        EXPECT_EQ(g.grid->pp().all_gather_u64(world_rank), pp_members);
        EXPECT_EQ(g.grid->in_embedding_group(), me.pp == 0 || me.pp == shape.pp - 1);
        if (g.grid->in_embedding_group()) {
          std::vector<std::uint64_t> embedding = {pp_members.front()};
          if (shape.pp > 1) embedding.push_back(pp_members.back());
          EXPECT_EQ(g.grid->embedding().all_gather_u64(world_rank), embedding);
        }
        EXPECT_EQ(g.grid->dims(),
                  (ParallelDims{.dp = stage / (ep * etp), .tp = etp, .pp = shape.pp}));
        EXPECT_EQ(grid->dims().ep, ep);
        EXPECT_EQ(grid->dims().etp, etp);
      }
  }
}

TEST(MpiGrid, WorldSizeMismatchThrowsTheSameUsageErrorOnEveryRank) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  try {
    make_mpi_grid({.dp = world_size + 1, .tp = 1, .pp = 1}, ReduceMode::kNative);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "world size " + std::to_string(world_size) + " != dp " +
                                         std::to_string(world_size + 1) +
                                         " x tp 1 x pp 1 (launch with mpirun -np " +
                                         std::to_string(world_size + 1) + ")");
  }
}

}  // namespace
}  // namespace canzona::comm
