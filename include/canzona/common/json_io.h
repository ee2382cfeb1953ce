// Reading and writing the files a user hands us or asks for (model configs, param lists,
// calibration, cluster descriptions; --json/--svg/--trace outputs), with errors that name the
// file. Shared by every layer that touches the file system.
//
// Reading. Only regular files are read (a directory, device or FIFO is refused by name, so
// /dev/zero cannot make us read forever), at most kMaxInputBytes. JSON must parse strictly:
// malformed text, a number JSON cannot hold in a double (1e999) and a key repeated inside one
// object are UsageErrors naming the file (and the key).
//
// Writing. Outputs are written to a temporary file in the same directory, flushed, synced and
// renamed over the target, so a failed write (disk full, file-size limit) leaves the previous file
// untouched and no partial file behind. check_output_path() lets a command refuse an unusable
// output path before it starts work.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace canzona {

// Largest input file we read: 64 MiB (a Qwen3 param list is ~100 KiB).
inline constexpr std::int64_t kMaxInputBytes = std::int64_t{64} << 20;

// The contents of the regular file at `path`. Throws UsageError "<path>: cannot read file" when it
// does not exist or cannot be opened, "<path>: not a regular file" for directories, devices and
// FIFOs, and "<path>: N bytes exceeds the 64 MiB limit for input files".
std::string read_text_file(const std::string& path);

// Parses the file at `path` (read_text_file). Throws UsageError "<path>: malformed JSON: <parser
// message>" when it does not parse or holds a number out of range, and "<path>: duplicate key
// '<key>' in one object".
nlohmann::json read_json_file(const std::string& path);

// `text` parsed as JSON, and the first key repeated inside one object ("" when none; nlohmann
// itself silently keeps the last value). Throws nlohmann::json::exception when it is not JSON.
// read_json_file and the safetensors header reader (ckpt/safetensors.h) phrase their own errors.
struct StrictJson {
  nlohmann::json value;
  std::string duplicate_key;
};
StrictJson parse_json_text(std::string_view text);

// Throws UsageError naming `flag` when `path` cannot be an output file: empty, an existing
// directory or non-regular file, or in a directory that does not exist or is not writable.
void check_output_path(const std::string& path, std::string_view flag);

// Writes `value` (indented by 2) to `path` atomically (see above). Throws UsageError "<path>:
// cannot write file" / "<path>: write failed: <reason>" and leaves any previous file untouched.
void write_json_file(const std::string& path, const nlohmann::json& value);

// Writes `text` to `path` verbatim, atomically. Throws as write_json_file.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace canzona
