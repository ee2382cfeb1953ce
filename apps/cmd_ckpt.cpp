// `canzona ckpt inspect DIR`: checks and describes a checkpoint directory without loading
// libtorch or starting MPI (docs/checkpoints.md). A checkpoint holds model.safetensors,
// optimizer.safetensors, config.json, plan.json (the `canzona plan --json` document of the plan it
// was saved under) and trainer.json, whose "files" records each file's size and SHA-256. Inspect
// validates trainer.json, verifies every recorded file's size and checksum, cross-checks plan.json
// against trainer.json, validates both safetensors headers and prints what they hold. Any problem
// is a UsageError of one line naming the file (and key or tensor).
#include <sys/stat.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "canzona/ckpt/safetensors.h"
#include "canzona/ckpt/sha256.h"
#include "canzona/common/error.h"
#include "canzona/common/hex.h"
#include "canzona/common/json_io.h"
#include "command.h"

namespace canzona::apps {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "canzona-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kTensorFiles[] = {"model.safetensors", "optimizer.safetensors"};
constexpr const char* kRequiredFiles[] = {"model.safetensors", "optimizer.safetensors",
                                          "config.json", "plan.json"};

struct InspectArgs {
  std::string dir;
  std::string json_path;
  bool json_given = false;
};

struct FileCheck {
  std::string name;
  std::int64_t bytes = 0;
  std::string sha256;
};

struct TensorFile {
  std::string name;
  ckpt::Header header;
  std::int64_t data_bytes() const { return header.file_bytes - header.data_offset; }
};

// What trainer.json says, validated.
struct Trainer {
  std::int64_t step = 0;
  std::string strategy, optimizer, plan_hash;
  std::int64_t dp = 0, tp = 0;
  std::vector<FileCheck> files;
};

bool is_hex(const std::string& text, std::size_t digits) {
  if (text.size() != digits) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// trainer.json's member `key` of `object` (at `where`, "files.plan.json" style), checked by `ok`.
const json& member(const json& object, const std::string& path, const std::string& where,
                   const std::string& key, bool (*ok)(const json&), const char* expected) {
  const std::string full = where.empty() ? key : where + "." + key;
  const auto it = object.find(key);
  CANZONA_REQUIRE(it != object.end(), path, ": missing key '", full, "'");
  CANZONA_REQUIRE(ok(*it), path, ": key '", full, "' is ", it->dump(), ", expected ", expected);
  return *it;
}

bool is_count(const json& v) {
  return v.is_number_integer() && v.get<std::int64_t>() >= 0;
}
bool is_degree(const json& v) {
  return v.is_number_integer() && v.get<std::int64_t>() >= 1;
}
bool is_name(const json& v) {
  return v.is_string() && !v.get<std::string>().empty();
}
bool is_object(const json& v) {
  return v.is_object();
}
bool is_number(const json& v) {
  return v.is_number();
}

Trainer read_trainer(const std::string& dir) {
  const std::string path = dir + "/trainer.json";
  const json j = read_json_file(path);
  CANZONA_REQUIRE(j.is_object(), path, ": not a JSON object");
  const json& format = member(j, path, "", "format", is_name, "\"canzona-checkpoint\"");
  CANZONA_REQUIRE(format.get<std::string>() == kFormat, path, ": key 'format' is ", format.dump(),
                  ", expected \"", kFormat, "\"");
  const json& version = member(j, path, "", "version", is_count, "1");
  CANZONA_REQUIRE(version.get<std::int64_t>() == kVersion, path, ": key 'version' is ",
                  version.dump(), "; this build reads version ", kVersion);
  Trainer t;
  t.step = member(j, path, "", "step", is_count, "a non-negative integer").get<std::int64_t>();
  t.strategy = member(j, path, "", "strategy", is_name, "a strategy name").get<std::string>();
  t.optimizer = member(j, path, "", "optimizer", is_name, "an optimizer name").get<std::string>();
  t.dp = member(j, path, "", "dp", is_degree, "a positive integer").get<std::int64_t>();
  t.tp = member(j, path, "", "tp", is_degree, "a positive integer").get<std::int64_t>();
  t.plan_hash = member(
                    j, path, "", "plan_hash",
                    [](const json& v) { return v.is_string() && is_hex(v.get<std::string>(), 16); },
                    "16 lower-case hex digits")
                    .get<std::string>();
  const json& files = member(j, path, "", "files", is_object, "an object");
  for (const char* name : kRequiredFiles)
    member(files, path, "files", name, is_object, "an object");
  for (const auto& [name, entry] : files.items()) {
    CANZONA_REQUIRE(plain_file_name(name), path, ": key 'files' names '", name,
                    "', not a plain file name");
    CANZONA_REQUIRE(entry.is_object(), path, ": key 'files.", name, "' is not an object");
    FileCheck check;
    check.name = name;
    check.bytes = member(entry, path, "files." + name, "bytes", is_count, "a non-negative integer")
                      .get<std::int64_t>();
    check.sha256 =
        member(
            entry, path, "files." + name, "sha256",
            [](const json& v) { return v.is_string() && is_hex(v.get<std::string>(), 64); },
            "64 lower-case hex digits")
            .get<std::string>();
    t.files.push_back(std::move(check));
  }
  return t;
}

// Size first (cheap, and names a truncation as such), then the checksum.
void verify_file(const std::string& dir, const FileCheck& check) {
  const std::string path = dir + "/" + check.name;
  struct stat st {};
  CANZONA_REQUIRE(::stat(path.c_str(), &st) == 0, path, ": cannot read file");
  CANZONA_REQUIRE(S_ISREG(st.st_mode), path, ": not a regular file");
  CANZONA_REQUIRE(st.st_size == check.bytes, path, ": size mismatch: trainer.json says ",
                  check.bytes, " bytes, file has ", st.st_size);
  const std::string actual = ckpt::sha256_file(path);
  CANZONA_REQUIRE(actual == check.sha256, path, ": checksum mismatch: trainer.json says ",
                  check.sha256, ", file has ", actual);
}

// plan.json's hash (a number as `canzona plan --json` writes it, or a hex string) in 16 hex.
std::string plan_hash_hex(const json& value) {
  if (value.is_number_unsigned() || value.is_number_integer()) {
    return hex64(value.get<std::uint64_t>());
  }
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Checks plan.json against trainer.json and returns its "balance" object.
json read_plan(const std::string& dir, const Trainer& t) {
  const std::string path = dir + "/plan.json";
  const json j = read_json_file(path);
  CANZONA_REQUIRE(j.is_object(), path, ": not a JSON object");
  const json& strategy = member(j, path, "", "strategy", is_name, "a strategy name");
  CANZONA_REQUIRE(strategy.get<std::string>() == t.strategy, path, ": key 'strategy' is ",
                  strategy.dump(), ", trainer.json says \"", t.strategy, "\"");
  for (const auto& [key, value] : {std::pair{"dp", t.dp}, std::pair{"tp", t.tp}}) {
    const json& degree = member(j, path, "", key, is_degree, "a positive integer");
    CANZONA_REQUIRE(degree.get<std::int64_t>() == value, path, ": key '", key, "' is ",
                    degree.dump(), ", trainer.json says ", value);
  }
  const auto hash = j.find("plan_hash");
  CANZONA_REQUIRE(hash != j.end(), path, ": missing key 'plan_hash'");
  CANZONA_REQUIRE(plan_hash_hex(*hash) == t.plan_hash, path, ": key 'plan_hash' is ",
                  plan_hash_hex(*hash), ", trainer.json says ", t.plan_hash);
  const json& balance = member(j, path, "", "balance", is_object, "an object");
  for (const char* axis : {"dp", "tp"}) {
    const json& ratios = member(balance, path, "balance", axis, is_object, "an object");
    for (const char* what : {"flops", "memory"})
      member(ratios, path, std::string("balance.") + axis, what, is_number, "a number");
  }
  return balance;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

void run(const InspectArgs& a) {
  if (a.json_given) check_output_path(a.json_path, "--json");
  struct stat st {};
  CANZONA_REQUIRE(::stat(a.dir.c_str(), &st) == 0, a.dir, ": no such directory");
  CANZONA_REQUIRE(S_ISDIR(st.st_mode), a.dir, ": not a directory");
  const std::string dir =
      a.dir.size() > 1 && a.dir.back() == '/' ? a.dir.substr(0, a.dir.size() - 1) : a.dir;
  const Trainer t = read_trainer(dir);
  for (const FileCheck& check : t.files) verify_file(dir, check);
  const json balance = read_plan(dir, t);
  std::vector<TensorFile> tensor_files;
  for (const char* name : kTensorFiles)
    tensor_files.push_back({name, ckpt::read_header(dir + "/" + name)});

  std::printf("checkpoint %s\n", dir.c_str());
  std::printf("  step        %" PRId64 "\n", t.step);
  std::printf("  strategy    %s\n  optimizer   %s\n", t.strategy.c_str(), t.optimizer.c_str());
  std::printf("  dp x tp     %" PRId64 " x %" PRId64 "\n", t.dp, t.tp);
  std::printf("  plan hash   %s\n", t.plan_hash.c_str());
  std::printf(
      "  balance     DP FLOPs %.3f  DP memory %.3f  TP FLOPs %.3f  TP memory %.3f"
      "  (max/mean, plan.json)\n",
      balance["dp"]["flops"].get<double>(), balance["dp"]["memory"].get<double>(),
      balance["tp"]["flops"].get<double>(), balance["tp"]["memory"].get<double>());
  std::printf("\n%-28s %14s  %s\n", "file", "bytes", "sha256");
  json out_files = json::array();
  for (const FileCheck& check : t.files) {
    std::printf("%-28s %14" PRId64 "  ok %s\n", check.name.c_str(), check.bytes,
                check.sha256.c_str());
    out_files.push_back({{"name", check.name},
                         {"bytes", check.bytes},
                         {"sha256", check.sha256},
                         {"sha256_ok", true}});
  }
  std::int64_t total_tensors = 0, total_elements = 0, total_bytes = 0;
  json out_tensor_files = json::object();
  for (const TensorFile& file : tensor_files) {
    std::size_t width = 6;
    for (const auto& e : file.header.tensors) width = std::max(width, e.name.size());
    std::printf("\n%s\n  %-*s  %-5s  %-20s %14s\n", file.name.c_str(), static_cast<int>(width),
                "tensor", "dtype", "shape", "bytes");
    std::int64_t elements = 0;
    json out_tensors = json::array();
    for (const auto& e : file.header.tensors) {
      std::printf("  %-*s  %-5s  %-20s %14" PRId64 "\n", static_cast<int>(width), e.name.c_str(),
                  ckpt::to_string(e.dtype), shape_text(e.shape).c_str(), e.end - e.begin);
      elements += e.numel();
      out_tensors.push_back({{"name", e.name},
                             {"dtype", ckpt::to_string(e.dtype)},
                             {"shape", e.shape},
                             {"bytes", e.end - e.begin}});
    }
    std::printf("  total: %zu tensors, %" PRId64 " elements, %" PRId64 " bytes\n",
                file.header.tensors.size(), elements, file.data_bytes());
    out_tensor_files[file.name] = {{"tensors", out_tensors},
                                   {"tensor_count", file.header.tensors.size()},
                                   {"elements", elements},
                                   {"bytes", file.data_bytes()}};
    total_tensors += std::ssize(file.header.tensors);
    total_elements += elements;
    total_bytes += file.data_bytes();
  }
  std::printf("\ntotal: %" PRId64 " tensors, %" PRId64 " elements, %" PRId64
              " bytes of tensor data\n",
              total_tensors, total_elements, total_bytes);
  if (a.json_given) {
    json j = {{"dir", dir},
              {"step", t.step},
              {"strategy", t.strategy},
              {"optimizer", t.optimizer},
              {"dp", t.dp},
              {"tp", t.tp},
              {"plan_hash", t.plan_hash},
              {"balance", balance},
              {"files", out_files},
              {"safetensors", out_tensor_files},
              {"total",
               {{"tensors", total_tensors}, {"elements", total_elements}, {"bytes", total_bytes}}}};
    write_json_file(a.json_path, j);
  }
}

}  // namespace

void add_ckpt_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<InspectArgs>();
  auto* ckpt = app.add_subcommand("ckpt", "Work with checkpoint directories");
  ckpt->require_subcommand(1);
  auto* inspect = ckpt->add_subcommand(
      "inspect", "Verify a checkpoint's checksums and list its tensors (no libtorch, no MPI)");
  inspect->add_option("DIR", args->dir, "checkpoint directory")->required();
  auto* json = inspect->add_option("--json", args->json_path, "also write the report as JSON");
  inspect->callback([args, json, &exit_code] {
    args->json_given = json->count() > 0;
    run(*args);
    exit_code = 0;
  });
}

}  // namespace canzona::apps
