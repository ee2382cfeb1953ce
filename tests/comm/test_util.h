// Helpers for MPI tests. A failed check must not skip a later collective on one rank only (the
// other ranks would hang), so checks are non-fatal EXPECTs over whole buffers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace canzona::comm::testing_util {

// Success when both spans hold the same bytes; otherwise names the first differing element.
inline ::testing::AssertionResult same_bits(std::span<const float> actual,
                                            std::span<const float> expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "first difference at element " << i << ": " << actual[i] << " vs " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::int64_t sum(const std::vector<std::int64_t>& v) {
  std::int64_t total = 0;
  for (std::int64_t x : v) total += x;
  return total;
}

inline std::vector<std::int64_t> prefix_offsets(const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> offsets(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  return offsets;
}

}  // namespace canzona::comm::testing_util
