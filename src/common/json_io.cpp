#include "canzona/common/json_io.h"

#include <fstream>
#include <sstream>

#include "canzona/common/error.h"

namespace canzona {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  CANZONA_REQUIRE(in.good(), path, ": cannot read file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(str(path, ": malformed JSON: ", e.what()));
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  CANZONA_REQUIRE(out.good(), path, ": cannot write file");
  out << text;
  out.flush();
  CANZONA_REQUIRE(out.good(), path, ": write failed");
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  write_text_file(path, value.dump(2) + "\n");
}

}  // namespace canzona
