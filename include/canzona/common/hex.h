// A 64-bit value as 16 lower-case hex digits, zero-padded: how every hash (plan_hash,
// params_hash, the model and settings hashes) is printed and written to JSON.
#pragma once

#include <cstdint>
#include <string>

namespace canzona {

inline std::string hex64(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<std::size_t>(i)] = kDigits[value & 15];
  return out;
}

}  // namespace canzona
