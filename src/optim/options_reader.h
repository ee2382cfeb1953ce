// Reads an optimizer's options struct from a JSON object, strictly (internal): every key must be
// a known field of the right type, so a typo is a UsageError naming the optimizer and the key,
// never a silently ignored setting. read_in() also bounds the value, so an option that would make
// the optimizer divide by zero, allocate without bound or produce NaN (max_precond_dim -5,
// precondition_frequency 0, beta2 1, eps 0) is a UsageError naming the key before any work.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::optim::detail {

// Bounds of read_in() shared by the optimizers, each named in its error message. Decay rates
// (beta1, beta2, momentum, shampoo_beta, graft_beta2) lie in [0, kMaxBeta]: 1 would divide by zero
// in Adam's bias correction or freeze the statistics. lr and weight_decay lie in [0, kMaxRate].
// eps values lie in [kMinEps, 1]. precondition_frequency lies in [1, kMaxPrecondFrequency] (0 is
// a division by zero). max_precond_dim lies in [1, kMaxPrecondDim]: one 65536-wide side already
// needs a 16 GiB preconditioner. ns_steps lies in [0, kMaxNsSteps] (5 is the paper's).
inline constexpr double kMaxBeta = 0.9999999;
inline constexpr double kMaxRate = 1000.0;
inline constexpr double kMinEps = 1e-30;
inline constexpr std::int64_t kMaxPrecondFrequency = 1'000'000;
inline constexpr std::int64_t kMaxPrecondDim = 65536;
inline constexpr std::int64_t kMaxNsSteps = 100;

class OptionsReader {
 public:
  // Throws UsageError unless `options` is an object (or null, read as empty). With
  // record_effective false, effective() stays empty: the cost formulas parse their options on
  // every call and need only the values.
  OptionsReader(const char* optimizer, const nlohmann::json& options, bool record_effective = true);

  // Each overwrites `field` when `key` is present; throws UsageError on a wrong type.
  void read(const char* key, double& field);
  void read(const char* key, int& field);
  void read(const char* key, std::int64_t& field);
  void read(const char* key, bool& field);
  void read(const char* key, std::string& field);
  // As read(), then throws UsageError "<optimizer> option '<key>' = v must lie in [lo, hi]
  // (<why>)" unless lo <= field <= hi; doubles must also be finite. Applied to the field's final
  // value, so a bad default would fail too.
  void read_in(const char* key, double& field, double lo, double hi, const char* why);
  void read_in(const char* key, int& field, std::int64_t lo, std::int64_t hi, const char* why);
  void read_in(const char* key, std::int64_t& field, std::int64_t lo, std::int64_t hi,
               const char* why);
  // Reads a string and converts it with `parse` (which throws UsageError on a bad value; rethrown
  // as "<optimizer> option '<key>': <its message>"); the effective value is recorded as
  // name(field).
  template <typename Enum>
  void read_enum(const char* key, Enum& field, Enum (*parse)(const std::string&),
                 const char* (*name)(Enum)) {
    std::string value = name(field);
    if (has(key)) {
      read(key, value);
      try {
        field = parse(value);
      } catch (const UsageError& e) {
        throw UsageError(str(optimizer_, " option '", key, "': ", e.what()));
      }
    }
    if (record_) effective_[key] = name(field);
  }

  // Throws UsageError naming the first key no read() asked for.
  void finish() const;
  // Every key read so far with its final value (the given one or the default): the options the
  // optimizer really runs with, the same JSON however they were spelled (agreement across ranks).
  const nlohmann::json& effective() const { return effective_; }

 private:
  bool has(const char* key);
  const nlohmann::json& at(const char* key);
  [[noreturn]] void wrong_type(const char* key, const char* expected) const;

  const char* optimizer_;
  const nlohmann::json& options_;
  bool record_;
  std::vector<const char*> known_;  // keys asked for (string literals)
  nlohmann::json effective_ = nlohmann::json::object();
};

}  // namespace canzona::optim::detail
