// Writing and validating safetensors headers, reading tensors as float. Terms as in
// safetensors.h: the length prefix N, the header (N bytes of JSON at file offset 8), the data
// section (from data_offset = 8 + N to the end of the file), a tensor's [begin, end) relative to
// the data section.
#include "canzona/ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "canzona/ckpt/file_io.h"
#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::ckpt {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
constexpr std::int64_t kLengthPrefixBytes = 8;
// Elements converted per read in read_f32 (bounds the staging buffer at 8 MiB for F64).
constexpr std::int64_t kChunkElements = std::int64_t{1} << 20;

// 'name' for an error message: control characters escaped and very long names cut, so a hostile
// name cannot break the one-line rule or flood the terminal.
std::string name_in_quotes(const std::string& name) {
  constexpr std::size_t kMaxShown = 200;
  std::string out = "'";
  for (std::size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > kMaxShown) out += "...";
  return out + "'";
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

bool parse_dtype(const std::string& text, Dtype& dtype) {
  for (Dtype d : {Dtype::kF32, Dtype::kF16, Dtype::kBF16, Dtype::kF64}) {
    if (text == to_string(d)) {
      dtype = d;
      return true;
    }
  }
  return false;
}

// A non-negative integer JSON value (nlohmann stores non-negative literals as unsigned).
bool as_size(const json& value, std::int64_t& out) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<json::number_unsigned_t>();
    if (v > static_cast<json::number_unsigned_t>(INT64_MAX)) return false;
    out = static_cast<std::int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    out = value.get<json::number_integer_t>();
    return out >= 0;
  }
  return false;
}

// One header entry, validated against the schema; `where` is "<path>: tensor '<name>'".
TensorEntry parse_entry(const std::string& where, const std::string& name, const json& value) {
  CANZONA_REQUIRE(value.is_object(), where, ": garbled header: entry is not an object");
  for (const auto& [key, unused] : value.items())
    CANZONA_REQUIRE(key == "dtype" || key == "shape" || key == "data_offsets", where,
                    ": garbled header: unexpected key ", name_in_quotes(key));
  TensorEntry entry;
  entry.name = name;
  const auto dtype = value.find("dtype");
  CANZONA_REQUIRE(dtype != value.end() && dtype->is_string(), where,
                  ": garbled header: missing or non-string dtype");
  CANZONA_REQUIRE(parse_dtype(dtype->get<std::string>(), entry.dtype), where, ": unknown dtype ",
                  name_in_quotes(dtype->get<std::string>()), " (supported: F32, F16, BF16, F64)");
  const auto shape = value.find("shape");
  CANZONA_REQUIRE(shape != value.end() && shape->is_array(), where,
                  ": garbled header: missing or non-array shape");
  for (const json& dim : *shape) {
    std::int64_t d = 0;
    CANZONA_REQUIRE(as_size(dim, d), where, ": garbled header: shape holds ", dim.dump(),
                    ", not a non-negative integer");
    entry.shape.push_back(d);
  }
  const auto offsets = value.find("data_offsets");
  CANZONA_REQUIRE(offsets != value.end() && offsets->is_array() && offsets->size() == 2, where,
                  ": garbled header: data_offsets must be an array [begin, end]");
  CANZONA_REQUIRE(as_size((*offsets)[0], entry.begin) && as_size((*offsets)[1], entry.end), where,
                  ": garbled header: data_offsets ", offsets->dump(),
                  " are not non-negative integers");
  CANZONA_REQUIRE(entry.begin <= entry.end, where, ": garbled header: data_offsets ",
                  offsets->dump(), " end before they begin");
  std::int64_t bytes = static_cast<std::int64_t>(dtype_bytes(entry.dtype));
  for (std::int64_t d : entry.shape) bytes = checked_mul(bytes, d, where + ": byte size");
  CANZONA_REQUIRE(bytes == entry.end - entry.begin, where, ": shape ", shape_string(entry.shape),
                  " of ", to_string(entry.dtype), " needs ", bytes, " bytes, data_offsets give ",
                  entry.end - entry.begin);
  return entry;
}

