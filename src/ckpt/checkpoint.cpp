// The checkpoint directory's manifest, config and file checks (checkpoint.h).
#include "canzona/ckpt/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "canzona/ckpt/sha256.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json& key(const json& obj, const std::string& path, const char* name) {
  CANZONA_REQUIRE(obj.is_object() && obj.contains(name), path, ": missing key '", name, "'");
  return obj.at(name);
}

std::int64_t int_key(const json& obj, const std::string& path, const char* name,
                     std::int64_t min_value) {
  const json& v = key(obj, path, name);
  CANZONA_REQUIRE(v.is_number_integer() && v.get<std::int64_t>() >= min_value, path, ": key '",
                  name, "' must be an integer >= ", min_value, " (got ", v.dump(), ")");
  return v.get<std::int64_t>();
}

std::string string_key(const json& obj, const std::string& path, const char* name) {
  const json& v = key(obj, path, name);
  CANZONA_REQUIRE(v.is_string(), path, ": key '", name, "' must be a string (got ", v.dump(), ")");
  return v.get<std::string>();
}

bool is_hex(const std::string& s, std::size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// N of "step-<N>", or -1.
std::int64_t step_of(const std::string& name) {
  if (name.size() != 13 || name.rfind("step-", 0) != 0) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

}  // namespace

json to_json(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, info] : m.files)
    files[name] = {{"bytes", info.bytes}, {"sha256", info.sha256}};
  return {{"format", kFormatName},
          {"version", kFormatVersion},
          {"step", m.step},
          {"strategy", m.strategy},
          {"dp", m.dp},
          {"tp", m.tp},
          {"optimizer", m.optimizer},
          {"plan_hash", m.plan_hash},
          {"run", m.run},
          {"files", files}};
}

Manifest manifest_from_json(const json& j, const std::string& path) {
  CANZONA_REQUIRE(j.is_object(), path, ": not a JSON object");
  CANZONA_REQUIRE(string_key(j, path, "format") == kFormatName, path, ": key 'format' is not '",
                  kFormatName, "'");
  const std::int64_t version = int_key(j, path, "version", 0);
  CANZONA_REQUIRE(version == kFormatVersion, path, ": format version ", version,
                  " is not supported (this build reads version ", kFormatVersion, ")");
  Manifest m;
  m.step = int_key(j, path, "step", 0);
  m.strategy = string_key(j, path, "strategy");
  m.dp = static_cast<int>(std::min<std::int64_t>(int_key(j, path, "dp", 1), 1 << 30));
  m.tp = static_cast<int>(std::min<std::int64_t>(int_key(j, path, "tp", 1), 1 << 30));
  m.optimizer = string_key(j, path, "optimizer");
  m.plan_hash = string_key(j, path, "plan_hash");
  CANZONA_REQUIRE(is_hex(m.plan_hash, 16), path, ": key 'plan_hash' must be 16 hex digits");
  m.run = key(j, path, "run");
  CANZONA_REQUIRE(m.run.is_object(), path, ": key 'run' must be an object");
  const json& files = key(j, path, "files");
  CANZONA_REQUIRE(files.is_object(), path, ": key 'files' must be an object");
  for (const char* name : {kModelFile, kOptimizerFile, kConfigFile, kPlanFile}) {
    const std::string where = path + ": files." + name;
    const json& f = key(files, path + ": files", name);
    FileInfo info;
    info.bytes = int_key(f, where, "bytes", 0);
    info.sha256 = string_key(f, where, "sha256");
    CANZONA_REQUIRE(is_hex(info.sha256, 64), where, ": key 'sha256' must be 64 hex digits");
    m.files[name] = info;
  }
  if (files.contains(kParamsFile)) {
    const std::string where = path + ": files." + kParamsFile;
    const json& f = files.at(kParamsFile);
    CANZONA_REQUIRE(f.is_object(), where, ": must be an object");
    FileInfo info;
    info.bytes = int_key(f, where, "bytes", 0);
    info.sha256 = string_key(f, where, "sha256");
    CANZONA_REQUIRE(is_hex(info.sha256, 64), where, ": key 'sha256' must be 64 hex digits");
    m.files[kParamsFile] = info;
  }
  return m;
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kTrainerFile).string();
  return manifest_from_json(read_json_file(path), path);
}

FileInfo file_info(const std::string& path) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  CANZONA_REQUIRE(!ec, path, ": missing");
  return {static_cast<std::int64_t>(bytes), sha256_file(path)};
}

void verify_file(const std::string& dir, const std::string& name, const FileInfo& info) {
  const std::string path = (fs::path(dir) / name).string();
  std::error_code ec;
  CANZONA_REQUIRE(fs::is_regular_file(path, ec), path, ": missing");
  const auto bytes = static_cast<std::int64_t>(fs::file_size(path, ec));
  CANZONA_REQUIRE(!ec && bytes == info.bytes, path, ": ", bytes, " bytes, trainer.json says ",
                  info.bytes, " (truncated or replaced)");
  const std::string sha = sha256_file(path);
  CANZONA_REQUIRE(sha == info.sha256, path, ": checksum mismatch: trainer.json says ", info.sha256,
                  ", file has ", sha);
}

