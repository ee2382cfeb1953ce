// ParallelDims and ZeroStage (common/parallel_dims.h): the rank layout and the expert grid against
// hand-worked examples of Megatron's order, and every check's message.
#include "canzona/common/parallel_dims.h"

#include <gtest/gtest.h>

#include <string>

#include "canzona/common/error.h"

namespace canzona {
namespace {

std::string message_of(const ParallelDims& dims, DimNames names = DimNames::kFlags) {
  try {
    dims.check(names);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelDims, ProductsOfTheAxes) {
  const ParallelDims d{4, 2, 3, 2, 2};
  EXPECT_EQ(d.world(), 24);
  EXPECT_EQ(d.stage_ranks(), 8);
  EXPECT_EQ(d.expert_ranks(), 4);
  EXPECT_EQ(d.edp(), 2);
  EXPECT_TRUE(d.expert_parallel());
  EXPECT_FALSE((ParallelDims{4, 2, 3}.expert_parallel()));
  EXPECT_EQ(to_string(d), "dp 4 x tp 2 x pp 3 (ep 2 x etp 2)");
  EXPECT_EQ(to_string(ParallelDims{2, 1, 2}), "dp 2 x tp 1 x pp 2");
}

// dp 2 x tp 2 x pp 2, tp fastest, then dp, then pp (Megatron): world ranks 0..7 are
// (pp, dp, tp) = 000 001 010 011 100 101 110 111.
TEST(ParallelDims, RanksInMegatronOrder) {
  const ParallelDims d{2, 2, 2};
  const int want[8][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                          {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    const GridCoord c = d.coord(r);
    EXPECT_EQ(c.pp, want[r][0]) << r;
    EXPECT_EQ(c.dp, want[r][1]) << r;
    EXPECT_EQ(c.tp, want[r][2]) << r;
    EXPECT_EQ(d.rank(c), r);
  }
  // dp 3 x tp 1 x pp 2: rank 4 is the second stage's DP rank 1.
  const GridCoord c = ParallelDims{3, 1, 2}.coord(4);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.tp, 0);
}

// dp 4 x tp 1, ep 2, etp 2: the stage's ranks l = 0..3 are (edp, ep, etp) =
// (0,0,0) (0,0,1) (0,1,0) (0,1,1); dp 2 x tp 2, ep 2, etp 1: (0,0,0) (0,1,0) (1,0,0) (1,1,0).
TEST(ParallelDims, ExpertGridExpertTpFastest) {
  const ParallelDims a{4, 1, 1, 2, 2};
  const int want_a[4][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}};
  for (int l = 0; l < 4; ++l) {
    const ExpertCoord c = a.expert_coord(l, 0);
    EXPECT_EQ(c.edp, want_a[l][0]) << l;
    EXPECT_EQ(c.ep, want_a[l][1]) << l;
    EXPECT_EQ(c.etp, want_a[l][2]) << l;
  }
  const ParallelDims b{2, 2, 1, 2, 1};
  const int want_b[4][3] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}};
  for (int l = 0; l < 4; ++l) {
    const ExpertCoord c = b.expert_coord(l / 2, l % 2);
    EXPECT_EQ(c.edp, want_b[l][0]) << l;
    EXPECT_EQ(c.ep, want_b[l][1]) << l;
    EXPECT_EQ(c.etp, want_b[l][2]) << l;
  }
}

TEST(ParallelDims, ChecksNameTheDegree) {
  EXPECT_EQ(message_of({2, 2, 2, 2, 2}), "");
  EXPECT_EQ(message_of({0, 1, 1}), "--dp must be positive (got 0)");
  EXPECT_EQ(message_of({1, -1, 1}), "--tp must be positive (got -1)");
  EXPECT_EQ(message_of({1, 1, 0}), "--pp must be positive (got 0)");
  EXPECT_EQ(message_of({1, 1, 0}, DimNames::kKeywords), "pp must be positive (got 0)");
  EXPECT_EQ(message_of({1 << 10, 1 << 10, 2}),
            "--dp x --tp x --pp = 1024 x 1024 x 2 ranks is more than 1048576 (kMaxRanks)");
  // A degree alone above the limit (its product with the others would overflow int32).
  EXPECT_EQ(message_of({1 << 30, 1, 1}),
            "--dp x --tp x --pp = 1073741824 x 1 x 1 ranks is more than 1048576 (kMaxRanks)");
  EXPECT_EQ(message_of({2, 1, 1, 0}), "--ep must be in [1, 1048576] (kMaxRanks; got 0)");
  EXPECT_EQ(message_of({2, 1, 1, 1, (1 << 20) + 1}),
            "--etp must be in [1, 1048576] (kMaxRanks; got 1048577)");
  EXPECT_EQ(message_of({3, 2, 1, 4, 1}),
            "--ep 4 x --etp 1 = 4 does not divide --dp 3 x --tp 2 = 6 ranks (expert DP = DP x TP "
            "/ (EP x ETP))");
  EXPECT_EQ(message_of({3, 2, 1, 4, 1}, DimNames::kKeywords),
            "ep 4 x etp 1 = 4 does not divide dp 3 x tp 2 = 6 ranks (expert DP = DP x TP / (EP x "
            "ETP))");
}

TEST(ParallelDims, WorldSizeMustMatch) {
  EXPECT_NO_THROW((ParallelDims{2, 2, 2}.check_world(8)));
  try {
    ParallelDims{2, 2, 1}.check_world(6);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "world size 6 != dp 2 x tp 2 x pp 1 (launch with mpirun -np 4)");
  }
  EXPECT_THROW((ParallelDims{0, 2, 1}.check_world(0)), UsageError);
}

TEST(ZeroStage, OnlyOneAndThree) {
  EXPECT_EQ(parse_zero_stage(1), ZeroStage::kOne);
  EXPECT_EQ(parse_zero_stage(3), ZeroStage::kThree);
  EXPECT_EQ(to_int(ZeroStage::kThree), 3);
  for (int bad : {0, 2, 4, -1}) {
    try {
      parse_zero_stage(bad);
      FAIL() << bad;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "--zero-stage " + std::to_string(bad) + ": must be 1 (ZeRO-1) or 3 (ZeRO-3)");
    }
  }
  try {
    parse_zero_stage(2, "zero_stage");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "zero_stage 2: must be 1 (ZeRO-1) or 3 (ZeRO-3)");
  }
}

}  // namespace
}  // namespace canzona
