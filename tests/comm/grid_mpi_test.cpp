// make_mpi_grid over every factorisation dp x tp x pp of the world size (ctest runs np 1..4 and
// 8): coordinates in Megatron order and DP/TP groups with the right members in the right order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/common/error.h"
#include "test_util.h"

namespace canzona::comm {
namespace {

std::vector<GridShape> factorisations(int world_size) {
  std::vector<GridShape> shapes;
  for (int dp = 1; dp <= world_size; ++dp) {
    for (int tp = 1; dp * tp <= world_size; ++tp) {
      if (world_size % (dp * tp) == 0) shapes.push_back(GridShape{dp, tp, world_size / (dp * tp)});
    }
  }
  return shapes;
}

TEST(MpiGrid, GroupsFollowMegatronOrderForEveryShape) {
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  for (const GridShape& shape : factorisations(world_size)) {
    SCOPED_TRACE(testing::Message()
                 << "dp " << shape.dp << " x tp " << shape.tp << " x pp " << shape.pp);
    auto grid = make_mpi_grid(shape.dp, shape.tp, shape.pp, ReduceMode::kNative);
    const GridCoord c = grid->coord();
    EXPECT_EQ(world_rank, (c.pp * shape.dp + c.dp) * shape.tp + c.tp);
    EXPECT_EQ(grid->world().rank(), world_rank);
    EXPECT_EQ(grid->world().size(), world_size);
    EXPECT_EQ(grid->dp().rank(), c.dp);
    EXPECT_EQ(grid->dp().size(), shape.dp);
    EXPECT_EQ(grid->tp().rank(), c.tp);
    EXPECT_EQ(grid->tp().size(), shape.tp);

    std::vector<std::uint64_t> dp_members(shape.dp), tp_members(shape.tp);
    for (int d = 0; d < shape.dp; ++d) dp_members[d] = grid_rank(shape, {c.pp, d, c.tp});
    for (int t = 0; t < shape.tp; ++t) tp_members[t] = grid_rank(shape, {c.pp, c.dp, t});
    EXPECT_EQ(grid->dp().all_gather_u64(world_rank), dp_members);
    EXPECT_EQ(grid->tp().all_gather_u64(world_rank), tp_members);

    // A collective on each group sums exactly its members.
    float dp_sum = static_cast<float>(world_rank), tp_sum = dp_sum;
    grid->dp().all_reduce({&dp_sum, 1}, {&dp_sum, 1}).wait();
    grid->tp().all_reduce({&tp_sum, 1}, {&tp_sum, 1}).wait();
    float dp_expected = 0, tp_expected = 0;
    for (std::uint64_t r : dp_members) dp_expected += static_cast<float>(r);
    for (std::uint64_t r : tp_members) tp_expected += static_cast<float>(r);
    EXPECT_EQ(dp_sum, dp_expected);
    EXPECT_EQ(tp_sum, tp_expected);
  }
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
  for (const GridShape& shape : factorisations(world_size)) {
    auto grid = make_mpi_grid(shape.dp, shape.tp, shape.pp, ReduceMode::kNative);
    const int stage = shape.dp * shape.tp;
    for (int ep = 1; ep <= stage; ++ep)
      for (int etp = 1; ep * etp <= stage; ++etp) {
        if (stage % (ep * etp) != 0) continue;
        SCOPED_TRACE(testing::Message() << "dp " << shape.dp << " x tp " << shape.tp << " x pp "
                                        << shape.pp << ", ep " << ep << " etp " << etp);
        auto where = [&](int w) {
          const int l = w % stage;
          return Where{w / stage, l / (etp * ep), (l / etp) % ep, l % etp};
        };
        const Where me = where(world_rank);
        ExpertGroups g = make_mpi_expert_groups(*grid, {ep, etp}, ReduceMode::kNative);
        EXPECT_EQ(g.coord.edp, me.edp);
        EXPECT_EQ(g.coord.ep, me.ep);
        EXPECT_EQ(g.coord.etp, me.etp);
        std::vector<std::uint64_t> edp, etp_members, ep_members, slice;
        for (int w = 0; w < world_size; ++w) {
          const Where o = where(w);
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
        EXPECT_EQ(g.grid->shape().dp, stage / (ep * etp));
        EXPECT_EQ(g.grid->shape().tp, etp);
      }
  }
}

TEST(MpiGrid, WorldSizeMismatchThrowsTheSameUsageErrorOnEveryRank) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  try {
    make_mpi_grid(world_size + 1, 1, 1, ReduceMode::kNative);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "world size " + std::to_string(world_size) + " != dp " +
                                         std::to_string(world_size + 1) + " x tp 1 x pp 1");
  }
}

}  // namespace
}  // namespace canzona::comm
