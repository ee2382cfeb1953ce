// 64-bit FNV-1a, the one byte hash of the project: plan_hash, the launch-settings and model
// hashes ranks compare before the first collective, and params_hash in run/compare's JSON. Stable
// across builds and ranks (bytes in memory order; every caller hashes fixed-width values).
#pragma once

#include <cstddef>
#include <cstdint>

namespace canzona {

inline constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
inline constexpr std::uint64_t kFnvPrime = 1099511628211ull;

// Folds `size` bytes at `data` into the running hash `h` (start from kFnvOffset).
inline void fnv1a_mix(std::uint64_t& h, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= kFnvPrime;
  }
}

// The hash of `size` bytes at `data`.
inline std::uint64_t fnv1a(const void* data, std::size_t size) {
  std::uint64_t h = kFnvOffset;
  fnv1a_mix(h, data, size);
  return h;
}

}  // namespace canzona
