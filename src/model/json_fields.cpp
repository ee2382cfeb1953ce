#include "json_fields.h"

#include <string>

#include "canzona/common/error.h"

namespace canzona::model::detail {

void require_object(const json& value, const std::string& where) {
  CANZONA_REQUIRE(value.is_object(), where, ": expected a JSON object");
}

void reject_unknown_keys(const json& obj, const std::string& where,
                         std::initializer_list<const char*> allowed) {
  for (const auto& item : obj.items()) {
    bool known = false;
    for (const char* key : allowed) known = known || item.key() == key;
    CANZONA_REQUIRE(known, where, ": unknown key '", item.key(), "'");
  }
}

const json& required(const json& obj, const std::string& where, const char* key) {
  const auto it = obj.find(key);
  CANZONA_REQUIRE(it != obj.end(), where, ": key '", key, "' missing");
  return *it;
}

bool present(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

std::int64_t get_int(const json& value, const std::string& where, const char* key,
                     std::int64_t min_value, std::int64_t max_value, const char* limit) {
  bool ok = false;
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(max_value) && static_cast<std::int64_t>(u) >= min_value;
  } else if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    ok = v >= min_value && v <= max_value;
  }
  if (ok) return value.get<std::int64_t>();
  const bool too_large = value.is_number_unsigned()
                             ? value.get<std::uint64_t>() > static_cast<std::uint64_t>(max_value)
                             : value.is_number_integer() && value.get<std::int64_t>() > max_value;
  if (limit != nullptr && too_large) {
    const std::string shown = value.is_number_unsigned()
                                  ? std::to_string(value.get<std::uint64_t>())
                                  : std::to_string(value.get<std::int64_t>());
    throw UsageError(str(where, ": key '", key, "' = ", shown, " must lie in [", min_value, ", ",
                         max_value, "] (", limit, ")"));
  }
  const std::string bound = max_value == INT64_MAX ? "" : str(" <= ", max_value);
  const std::string why = limit != nullptr ? str(" (", limit, ")") : "";
  if (min_value == 1)
    throw UsageError(str(where, ": key '", key, "' must be a positive integer", bound, why));
  throw UsageError(str(where, ": key '", key, "' must be an integer >= ", min_value,
                       bound.empty() ? "" : " and" + bound, why));
}

bool get_bool(const json& value, const std::string& where, const char* key) {
  CANZONA_REQUIRE(value.is_boolean(), where, ": key '", key, "' must be true or false");
  return value.get<bool>();
}

std::string get_string(const json& value, const std::string& where, const char* key) {
  CANZONA_REQUIRE(value.is_string(), where, ": key '", key, "' must be a string");
  return value.get<std::string>();
}

}  // namespace canzona::model::detail
