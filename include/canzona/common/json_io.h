// Reading and writing JSON files with errors that name the file. Shared by every layer that takes
// a file from the user (model configs, param lists, calibration, cluster descriptions).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace canzona {

// Parses the file at `path`. Throws UsageError "<path>: cannot read file" when it cannot be opened
// and "<path>: malformed JSON: <parser message>" when it does not parse.
nlohmann::json read_json_file(const std::string& path);

// Writes `value` (indented by 2) to `path`. Throws UsageError when the file cannot be written.
void write_json_file(const std::string& path, const nlohmann::json& value);

// Writes `text` to `path` verbatim. Throws UsageError when the file cannot be written.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace canzona
