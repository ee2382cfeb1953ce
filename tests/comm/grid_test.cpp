// Grid without MPI: Megatron rank order (ParallelDims, as the backends use it), the world-size
// check, and what the Grid constructor accepts: one communicator per group with the size and rank
// grid.h gives it, an embedding communicator exactly on the first and the last pipeline stage.
#include "canzona/comm/grid.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

TEST(GridCoord, TpVariesFastestThenDpThenPp) {
  const ParallelDims dims{.dp = 2, .tp = 2, .pp = 2};
  struct Row {
    int rank, pp, dp, tp;
  };
  const Row rows[] = {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1},
                      {4, 1, 0, 0}, {5, 1, 0, 1}, {6, 1, 1, 0}, {7, 1, 1, 1}};
  for (const Row& row : rows) {
    const GridCoord c = dims.coord(row.rank);
    EXPECT_EQ(c.pp, row.pp) << "rank " << row.rank;
    EXPECT_EQ(c.dp, row.dp) << "rank " << row.rank;
    EXPECT_EQ(c.tp, row.tp) << "rank " << row.rank;
    EXPECT_EQ(dims.rank(c), row.rank);
  }
}

TEST(GridCoord, RankOutsideTheGridIsABug) {
  const ParallelDims dims{.dp = 2, .tp = 2, .pp = 1};
  EXPECT_THROW(dims.coord(4), Error);
  EXPECT_THROW(dims.coord(-1), Error);
}

TEST(CheckWorld, MismatchNamesWorldSizeEveryDegreeAndTheLaunch) {
  try {
    ParallelDims{.dp = 2, .tp = 2, .pp = 1}.check_world(6);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "world size 6 != dp 2 x tp 2 x pp 1 (launch with mpirun -np 4)");
  }
  EXPECT_THROW((ParallelDims{.dp = 0, .tp = 2, .pp = 1}.check_world(0)), UsageError);
  EXPECT_NO_THROW((ParallelDims{.dp = 2, .tp = 2, .pp = 2}.check_world(8)));
}

// A communicator that only knows its size and rank (the Grid constructor reads nothing else).
class SizedCommunicator final : public Communicator {
 public:
  SizedCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override {}
  std::vector<std::uint64_t> all_gather_u64(std::uint64_t) override { return {}; }
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte>) override {
    return {};
  }

 protected:
  Request do_reduce_scatter(ConstTypedSpan, TypedSpan, std::span<const std::int64_t>) override {
    return {};
  }
  Request do_all_gather(ConstTypedSpan, TypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>) override {
    return {};
  }
  Request do_all_to_all(ConstTypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>, TypedSpan, std::span<const std::int64_t>,
                        std::span<const std::int64_t>) override {
    return {};
  }
  Request do_all_reduce(ConstTypedSpan, TypedSpan) override { return {}; }

 private:
  int rank_;
  int size_;
};

std::unique_ptr<Communicator> sized(int rank, int size) {
  return std::make_unique<SizedCommunicator>(rank, size);
}

// The Grid of world rank `w` of `dims` with communicators of the sizes and ranks grid.h gives;
// `embedding` says whether to hand it an embedding communicator of rank `embedding_rank` among
// `embedding_size`.
std::unique_ptr<Grid> grid_of(const ParallelDims& dims, int w, bool embedding, int embedding_rank,
                              int embedding_size, int pp_size) {
  const GridCoord c = dims.coord(w);
  return std::make_unique<Grid>(dims, c, sized(w, static_cast<int>(dims.world())),
                                sized(c.dp, dims.dp), sized(c.tp, dims.tp), sized(c.pp, pp_size),
                                embedding ? sized(embedding_rank, embedding_size) : nullptr);
}

TEST(Grid, EmbeddingCommunicatorExactlyOnTheFirstAndLastStage) {
  const ParallelDims dims{.dp = 1, .tp = 2, .pp = 4, .ep = 2};
  // World rank w = pp * 2 + tp: stages 0 and 3 are ranks 0, 1 and 6, 7.
  for (int w = 0; w < 8; ++w) {
    const int stage = w / 2;
    const bool member = stage == 0 || stage == 3;
    SCOPED_TRACE(testing::Message() << "world rank " << w);
    std::unique_ptr<Grid> grid = grid_of(dims, w, member, stage == 0 ? 0 : 1, 2, 4);
    EXPECT_EQ(grid->dims(), dims);
    EXPECT_EQ(grid->pp().rank(), stage);
    EXPECT_EQ(grid->in_embedding_group(), member);
    if (member) {
      EXPECT_EQ(grid->embedding().rank(), stage == 0 ? 0 : 1);
    } else {
      try {
        grid->embedding();
        ADD_FAILURE() << "expected Error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pipeline stage " + std::to_string(stage) + " of 4"),
                  std::string::npos)
            << e.what();
      }
    }
    // Handing a middle stage an embedding communicator, or the first or last stage none, is a bug.
    EXPECT_THROW(grid_of(dims, w, !member, 0, 2, 4), Error);
  }
}

TEST(Grid, OneStageIsItsOwnEmbeddingGroup) {
  const ParallelDims dims{.dp = 2, .tp = 2, .pp = 1};
  for (int w = 0; w < 4; ++w) {
    std::unique_ptr<Grid> grid = grid_of(dims, w, true, 0, 1, 1);
    EXPECT_TRUE(grid->in_embedding_group());
    EXPECT_EQ(grid->embedding().size(), 1);
    EXPECT_EQ(grid->pp().size(), 1);
    EXPECT_THROW(grid_of(dims, w, true, 0, 2, 1), Error);  // an embedding group of two at pp 1
  }
}

TEST(Grid, CommunicatorsOfTheWrongSizeOrRankAreABug) {
  const ParallelDims dims{.dp = 2, .tp = 1, .pp = 2};
  EXPECT_NO_THROW(grid_of(dims, 3, true, 1, 2, 2));
  EXPECT_THROW(grid_of(dims, 3, true, 1, 2, 3), Error);  // pp communicator of 3 ranks
  EXPECT_THROW(grid_of(dims, 3, true, 0, 2, 2), Error);  // last stage must be embedding rank 1
  const GridCoord c = dims.coord(3);
  EXPECT_THROW(Grid(dims, c, sized(3, 4), sized(c.dp, 2), sized(c.tp, 1), nullptr, sized(1, 2)),
               Error);  // no pp communicator
  EXPECT_THROW(Grid(ParallelDims{.dp = 2, .tp = 1, .pp = 2, .ep = 3}, c, sized(3, 4),
                    sized(c.dp, 2), sized(c.tp, 1), sized(1, 2), sized(1, 2)),
               UsageError);  // ep 3 does not divide dp x tp
}

}  // namespace
}  // namespace canzona::comm
