// splitmix64's finalizer (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number
// generators"): a bijective 64-bit mix, the one counter-based hash of the project (synthetic
// values, the trainer's init, the data sampler, test inputs).
#pragma once

#include <cstdint>

namespace canzona {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace canzona
