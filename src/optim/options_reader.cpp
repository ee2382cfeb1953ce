#include "options_reader.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "canzona/common/error.h"

namespace canzona::optim::detail {
namespace {

// Enough digits that a bound like kMaxBeta does not print as 1.
std::string exact(double v) {
  std::ostringstream out;
  out << std::setprecision(10) << v;
  return out.str();
}

}  // namespace

OptionsReader::OptionsReader(const char* optimizer, const nlohmann::json& options,
                             bool record_effective)
    : optimizer_(optimizer), options_(options), record_(record_effective) {
  known_.reserve(16);
  if (!options.is_null() && !options.is_object())
    throw UsageError(str(optimizer_, " options: expected a JSON object, got ", options.dump()));
}

bool OptionsReader::has(const char* key) {
  known_.push_back(key);
  return options_.is_object() && !options_.empty() && options_.contains(key);
}

const nlohmann::json& OptionsReader::at(const char* key) {
  return options_.at(key);
}

void OptionsReader::wrong_type(const char* key, const char* expected) const {
  throw UsageError(str(optimizer_, " option '", key, "': expected ", expected, ", got ",
                       options_.at(key).dump()));
}

void OptionsReader::read(const char* key, double& field) {
  if (has(key)) {
    if (!at(key).is_number()) wrong_type(key, "a number");
    field = at(key).get<double>();
  }
  if (record_) effective_[key] = field;
}

void OptionsReader::read(const char* key, std::int64_t& field) {
  if (has(key)) {
    if (!at(key).is_number_integer()) wrong_type(key, "an integer");
    field = at(key).get<std::int64_t>();
  }
  if (record_) effective_[key] = field;
}

void OptionsReader::read(const char* key, int& field) {
  std::int64_t value = field;
  read(key, value);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
    wrong_type(key, "an integer in int range");
  field = static_cast<int>(value);
}

void OptionsReader::read(const char* key, bool& field) {
  if (has(key)) {
    if (!at(key).is_boolean()) wrong_type(key, "true or false");
    field = at(key).get<bool>();
  }
  if (record_) effective_[key] = field;
}

void OptionsReader::read(const char* key, std::string& field) {
  if (has(key)) {
    if (!at(key).is_string()) wrong_type(key, "a string");
    field = at(key).get<std::string>();
  }
  if (record_) effective_[key] = field;
}

void OptionsReader::read_in(const char* key, double& field, double lo, double hi, const char* why) {
  read(key, field);
  if (!(std::isfinite(field) && field >= lo && field <= hi))
    throw UsageError(str(optimizer_, " option '", key, "' = ", exact(field),
                         " must be a finite number in [", exact(lo), ", ", exact(hi), "] (", why,
                         ")"));
}

void OptionsReader::read_in(const char* key, std::int64_t& field, std::int64_t lo, std::int64_t hi,
                            const char* why) {
  read(key, field);
  if (field < lo || field > hi)
    throw UsageError(str(optimizer_, " option '", key, "' = ", field, " must lie in [", lo, ", ",
                         hi, "] (", why, ")"));
}

void OptionsReader::read_in(const char* key, int& field, std::int64_t lo, std::int64_t hi,
                            const char* why) {
  std::int64_t value = field;
  read_in(key, value, lo, hi, why);
  field = static_cast<int>(value);
}

void OptionsReader::finish() const {
  if (!options_.is_object()) return;
  for (const auto& item : options_.items()) {
    const bool known =
        std::any_of(known_.begin(), known_.end(), [&](const char* k) { return item.key() == k; });
    if (!known) {
      const std::set<std::string> sorted(known_.begin(), known_.end());
      std::string keys;
      for (const std::string& k : sorted) keys += (keys.empty() ? "" : ", ") + k;
      throw UsageError(str(optimizer_, ": unknown option '", item.key(), "' (known: ", keys, ")"));
    }
  }
}

}  // namespace canzona::optim::detail
