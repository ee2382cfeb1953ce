// The dtypes of the data plane (common/dtype.h). Expected values come from a rounding written
// independently here: the two bf16 neighbours of x, chosen by exact double arithmetic, ties to the
// even one (IEEE 754 roundTiesToEven), not from to_bf16's bias trick.
#include "canzona/common/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "canzona/common/error.h"

namespace canzona {
namespace {

// bf16 bits of x by the definition: below = x with the low 16 bits cleared (toward zero), above
// = the next bf16 away from zero; pick the nearer, ties to the one whose last bit is 0.
std::uint16_t reference_bf16(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t below = u & 0xFFFF0000u;
  if (below == u) return static_cast<std::uint16_t>(u >> 16);
  const std::uint32_t above = below + 0x10000u;  // magnitude up; may become infinity
  const double xd = x;
  const double lo = std::bit_cast<float>(below);
  // above's magnitude: the largest finite bf16 + one step is infinity in bf16, but its distance is
  // the one to 2^128 (the value the exponent field would give), as IEEE rounding defines it.
  const double hi = (above & 0x7FFFFFFFu) == 0x7F800000u
                        ? std::copysign(std::ldexp(1.0, 128), xd)
                        : static_cast<double>(std::bit_cast<float>(above));
  const double d_lo = std::fabs(xd - lo), d_hi = std::fabs(hi - xd);
  if (d_lo < d_hi) return static_cast<std::uint16_t>(below >> 16);
  if (d_hi < d_lo) return static_cast<std::uint16_t>(above >> 16);
  return static_cast<std::uint16_t>(((below >> 16) & 1u) == 0 ? below >> 16 : above >> 16);
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_bytes(DType::kF32), 4);
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_STREQ(to_string(DType::kBF16), "bf16");
  EXPECT_EQ(parse_precision("bf16"), DType::kBF16);
  EXPECT_EQ(parse_precision("fp32"), DType::kF32);
  for (const char* bad : {"fp16", "BF16", "", "float32"}) {
    try {
      parse_precision(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--precision must be fp32 or bf16 (got '") + bad + "')");
    }
  }
}

TEST(DType, RoundsToNearestEvenAsTheDefinition) {
  std::vector<float> cases = {0.0f,
                              -0.0f,
                              1.0f,
                              -1.0f,
                              1e-40f,
                              -1e-45f,
                              std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  // Exact ties both ways (low half 0x8000 above an even and an odd mantissa), one below and above.
  for (std::uint32_t base : {0x3F800000u, 0x3F810000u, 0xBF830000u, 0x7F7F0000u})
    for (std::uint32_t low : {0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x0001u})
      cases.push_back(std::bit_cast<float>(base | low));
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (!std::isnan(x)) cases.push_back(x);
  }
  for (float x : cases) ASSERT_EQ(to_bf16(x).bits, reference_bf16(x)) << std::hexfloat << x;
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FC0);
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0xFF800001u)).bits, 0x7FC0) << "signalling NaN";
}

TEST(DType, WideningIsExactAndRoundTrips) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const bf16 b{static_cast<std::uint16_t>(bits)};
    const float f = to_float(b);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f), bits << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(to_bf16(f).bits, bits);
    }
  }
}

TEST(DType, SumsInFp32ThenRoundsOnce) {
  // 1 + 2^-8 + 2^-8: rounding after each addition gives 1 (each 2^-8 is a tie to even below),
  // rounding once gives 1 + 2^-7.
  const std::vector<bf16> blocks = {to_bf16(1.0f), to_bf16(0x1p-8f), to_bf16(0x1p-8f)};
  std::vector<bf16> out(1);
  sum_in_rank_order(ConstTypedSpan(blocks), 3, TypedSpan(out));
  EXPECT_EQ(to_float(out[0]), 1.0f + 0x1p-7f);
  EXPECT_EQ(round_to_bf16(round_to_bf16(1.0f + 0x1p-8f) + 0x1p-8f), 1.0f);
}

TEST(DType, TypedSpansCheckTheirDtype) {
  std::vector<float> f(4, 1.5f);
  std::vector<bf16> b(4);
  copy_cast(ConstTypedSpan(f), TypedSpan(b));
  EXPECT_EQ(to_float(b[3]), 1.5f);
  EXPECT_EQ(TypedSpan(b).size_bytes(), 8);
  EXPECT_EQ(TypedSpan(f).subspan(1, 2).size_bytes(), 8);
  EXPECT_THROW(TypedSpan(b).as<float>(), Error);
  EXPECT_THROW(TypedSpan(f).subspan(3, 2), Error);
}

// first_non_finite: the first NaN or infinity by index, in either dtype, past a block of 4096
// finite values and with the largest finite values and a subnormal not flagged.
TEST(DType, FirstNonFiniteFindsTheFirstNanOrInfinity) {
  std::vector<float> f(10000, 1.0f);
  f[1] = std::numeric_limits<float>::max();
  f[2] = -std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(first_non_finite(ConstTypedSpan(f)), -1);
  f[9000] = -std::numeric_limits<float>::infinity();
  f[5000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(first_non_finite(ConstTypedSpan(f)), 5000);
  std::vector<bf16> b(6000, to_bf16(1.0f));
  b[3] = bf16{0x7F7F};  // the largest finite bf16
  b[4] = bf16{0xFF7F};
  EXPECT_EQ(first_non_finite(ConstTypedSpan(b)), -1);
  b[5999] = bf16{0xFF80};  // -inf
  EXPECT_EQ(first_non_finite(ConstTypedSpan(b)), 5999);
  b[4097] = bf16{0x7FC1};  // a NaN
  EXPECT_EQ(first_non_finite(ConstTypedSpan(b)), 4097);
  EXPECT_EQ(first_non_finite(ConstTypedSpan(std::vector<float>())), -1);
}

}  // namespace
}  // namespace canzona
