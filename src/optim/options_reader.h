// Reads an optimizer's options struct from a JSON object, strictly (internal): every key must be
// a known field of the right type, so a typo is a UsageError naming the optimizer and the key,
// never a silently ignored setting.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace canzona::optim::detail {

class OptionsReader {
 public:
  // Throws UsageError unless `options` is an object (or null, read as empty).
  OptionsReader(const char* optimizer, const nlohmann::json& options);

  // Each overwrites `field` when `key` is present; throws UsageError on a wrong type.
  void read(const char* key, double& field);
  void read(const char* key, int& field);
  void read(const char* key, std::int64_t& field);
  void read(const char* key, bool& field);
  void read(const char* key, std::string& field);
  // Reads a string and converts it with `parse` (which throws UsageError on a bad value).
  template <typename Enum>
  void read_enum(const char* key, Enum& field, Enum (*parse)(const std::string&)) {
    std::string value;
    if (has(key)) {
      read(key, value);
      field = parse(value);
    }
  }

  // Throws UsageError naming the first key no read() asked for.
  void finish() const;

 private:
  bool has(const char* key);
  const nlohmann::json& at(const char* key);
  [[noreturn]] void wrong_type(const char* key, const char* expected) const;

  std::string optimizer_;
  const nlohmann::json& options_;
  std::set<std::string> known_;
};

}  // namespace canzona::optim::detail
