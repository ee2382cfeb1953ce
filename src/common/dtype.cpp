#include "canzona/common/dtype.h"

#include <algorithm>
#include <cstring>

#include "canzona/common/error.h"

namespace canzona {

const char* to_string(DType dtype) {
  return dtype == DType::kBF16 ? "bf16" : "fp32";
}

DType parse_precision(const std::string& name, const char* flag) {
  if (name == "fp32") return DType::kF32;
  if (name == "bf16") return DType::kBF16;
  throw UsageError(str(flag, " must be fp32 or bf16 (got '", name, "')"));
}

void cast(std::span<const float> from, std::span<bf16> to) {
  CANZONA_CHECK(from.size() == to.size(), "cast: ", from.size(), " fp32 into ", to.size(), " bf16");
  for (std::size_t i = 0; i < from.size(); ++i) to[i] = to_bf16(from[i]);
}

void cast(std::span<const bf16> from, std::span<float> to) {
  CANZONA_CHECK(from.size() == to.size(), "cast: ", from.size(), " bf16 into ", to.size(), " fp32");
  for (std::size_t i = 0; i < from.size(); ++i) to[i] = to_float(from[i]);
}

namespace detail {
void throw_dtype_mismatch(DType have, DType want) {
  throw Error(str("a ", to_string(have), " buffer read as ", to_string(want)));
}
}  // namespace detail

TypedSpan TypedSpan::subspan(std::int64_t offset, std::int64_t count) const {
  CANZONA_CHECK(offset >= 0 && count >= 0 && offset + count <= size_, "subspan {", offset, ", ",
                count, "} of ", size_, " elements");
  return {data() + offset * dtype_bytes(dtype_), count, dtype_};
}

ConstTypedSpan ConstTypedSpan::subspan(std::int64_t offset, std::int64_t count) const {
  CANZONA_CHECK(offset >= 0 && count >= 0 && offset + count <= size_, "subspan {", offset, ", ",
                count, "} of ", size_, " elements");
  return {data() + offset * dtype_bytes(dtype_), count, dtype_};
}

void copy_cast(ConstTypedSpan from, TypedSpan to) {
  CANZONA_CHECK(from.size() == to.size(), "copy_cast: ", from.size(), " elements into ", to.size());
  if (from.dtype() == to.dtype()) {
    if (from.size() > 0)
      std::memmove(to.data(), from.data(), static_cast<std::size_t>(to.size_bytes()));
  } else if (to.dtype() == DType::kBF16) {
    cast(from.as<float>(), to.as<bf16>());
  } else {
    cast(from.as<bf16>(), to.as<float>());
  }
}

void copy_cast(ConstTypedPtr from, TypedPtr to, std::int64_t n) {
  copy_cast(ConstTypedSpan(from.data(), n, from.dtype()), TypedSpan(to.data(), n, to.dtype()));
}

void read_f32(ConstTypedSpan x, std::span<float> out) {
  copy_cast(x, out);
}

namespace {

// Blocks of kBlock elements are tested without an early exit or a comparison, so the loop is
// plain AND / ADD / OR on the bits and vectorises: with e the exponent mask and low its lowest
// bit, (x & e) + low reaches the sign bit only when every exponent bit is set (Inf or NaN). The
// first block with a non-finite element is searched element by element.
template <typename Bits>
std::int64_t first_with_exponent_ones(const Bits* x, std::int64_t n, Bits exponent) {
  constexpr std::int64_t kBlock = 4096;
  const Bits low = static_cast<Bits>(exponent & static_cast<Bits>(~exponent + 1u));
  const Bits sign = static_cast<Bits>(exponent + low);
  for (std::int64_t begin = 0; begin < n; begin += kBlock) {
    const std::int64_t end = std::min(n, begin + kBlock);
    Bits any = 0;
    for (std::int64_t i = begin; i < end; ++i) any |= static_cast<Bits>((x[i] & exponent) + low);
    if ((any & sign) == 0) continue;
    for (std::int64_t i = begin; i < end; ++i)
      if ((x[i] & exponent) == exponent) return i;
  }
  return -1;
}

}  // namespace

std::int64_t first_non_finite(ConstTypedSpan x) {
  if (x.dtype() == DType::kF32)
    return first_with_exponent_ones(reinterpret_cast<const std::uint32_t*>(x.data()), x.size(),
                                    std::uint32_t{0x7F800000});
  return first_with_exponent_ones(reinterpret_cast<const std::uint16_t*>(x.data()), x.size(),
                                  std::uint16_t{0x7F80});
}

void sum_in_rank_order(ConstTypedSpan blocks, int num_blocks, TypedSpan out) {
  const std::int64_t n = out.size();
  CANZONA_CHECK(blocks.dtype() == out.dtype() && blocks.size() == n * num_blocks,
                "sum_in_rank_order: ", num_blocks, " blocks of ", n, " elements in ",
                blocks.size());
  if (n == 0 || num_blocks == 0) return;
  if (out.dtype() == DType::kF32) {
    const float* x = blocks.as<float>().data();
    float* y = out.as<float>().data();
    std::copy(x, x + n, y);
    for (int q = 1; q < num_blocks; ++q) {
      const float* block = x + q * n;
      for (std::int64_t j = 0; j < n; ++j) y[j] += block[j];
    }
    return;
  }
  const bf16* x = blocks.as<bf16>().data();
  bf16* y = out.as<bf16>().data();
  for (std::int64_t j = 0; j < n; ++j) {
    float sum = to_float(x[j]);
    for (int q = 1; q < num_blocks; ++q) sum += to_float(x[q * n + j]);
    y[j] = to_bf16(sum);
  }
}

}  // namespace canzona
