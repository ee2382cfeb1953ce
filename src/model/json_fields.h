// Typed access to JSON object keys with UsageErrors of the form "<where>: key 'X' <problem>".
// `where` names the file and, inside it, the object (e.g. "params.json: params[3]").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace canzona::model::detail {

using nlohmann::json;

// Throws unless `value` is a JSON object.
void require_object(const json& value, const std::string& where);
// Throws naming the first key of `obj` not in `allowed`.
void reject_unknown_keys(const json& obj, const std::string& where,
                         std::initializer_list<const char*> allowed);
// The value at `key`; throws when missing.
const json& required(const json& obj, const std::string& where, const char* key);
// True when `key` is present and not null.
bool present(const json& obj, const char* key);

// An integer in [min_value, max_value]. A non-integer throws "must be a positive integer" when
// min_value is 1, "must be an integer >= min_value" otherwise; with `limit` (the name of the
// constant behind max_value, e.g. "kMaxLayers") an integer above max_value throws
// "key 'X' = V must lie in [min_value, max_value] (limit)".
std::int64_t get_int(const json& value, const std::string& where, const char* key,
                     std::int64_t min_value, std::int64_t max_value = INT64_MAX,
                     const char* limit = nullptr);
bool get_bool(const json& value, const std::string& where, const char* key);
std::string get_string(const json& value, const std::string& where, const char* key);

}  // namespace canzona::model::detail
