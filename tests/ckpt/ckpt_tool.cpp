// The C++ side of the shell tests in this folder. Usage:
//   ckpt_tool sha256 FILE            prints sha256_file(FILE)
//   ckpt_tool bench-sha256 MIB       prints SHA-256 throughput over MIB MiB in memory
//   ckpt_tool write-pattern FILE     writes kPatternTensors with layout_f32 + OutFile, values
//                                    float32(sin(0.37 i + k)) for tensor k, element i
//   ckpt_tool check-python DIR       reads what `safetensors_ref.py write DIR` wrote and compares
//                                    every tensor bit for bit with the F32 values numpy expected
// Exits 0 on success, 1 with one line on stderr otherwise.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/ckpt/file_io.h"
#include "canzona/ckpt/safetensors.h"
#include "canzona/ckpt/sha256.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::ckpt {
namespace {

// Same list in safetensors_ref.py (PATTERN_TENSORS).
const std::vector<std::pair<std::string, std::vector<std::int64_t>>> kPatternTensors = {
    {"model.layers.0.self_attn.q_proj.weight", {16, 8}},
    {"model.norm.weight", {8}},
    {"scalar", {}},
    {"empty", {0, 5}},
    {"model.embed_tokens.weight", {33, 7}},
    {"lm_head.weight", {5, 3, 2}}};

void write_pattern(const std::string& path) {
  const Layout layout = layout_f32(kPatternTensors, {{"writer", "canzona"}, {"step", "42"}});
  OutFile out(path, true);
  out.allocate(layout.header.file_bytes);
  out.pwrite(0, std::as_bytes(std::span(layout.bytes)));
  for (std::size_t k = 0; k < layout.header.tensors.size(); ++k) {
    const TensorEntry& e = layout.header.tensors[k];
    std::vector<float> values(static_cast<std::size_t>(e.numel()));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] =
          static_cast<float>(std::sin(0.37 * static_cast<double>(i) + static_cast<double>(k)));
    out.pwrite(layout.header.data_offset + e.begin, std::as_bytes(std::span(values)));
  }
  out.sync();
  out.close();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CANZONA_REQUIRE(in, path, ": cannot read file");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Compares one tensor against the manifest entry and DIR/expected/<name>.f32.
void check_tensor(const std::string& dir, const std::string& path, const Header& header,
                  const TensorEntry& tensor, const nlohmann::json& want) {
  CANZONA_REQUIRE(to_string(tensor.dtype) == want.at("dtype").get<std::string>(), path, ": tensor ",
                  tensor.name, ": dtype ", to_string(tensor.dtype));
  CANZONA_REQUIRE(tensor.shape == want.at("shape").get<std::vector<std::int64_t>>(), path,
                  ": tensor ", tensor.name, ": shape differs");
  const std::string expected = read_all(dir + "/expected/" + tensor.name + ".f32");
  std::vector<float> got(static_cast<std::size_t>(tensor.numel()));
  CANZONA_REQUIRE(expected.size() == got.size() * 4, path, ": tensor ", tensor.name,
                  ": expected file has ", expected.size(), " bytes");
  read_f32(path, header, tensor, 0, got);
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, expected.data() + 4 * i, 4);
    CANZONA_REQUIRE(a == b, path, ": tensor ", tensor.name, ": element ", i, " is bits 0x",
                    std::hex, a, ", numpy expects 0x", b);
  }
}

void check_python(const std::string& dir) {
  const nlohmann::json manifest = read_json_file(dir + "/manifest.json");
  const std::string mixed = dir + "/mixed.safetensors";
  const Header header = read_header(mixed);
  const auto& want_mixed = manifest.at("mixed");
  CANZONA_REQUIRE(header.tensors.size() == want_mixed.size(), mixed, ": tensor count ",
                  header.tensors.size());
  for (const TensorEntry& t : header.tensors)
    check_tensor(dir, mixed, header, t, want_mixed.at(t.name));
  using Metadata = std::map<std::string, std::string>;
  const auto metadata = manifest.at("metadata").get<Metadata>();
  CANZONA_REQUIRE(header.metadata == metadata, mixed, ": metadata differs");
  const WeightsDir weights(dir + "/sharded");
  const auto& want_sharded = manifest.at("sharded");
  CANZONA_REQUIRE(weights.names().size() == want_sharded.size(), dir, "/sharded: tensor count ",
                  weights.names().size());
  for (const std::string& name : weights.names()) {
    const auto found = weights.find(name);
    check_tensor(dir, *found.path, *found.header, *found.tensor, want_sharded.at(name));
  }
  std::printf("checked %zu + %zu tensors\n", header.tensors.size(), weights.names().size());
}

void bench_sha256(int mib) {
  std::string data(static_cast<std::size_t>(mib) << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  const auto start = std::chrono::steady_clock::now();
  const std::string hex = sha256_hex(data);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sha256 %d MiB in %.3f s: %.0f MB/s (%s)\n", mib, seconds,
              static_cast<double>(data.size()) / seconds / 1e6, hex.c_str());
}

}  // namespace
}  // namespace canzona::ckpt

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    CANZONA_REQUIRE(argc == 3,
                    "usage: ckpt_tool sha256|bench-sha256|write-pattern|check-python ARG");
    if (command == "sha256") {
      std::printf("%s\n", canzona::ckpt::sha256_file(argv[2]).c_str());
    } else if (command == "bench-sha256") {
      canzona::ckpt::bench_sha256(std::stoi(argv[2]));
    } else if (command == "write-pattern") {
      canzona::ckpt::write_pattern(argv[2]);
    } else if (command == "check-python") {
      canzona::ckpt::check_python(argv[2]);
    } else {
      throw canzona::UsageError("unknown command " + command);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