// Converts `count` little-endian elements of `dtype` at `raw` to float.
void convert(Dtype dtype, const std::byte* raw, std::size_t count, float* out) {
  switch (dtype) {
    case Dtype::kF32:
      std::memcpy(out, raw, count * 4);
      return;
    case Dtype::kBF16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, raw + 2 * i, 2);
        out[i] = std::bit_cast<float>(std::uint32_t{h} << 16);
      }
      return;
    case Dtype::kF16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, raw + 2 * i, 2);
        const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
        const std::uint32_t exponent = (h >> 10) & 0x1f;
        std::uint32_t mantissa = h & 0x3ffu;
        std::uint32_t bits;
        if (exponent == 0x1f) {
          bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan (payload kept)
        } else if (exponent != 0) {
          bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
        } else if (mantissa == 0) {
          bits = sign;
        } else {
          // Subnormal: mantissa * 2^-24; normalise so the leading 1 becomes the implicit bit.
          std::uint32_t e = 127 - 14;
          while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            --e;
          }
          bits = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
        }
        out[i] = std::bit_cast<float>(bits);
      }
      return;
    case Dtype::kF64:
      for (std::size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, raw + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
  }
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool is_regular_file(const std::string& path) {
  try {
    InFile probe(path);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace

const char* to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32:
      return "F32";
    case Dtype::kF16:
      return "F16";
    case Dtype::kBF16:
      return "BF16";
    case Dtype::kF64:
      return "F64";
  }
  return "?";
}

std::size_t dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32:
      return 4;
    case Dtype::kF16:
    case Dtype::kBF16:
      return 2;
    case Dtype::kF64:
      return 8;
  }
  return 0;
}

std::int64_t TensorEntry::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

