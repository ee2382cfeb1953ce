// Checked arithmetic: exact results inside int64, a UsageError naming the computation outside.
#include "canzona/common/checked.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace canzona {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(Checked, ExactInsideTheRange) {
  EXPECT_EQ(checked_mul(3037000499, 3037000499, "x"), 9223372030926249001);
  EXPECT_EQ(checked_add(kMax - 1, 1, "x"), kMax);
  EXPECT_EQ(checked_mul(-4, 5, "x"), -20);
  EXPECT_EQ(checked_int(2147483647, "x"), 2147483647);
}

TEST(Checked, OverflowNamesTheComputation) {
  try {
    checked_mul(3037000500, 3037000500, "param 'w' numel");
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "param 'w' numel: 3037000500 x 3037000500 overflows a 64-bit integer");
  }
  EXPECT_THROW(checked_add(kMax, 1, "bytes"), UsageError);
  EXPECT_THROW(checked_int(2147483648, "layers"), UsageError);
}

TEST(Checked, RangeMessageSaysTheLimitAndWhy) {
  require_in_range(8, 1, 8, "tp", "GPUs per node");
  try {
    require_in_range(9, 1, 8, "tp", "GPUs per node");
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "tp = 9 must lie in [1, 8] (GPUs per node)");
  }
}

}  // namespace
}  // namespace canzona
