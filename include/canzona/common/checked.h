// Checked arithmetic for sizes, counts and bytes formed from user-controlled integers (element
// counts, shapes, grid sizes, token counts). Every product or sum of such values goes through
// these functions, so an input that would overflow int64 is a UsageError naming what was being
// computed, never a wrapped-around value, a crash or a nonsense plan.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>

#include "canzona/common/error.h"

namespace canzona {

// a * b; throws SizeOverflow (a UsageError) "<what>: a x b overflows a 64-bit integer" when it does
// not fit.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw SizeOverflow(str(what, ": ", a, " x ", b, " overflows a 64-bit integer"));
  return out;
}

// a + b; throws SizeOverflow "<what>: a + b overflows a 64-bit integer" when it does not fit.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw SizeOverflow(str(what, ": ", a, " + ", b, " overflows a 64-bit integer"));
  return out;
}

// The same two with the description formed only on overflow, for hot paths: `what()` returns it.
template <typename What>
requires std::invocable<const What&>
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const What& what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return checked_mul(a, b, std::string_view(what()));
  return out;
}
template <typename What>
requires std::invocable<const What&>
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const What& what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return checked_add(a, b, std::string_view(what()));
  return out;
}

// value as int; throws SizeOverflow "<what>: value exceeds the int range" when it does not fit.
inline int checked_int(std::int64_t value, std::string_view what) {
  int out = 0;
  if (__builtin_add_overflow(value, 0, &out))
    throw SizeOverflow(str(what, ": ", value, " exceeds the int range"));
  return out;
}

// Throws UsageError "<what> = value must lie in [lo, hi] (<why>)" unless lo <= value <= hi.
inline void require_in_range(std::int64_t value, std::int64_t lo, std::int64_t hi,
                             std::string_view what, std::string_view why) {
  if (value < lo || value > hi)
    throw UsageError(str(what, " = ", value, " must lie in [", lo, ", ", hi, "] (", why, ")"));
}

// The same with the description formed only when the value is out of range (hot paths).
template <typename What>
requires std::invocable<const What&>
inline void require_in_range(std::int64_t value, std::int64_t lo, std::int64_t hi, const What& what,
                             std::string_view why) {
  if (value < lo || value > hi) require_in_range(value, lo, hi, std::string_view(what()), why);
}

}  // namespace canzona