const TensorEntry* Header::find(const std::string& name) const {
  for (const TensorEntry& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Layout layout_f32(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  return layout(tensors, Dtype::kF32, metadata);
}

Layout layout(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors,
              Dtype dtype, const std::map<std::string, std::string>& metadata) {
  Layout layout;
  std::set<std::string> seen;
  std::string text = "{";
  std::int64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    CANZONA_REQUIRE(!name.empty(), "safetensors: empty tensor name");
    CANZONA_REQUIRE(name != kMetadataKey, "safetensors: tensor name ", name_in_quotes(name),
                    " is reserved");
    CANZONA_REQUIRE(seen.insert(name).second, "safetensors: duplicate tensor ",
                    name_in_quotes(name));
    TensorEntry entry;
    entry.name = name;
    entry.shape = shape;
    auto bytes = static_cast<std::int64_t>(dtype_bytes(dtype));
    for (std::int64_t d : shape) {
      CANZONA_REQUIRE(d >= 0, "safetensors: tensor ", name_in_quotes(name),
                      ": negative dimension in ", shape_string(shape));
      bytes = checked_mul(bytes, d, "safetensors: tensor " + name_in_quotes(name) + " bytes");
    }
    entry.begin = offset;
    offset = checked_add(offset, bytes, "safetensors: data section bytes");
    entry.end = offset;
    if (text.size() > 1) text += ',';
    entry.dtype = dtype;
    text += json(name).dump() + ":{\"dtype\":\"" + to_string(dtype) +
            "\",\"shape\":" + json(shape).dump() + ",\"data_offsets\":[" +
            std::to_string(entry.begin) + "," + std::to_string(entry.end) + "]}";
    layout.header.tensors.push_back(std::move(entry));
  }
  if (!metadata.empty()) {
    if (text.size() > 1) text += ',';
    text += std::string("\"") + kMetadataKey + "\":" + json(metadata).dump();
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  CANZONA_REQUIRE(std::ssize(text) <= kMaxHeaderBytes, "safetensors: header of ", text.size(),
                  " bytes exceeds the limit of ", kMaxHeaderBytes);
  const std::uint64_t n = text.size();
  layout.bytes.resize(kLengthPrefixBytes);
  for (int i = 0; i < 8; ++i) layout.bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  layout.bytes += text;
  layout.header.metadata = metadata;
  layout.header.data_offset = std::ssize(layout.bytes);
  layout.header.file_bytes = layout.header.data_offset + offset;
  return layout;
}

Header read_header(const std::string& path) {
  const InFile file(path);
  const std::int64_t size = file.size();
  CANZONA_REQUIRE(size >= kLengthPrefixBytes, path, ": truncated: ", size,
                  "-byte file has no 8-byte header length");
  std::uint8_t prefix[8];
  file.pread(0, std::as_writable_bytes(std::span(prefix)));
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{prefix[i]} << (8 * i);
  CANZONA_REQUIRE(n <= static_cast<std::uint64_t>(kMaxHeaderBytes), path, ": header length ", n,
                  " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  const auto header_bytes = static_cast<std::int64_t>(n);
  CANZONA_REQUIRE(header_bytes <= size - kLengthPrefixBytes, path, ": truncated: header needs ",
                  header_bytes, " bytes, file has ", size - kLengthPrefixBytes);
  std::string text(static_cast<std::size_t>(header_bytes), '\0');
  file.pread(kLengthPrefixBytes, std::as_writable_bytes(std::span(text)));

  json parsed;
  StrictJson strict;
  try {
    strict = parse_json_text(text);
  } catch (const json::exception& e) {
    throw UsageError(str(path, ": garbled header: not JSON (", e.what(), ")"));
  }
  CANZONA_REQUIRE(strict.duplicate_key.empty(), path, ": garbled header: key ",
                  name_in_quotes(strict.duplicate_key), " appears twice in one object");
  parsed = std::move(strict.value);
  CANZONA_REQUIRE(parsed.is_object(), path, ": garbled header: not a JSON object");

  Header header;
  header.data_offset = kLengthPrefixBytes + header_bytes;
  for (const auto& [name, value] : parsed.items()) {
    if (name == kMetadataKey) {
      CANZONA_REQUIRE(value.is_object(), path, ": garbled header: __metadata__ is not an object");
      for (const auto& [key, text_value] : value.items()) {
        CANZONA_REQUIRE(text_value.is_string(), path, ": garbled header: __metadata__ key ",
                        name_in_quotes(key), " is not a string");
        header.metadata[key] = text_value.get<std::string>();
      }
      continue;
    }
    const std::string where = str(path, ": tensor ", name_in_quotes(name));
    CANZONA_REQUIRE(!name.empty(), path, ": garbled header: empty tensor name");
    header.tensors.push_back(parse_entry(where, name, value));
  }
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorEntry& t = header.tensors[i];
    if (t.begin < expected) {
      const TensorEntry& prev = header.tensors[i - 1];
      throw UsageError(str(path, ": tensor ", name_in_quotes(t.name), ": data_offsets [", t.begin,
                           ", ", t.end, ") overlap tensor ", name_in_quotes(prev.name), " [",
                           prev.begin, ", ", prev.end, ")"));
    }
    if (t.begin > expected) {
      throw UsageError(
          i == 0 ? str(path, ": tensor ", name_in_quotes(t.name), ": gap: data begins at ", t.begin,
                       ", not 0")
                 : str(path, ": tensor ", name_in_quotes(t.name), ": gap: data_offsets begin",
                       " at ", t.begin, ", previous tensor ",
                       name_in_quotes(header.tensors[i - 1].name), " ends at ", expected));
    }
    expected = t.end;
  }
  const std::int64_t data_has = size - header.data_offset;
  CANZONA_REQUIRE(expected <= data_has, path, ": truncated: data section needs ", expected,
                  " bytes, file has ", data_has);
  CANZONA_REQUIRE(expected == data_has, path, ": ", data_has - expected,
                  " stray bytes after the data section (", expected, " bytes)");
  header.file_bytes = header.data_offset + expected;
  return header;
}

void read_f32(const std::string& path, const Header& header, const TensorEntry& tensor,
              std::int64_t first, std::span<float> out) {
  const std::int64_t numel = tensor.numel();
  const std::int64_t count = static_cast<std::int64_t>(out.size());
  CANZONA_REQUIRE(first >= 0 && first <= numel && count <= numel - first, path, ": tensor ",
                  name_in_quotes(tensor.name), ": elements [", first, ", ", first + count,
                  ") requested, tensor has ", numel);
  if (count == 0) return;
  const InFile file(path);
  const auto element = static_cast<std::int64_t>(dtype_bytes(tensor.dtype));
  const std::int64_t begin = header.data_offset + tensor.begin + first * element;
  const std::int64_t end = begin + count * element;
  CANZONA_REQUIRE(end <= file.size(), path, ": tensor ", name_in_quotes(tensor.name),
                  ": truncated: needs bytes up to ", end, ", file has ", file.size());
  if (tensor.dtype == Dtype::kF32) {
    file.pread(begin, std::as_writable_bytes(out));
    return;
  }
  std::vector<std::byte> raw(static_cast<std::size_t>(std::min(count, kChunkElements) * element));
  for (std::int64_t done = 0; done < count; done += kChunkElements) {
    const std::int64_t n = std::min(kChunkElements, count - done);
    const std::span<std::byte> chunk(raw.data(), static_cast<std::size_t>(n * element));
    file.pread(begin + done * element, chunk);
    convert(tensor.dtype, chunk.data(), static_cast<std::size_t>(n), out.data() + done);
  }
}

WeightsDir::WeightsDir(const std::string& dir) : dir_(dir) {
  const std::string single = join_path(dir, "model.safetensors");
  const std::string index_path = join_path(dir, "model.safetensors.index.json");
  if (is_regular_file(single)) {
    files_.emplace_back(single, read_header(single));
    const Header& header = files_.back().second;
    for (std::size_t t = 0; t < header.tensors.size(); ++t) index_[header.tensors[t].name] = {0, t};
    return;
  }
  CANZONA_REQUIRE(is_regular_file(index_path), dir,
                  ": no model.safetensors or model.safetensors.index.json");
  const json index = read_json_file(index_path);
  CANZONA_REQUIRE(
      index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
      index_path, ": missing key 'weight_map' (an object)");
  std::map<std::string, std::size_t> file_of_name;  // shard file name -> files_ index
  std::map<std::string, std::size_t> listed;        // tensor -> files_ index the index names
  for (const auto& [name, value] : index["weight_map"].items()) {
    const std::string where = str(index_path, ": tensor ", name_in_quotes(name));
    CANZONA_REQUIRE(value.is_string(), where, ": weight_map value is not a file name");
    const std::string file = value.get<std::string>();
    CANZONA_REQUIRE(!file.empty() && file != "." && file != ".." &&
                        file.find('/') == std::string::npos && file.find('\\') == std::string::npos,
                    where, ": file name ", name_in_quotes(file), " is not a plain file name");
    auto [it, added] = file_of_name.emplace(file, files_.size());
    if (added) {
      const std::string path = join_path(dir, file);
      // A plain name can still be a symlink out of the directory: the shard must resolve inside.
      std::error_code ec;
      const std::filesystem::path inside = std::filesystem::weakly_canonical(dir, ec);
      const std::filesystem::path target = std::filesystem::weakly_canonical(path, ec);
      CANZONA_REQUIRE(!ec && target.parent_path() == inside, where, ": file ", name_in_quotes(file),
                      " resolves to ", target.string(), ", outside ", dir);
      files_.emplace_back(path, read_header(path));
    }
    listed[name] = it->second;
  }
  std::vector<std::map<std::string, std::size_t>> tensor_of_name(files_.size());
  for (std::size_t f = 0; f < files_.size(); ++f) {
    const Header& header = files_[f].second;
    for (std::size_t t = 0; t < header.tensors.size(); ++t)
      tensor_of_name[f][header.tensors[t].name] = t;
  }
  for (const auto& [name, f] : listed) {
    const auto it = tensor_of_name[f].find(name);
    CANZONA_REQUIRE(it != tensor_of_name[f].end(), index_path, ": tensor ", name_in_quotes(name),
                    " is listed for ", files_[f].first, " but missing from it");
    index_[name] = {f, it->second};
  }
  for (std::size_t f = 0; f < files_.size(); ++f) {
    for (const auto& [name, t] : tensor_of_name[f]) {
      const auto it = listed.find(name);
      CANZONA_REQUIRE(it != listed.end(), index_path, ": tensor ", name_in_quotes(name), " is in ",
                      files_[f].first, " but not in weight_map");
      CANZONA_REQUIRE(it->second == f, index_path, ": tensor ", name_in_quotes(name),
                      " is in two files: ", files_[it->second].first, " and ", files_[f].first);
    }
  }
}

bool WeightsDir::has(const std::string& name) const {
  return index_.count(name) > 0;
}

WeightsDir::Found WeightsDir::find(const std::string& name) const {
  const auto it = index_.find(name);
  CANZONA_REQUIRE(it != index_.end(), dir_, ": no tensor ", name_in_quotes(name));
  const auto& [path, header] = files_[it->second.first];
  return {&path, &header, &header.tensors[it->second.second]};
}

std::vector<std::string> WeightsDir::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, unused] : index_) out.push_back(name);
  return out;
}

}  // namespace canzona::ckpt
