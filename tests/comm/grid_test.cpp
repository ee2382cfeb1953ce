// Grid arithmetic without MPI: Megatron rank order and the world-size check.
#include "canzona/comm/grid.h"

#include <gtest/gtest.h>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

TEST(GridCoord, TpVariesFastestThenDpThenPp) {
  const GridShape shape{/*dp=*/2, /*tp=*/2, /*pp=*/2};
  struct Row {
    int rank, pp, dp, tp;
  };
  const Row rows[] = {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1},
                      {4, 1, 0, 0}, {5, 1, 0, 1}, {6, 1, 1, 0}, {7, 1, 1, 1}};
  for (const Row& row : rows) {
    const GridCoord c = grid_coord(shape, row.rank);
    EXPECT_EQ(c.pp, row.pp) << "rank " << row.rank;
    EXPECT_EQ(c.dp, row.dp) << "rank " << row.rank;
    EXPECT_EQ(c.tp, row.tp) << "rank " << row.rank;
  }
}

TEST(GridCoord, RoundTripsForEveryShapeUpTo12Ranks) {
  for (int dp = 1; dp <= 12; ++dp) {
    for (int tp = 1; dp * tp <= 12; ++tp) {
      for (int pp = 1; dp * tp * pp <= 12; ++pp) {
        const GridShape shape{dp, tp, pp};
        for (int r = 0; r < dp * tp * pp; ++r) {
          const GridCoord c = grid_coord(shape, r);
          EXPECT_EQ(grid_rank(shape, c), r) << dp << "x" << tp << "x" << pp;
          EXPECT_EQ(r, (c.pp * dp + c.dp) * tp + c.tp);
          EXPECT_LT(c.dp, dp);
          EXPECT_LT(c.tp, tp);
          EXPECT_LT(c.pp, pp);
        }
      }
    }
  }
}

TEST(GridCoord, RankOutsideTheGridIsABug) {
  EXPECT_THROW(grid_coord(GridShape{2, 2, 1}, 4), Error);
  EXPECT_THROW(grid_coord(GridShape{2, 2, 1}, -1), Error);
}

TEST(CheckGridShape, MismatchNamesWorldSizeAndEveryDegree) {
  try {
    check_grid_shape(GridShape{2, 2, 1}, 6);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "world size 6 != dp 2 x tp 2 x pp 1");
  }
}

TEST(CheckGridShape, NonPositiveDegreeIsAUsageError) {
  EXPECT_THROW(check_grid_shape(GridShape{0, 2, 1}, 0), UsageError);
  EXPECT_THROW(check_grid_shape(GridShape{2, -1, 1}, 2), UsageError);
  EXPECT_THROW(check_grid_shape(GridShape{1, 1, 0}, 0), UsageError);
}

TEST(CheckGridShape, MatchingShapesPass) {
  EXPECT_NO_THROW(check_grid_shape(GridShape{1, 1, 1}, 1));
  EXPECT_NO_THROW(check_grid_shape(GridShape{2, 2, 2}, 8));
  EXPECT_NO_THROW(check_grid_shape(GridShape{4, 1, 1}, 4));
}

}  // namespace
}  // namespace canzona::comm
