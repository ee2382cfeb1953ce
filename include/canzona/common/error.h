// Error policy (style.md rule 5). The library throws typed exceptions; `main` maps them to exit
// codes. UsageError is bad input from the user (exit code 2); Error is everything else (exit 1).
// CANZONA_CHECK* are for internal invariants: a failure is a bug and names file and line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace canzona {

// Something is wrong that is not the user's fault, or a resource failed (MPI, LAPACK, I/O).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user's input is wrong: a flag, a model file, a shape. The message says what and where.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A size, count or byte total formed from the input does not fit a 64-bit integer (checked.h).
// A UsageError like any other; its own type lets a planner that tries an optional candidate
// (a peer's layout for comparison) skip one that is too large without hiding any other error.
class SizeOverflow : public UsageError {
 public:
  using UsageError::UsageError;
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const std::string& what);

template <typename A, typename B>
[[noreturn]] void throw_check_eq_failure(const char* file, int line, const char* expr_a,
                                         const char* expr_b, const A& a, const B& b) {
  std::ostringstream os;
  os << expr_a << " == " << expr_b << " failed (" << a << " vs " << b << ")";
  throw_check_failure(file, line, os.str());
}
}  // namespace detail

// Builds a message from stream-style arguments: canzona::str("dp=", dp, " tp=", tp).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace canzona

#define CANZONA_CHECK(cond, ...)                                                  \
  do {                                                                            \
    if (!(cond))                                                                  \
      ::canzona::detail::throw_check_failure(                                     \
          __FILE__, __LINE__,                                                     \
          ::canzona::str("check failed: " #cond " " __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#define CANZONA_CHECK_EQ(a, b)                                                          \
  do {                                                                                  \
    const auto& canzona_a_ = (a);                                                       \
    const auto& canzona_b_ = (b);                                                       \
    if (!(canzona_a_ == canzona_b_))                                                    \
      ::canzona::detail::throw_check_eq_failure(__FILE__, __LINE__, #a, #b, canzona_a_, \
                                                canzona_b_);                            \
  } while (0)

// Validates user input: throws UsageError with the message when cond is false.
#define CANZONA_REQUIRE(cond, ...)                                         \
  do {                                                                     \
    if (!(cond)) throw ::canzona::UsageError(::canzona::str(__VA_ARGS__)); \
  } while (0)