json hf_config(const model::TransformerConfig& c, std::int64_t padded_vocab) {
  const char* type = c.is_moe()   ? "qwen3_moe"
                     : c.qk_norm  ? "qwen3"
                     : c.qkv_bias ? "qwen2"
                                  : "llama";
  const char* arch = c.is_moe()   ? "Qwen3MoeForCausalLM"
                     : c.qk_norm  ? "Qwen3ForCausalLM"
                     : c.qkv_bias ? "Qwen2ForCausalLM"
                                  : "LlamaForCausalLM";
  json j = {{"architectures", {arch}},
            {"model_type", type},
            {"hidden_size", c.hidden},
            {"intermediate_size", c.ffn_hidden},
            {"num_hidden_layers", c.num_layers},
            {"num_attention_heads", c.num_heads},
            {"num_key_value_heads", c.num_query_groups},
            {"head_dim", c.head_dim},
            {"vocab_size", padded_vocab},
            {"tie_word_embeddings", c.tied_embeddings},
            {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.rms_norm_eps},
            {"max_position_embeddings", c.max_position_embeddings},
            {"hidden_act", "silu"},
            {"torch_dtype", "float32"}};
  if (c.is_moe()) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.experts_per_token;
    j["moe_intermediate_size"] = c.moe_ffn_hidden;
    j["decoder_sparse_step"] = c.sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  }
  return j;
}

std::string config_difference(const model::TransformerConfig& a,
                              const model::TransformerConfig& b) {
  if (a.hidden != b.hidden) return str("hidden_size ", a.hidden, " vs ", b.hidden);
  if (a.ffn_hidden != b.ffn_hidden)
    return str("intermediate_size ", a.ffn_hidden, " vs ", b.ffn_hidden);
  if (a.num_layers != b.num_layers)
    return str("num_hidden_layers ", a.num_layers, " vs ", b.num_layers);
  if (a.num_heads != b.num_heads)
    return str("num_attention_heads ", a.num_heads, " vs ", b.num_heads);
  if (a.num_query_groups != b.num_query_groups)
    return str("num_key_value_heads ", a.num_query_groups, " vs ", b.num_query_groups);
  if (a.head_dim != b.head_dim) return str("head_dim ", a.head_dim, " vs ", b.head_dim);
  if (a.vocab_size != b.vocab_size) return str("vocab_size ", a.vocab_size, " vs ", b.vocab_size);
  if (a.tied_embeddings != b.tied_embeddings) return "tie_word_embeddings";
  if (a.qkv_bias != b.qkv_bias) return "attention bias (model_type)";
  if (a.qk_norm != b.qk_norm) return "q/k norm (model_type)";
  if (a.rope_theta != b.rope_theta) return str("rope_theta ", a.rope_theta, " vs ", b.rope_theta);
  if (a.rms_norm_eps != b.rms_norm_eps)
    return str("rms_norm_eps ", a.rms_norm_eps, " vs ", b.rms_norm_eps);
  if (a.num_experts != b.num_experts)
    return str("num_experts ", a.num_experts, " vs ", b.num_experts);
  if (a.experts_per_token != b.experts_per_token)
    return str("num_experts_per_tok ", a.experts_per_token, " vs ", b.experts_per_token);
  if (a.moe_ffn_hidden != b.moe_ffn_hidden)
    return str("moe_intermediate_size ", a.moe_ffn_hidden, " vs ", b.moe_ffn_hidden);
  for (int i = 0; i < a.num_layers; ++i)
    if (a.moe_layer(i) != b.moe_layer(i))
      return str("layer ", i,
                 " has experts in one and not the other (decoder_sparse_step, "
                 "mlp_only_layers)");
  if (a.norm_topk_prob != b.norm_topk_prob) return "norm_topk_prob";
  if (a.router_aux_loss_coef != b.router_aux_loss_coef)
    return str("router_aux_loss_coef ", a.router_aux_loss_coef, " vs ", b.router_aux_loss_coef);
  return "";
}

std::string params_difference(const model::ModelSpec& a, const model::ModelSpec& b) {
  if (a.params.size() != b.params.size())
    return str(a.params.size(), " params vs ", b.params.size());
  auto shape = [](const std::vector<std::int64_t>& s) {
    std::string t = "[";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  };
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const model::ParamSpec &x = a.params[i], &y = b.params[i];
    const std::string where = str("param ", i, " ");
    if (x.name != y.name) return str(where, "'", x.name, "' vs '", y.name, "'");
    if (x.shape != y.shape)
      return str(where, "'", x.name, "' shape ", shape(x.shape), " vs ", shape(y.shape));
    if (x.own_shape() != y.own_shape())
      return str(where, "'", x.name, "' tensor shape ", shape(x.own_shape()), " vs ",
                 shape(y.own_shape()));
    if (x.tp_split_dim != y.tp_split_dim)
      return str(where, "'", x.name, "' tp_split_dim ", x.tp_split_dim, " vs ", y.tp_split_dim);
    if (x.optimizer != y.optimizer)
      return str(where, "'", x.name, "' optimizer ", model::optimizer_class_name(x.optimizer),
                 " vs ", model::optimizer_class_name(y.optimizer));
  }
  return "";
}

std::string step_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& save_dir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(save_dir, ec)) {
    const std::int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && fs::is_regular_file(e.path() / kTrainerFile, ec))
      out.emplace_back(step, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve(const std::string& path) {
  std::error_code ec;
  CANZONA_REQUIRE(fs::is_directory(path, ec), path, ": not a checkpoint directory (missing)");
  if (fs::exists(fs::path(path) / kTrainerFile, ec)) return path;
  const auto found = list_checkpoints(path);
  CANZONA_REQUIRE(!found.empty(), path,
                  ": no trainer.json and no complete step-<N> checkpoint in it");
  return found.back().second;
}

}  // namespace canzona::ckpt
