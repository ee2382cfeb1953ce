// Param-list JSON (format in load.h). Reading checks types and names every problem by file,
// param index and key; structural rules (duplicates, divisibility, piece coverage) are
// validate()'s.
#include <climits>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/model/limits.h"
#include "canzona/model/load.h"
#include "json_fields.h"

namespace canzona::model {
namespace {

using detail::get_int;
using detail::json;
using detail::present;
using detail::required;

// A param's own tensor shape: 0 to kMaxTensorDims positive dims ([] is a 0-D tensor).
std::vector<std::int64_t> read_tensor_shape(const json& value, const std::string& where,
                                            const char* key) {
  CANZONA_REQUIRE(value.is_array(), where, ": key '", key,
                  "' must be an array of positive integers");
  CANZONA_REQUIRE(static_cast<int>(value.size()) <= kMaxTensorDims, where, ": key '", key, "' has ",
                  value.size(), " dimensions; at most ", kMaxTensorDims, " (kMaxTensorDims)");
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < value.size(); ++i) {
    shape.push_back(get_int(value[i], where, str(key, "[", i, "]").c_str(), 1, kMaxDim, "kMaxDim"));
  }
  return shape;
}

std::int64_t numel_of(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n = checked_mul(n, d, [&] { return str(where, ": numel"); });
  return n;
}

OptimizerClass read_optimizer(const json& value, const std::string& where) {
  const std::string s = detail::get_string(value, where, "optimizer");
  if (s == "matrix") return OptimizerClass::kMatrix;
  CANZONA_REQUIRE(s == "elementwise", where, ": key 'optimizer' must be \"matrix\" or ",
                  "\"elementwise\", got \"", s, "\"");
  return OptimizerClass::kElementwise;
}

// Running totals of what the file asks us to hold, bounded as they grow (limits.h).
struct Counts {
  std::int64_t pieces = 0;
  std::int64_t row_ranges = 0;
};

Piece read_piece(const json& value, const std::string& where, Counts& counts) {
  detail::require_object(value, where);
  detail::reject_unknown_keys(value, where, {"name", "rows"});
  Piece piece;
  piece.name = detail::get_string(required(value, where, "name"), where, "name");
  const json& rows = required(value, where, "rows");
  CANZONA_REQUIRE(rows.is_array(), where, ": key 'rows' must be an array of [begin, end] pairs");
  counts.row_ranges += static_cast<std::int64_t>(rows.size());
  CANZONA_REQUIRE(counts.row_ranges <= kMaxRowRanges, where, ": more than ", kMaxRowRanges,
                  " piece row ranges in the file (kMaxRowRanges)");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string key = str("rows[", i, "]");
    CANZONA_REQUIRE(rows[i].is_array() && rows[i].size() == 2, where, ": key '", key,
                    "' must be a [begin, end] pair");
    piece.row_ranges.emplace_back(
        get_int(rows[i][0], where, (key + "[0]").c_str(), 0, kMaxDim, "kMaxDim"),
        get_int(rows[i][1], where, (key + "[1]").c_str(), 0, kMaxDim, "kMaxDim"));
  }
  return piece;
}

ParamSpec read_param(const json& value, const std::string& where, Counts& counts) {
  detail::require_object(value, where);
  detail::reject_unknown_keys(
      value, where,
      {"name", "shape", "matrix_view", "tp_split_dim", "optimizer", "layer", "stage", "pieces"});
  ParamSpec p;
  p.name = detail::get_string(required(value, where, "name"), where, "name");
  // "shape" is the tensor's own; 1-D and 2-D ones are planned as they are, others as the declared
  // 2-D "matrix_view" or else as [numel] for AdamW (spec.h: tensor_shape).
  std::vector<std::int64_t> own =
      read_tensor_shape(required(value, where, "shape"), where, "shape");
  const bool has_view = present(value, "matrix_view");
  if (has_view) {
    p.shape = read_tensor_shape(value.at("matrix_view"), where, "matrix_view");
    CANZONA_REQUIRE(p.shape.size() == 2, where, ": key 'matrix_view' must be [rows, cols], got ",
                    p.shape.size(), " dimensions");
    CANZONA_REQUIRE(numel_of(p.shape, where) == numel_of(own, where), where, ": 'matrix_view' [",
                    p.shape[0], ", ", p.shape[1], "] has ", numel_of(p.shape, where),
                    " elements, 'shape' ", numel_of(own, where));
  } else if (own.size() == 1 || own.size() == 2) {
    p.shape = own;
  } else {
    p.shape = {numel_of(own, where)};
  }
  if (own != p.shape) p.tensor_shape = std::move(own);
  p.optimizer = present(value, "optimizer") ? read_optimizer(value.at("optimizer"), where)
                : has_view                  ? OptimizerClass::kMatrix
                                            : default_optimizer_class(p.name, p.shape);
  CANZONA_REQUIRE(!p.is_matrix() || p.shape.size() == 2, where, ": a param of ",
                  p.own_shape().size(), " dims needs 'matrix_view' [rows, cols] for the matrix ",
                  "optimizer");
  auto optional_int = [&](const char* key, std::int64_t max_value, const char* limit) {
    return present(value, key)
               ? static_cast<int>(get_int(value.at(key), where, key, -1, max_value, limit))
               : -1;
  };
  p.tp_split_dim = optional_int("tp_split_dim", INT_MAX, nullptr);
  p.layer = optional_int("layer", kMaxLayers - 1, "kMaxLayers");
  p.stage = optional_int("stage", INT_MAX, nullptr);
  if (present(value, "pieces")) {
    const json& pieces = value.at("pieces");
    CANZONA_REQUIRE(pieces.is_array(), where, ": key 'pieces' must be an array");
    counts.pieces += static_cast<std::int64_t>(pieces.size());
    CANZONA_REQUIRE(counts.pieces <= kMaxPieces, where, ": more than ", kMaxPieces,
                    " pieces in the file (kMaxPieces)");
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      p.pieces.push_back(read_piece(pieces[i], str(where, ".pieces[", i, "]"), counts));
    }
  }
  return p;
}

ArchInfo read_arch(const json& value, const std::string& where) {
  detail::require_object(value, where);
  detail::reject_unknown_keys(
      value, where,
      {"num_layers", "num_heads", "num_query_groups", "head_dim", "vocab_size", "padded_vocab_size",
       "num_experts", "experts_per_token"});
  auto field = [&](const char* key, std::int64_t max_value, const char* limit) {
    return present(value, key) ? get_int(value.at(key), where, key, 0, max_value, limit) : 0;
  };
  ArchInfo a;
  a.num_layers = static_cast<int>(field("num_layers", kMaxLayers, "kMaxLayers"));
  a.num_heads = static_cast<int>(field("num_heads", kMaxHeads, "kMaxHeads"));
  a.num_query_groups = static_cast<int>(field("num_query_groups", kMaxHeads, "kMaxHeads"));
  a.head_dim = static_cast<int>(field("head_dim", kMaxHeadDim, "kMaxHeadDim"));
  a.vocab_size = field("vocab_size", kMaxDim, "kMaxDim");
  a.padded_vocab_size = field("padded_vocab_size", kMaxDim, "kMaxDim");
  a.num_experts = static_cast<int>(field("num_experts", kMaxExperts, "kMaxExperts"));
  a.experts_per_token = static_cast<int>(field("experts_per_token", kMaxExperts, "kMaxExperts"));
  return a;
}

json piece_json(const Piece& piece) {
  json rows = json::array();
  for (const auto& [begin, end] : piece.row_ranges) rows.push_back({begin, end});
  return {{"name", piece.name}, {"rows", rows}};
}

json param_json(const ParamSpec& p) {
  json pieces = json::array();
  for (const Piece& piece : p.pieces) pieces.push_back(piece_json(piece));
  json j = {{"name", p.name},
            {"shape", p.own_shape()},
            {"tp_split_dim", p.tp_split_dim},
            {"optimizer", optimizer_class_name(p.optimizer)},
            {"layer", p.layer},
            {"stage", p.stage},
            {"pieces", pieces}};
  if (p.tensor_shape && p.shape.size() == 2) j["matrix_view"] = p.shape;
  return j;
}

}  // namespace

ModelSpec read_param_list(const std::string& path) {
  return param_list_from_json(read_json_file(path), path);
}

ModelSpec param_list_from_json(const nlohmann::json& j, const std::string& path) {
  detail::require_object(j, path);
  ModelSpec model;
  model.name = present(j, "name") ? detail::get_string(j.at("name"), path, "name") : path;
  if (present(j, "arch")) model.arch = read_arch(j.at("arch"), path + ": arch");
  const json& params = required(j, path, "params");
  CANZONA_REQUIRE(params.is_array(), path, ": key 'params' must be an array");
  CANZONA_REQUIRE(static_cast<std::int64_t>(params.size()) <= kMaxParams, path, ": ", params.size(),
                  " params exceed the limit of ", kMaxParams, " (kMaxParams)");
  model.params.reserve(params.size());
  Counts counts;
  for (std::size_t i = 0; i < params.size(); ++i) {
    model.params.push_back(read_param(params[i], str(path, ": params[", i, "]"), counts));
  }
  return model;
}

void write_param_list(const std::string& path, const ModelSpec& model) {
  write_json_file(path, param_list_json(model));
}

json param_list_json(const ModelSpec& model) {
  json params = json::array();
  for (const ParamSpec& p : model.params) params.push_back(param_json(p));
  const ArchInfo& a = model.arch;
  const json arch = {{"num_layers", a.num_layers},
                     {"num_heads", a.num_heads},
                     {"num_query_groups", a.num_query_groups},
                     {"head_dim", a.head_dim},
                     {"vocab_size", a.vocab_size},
                     {"padded_vocab_size", a.padded_vocab_size},
                     {"num_experts", a.num_experts},
                     {"experts_per_token", a.experts_per_token}};
  return {{"name", model.name}, {"arch", arch}, {"params", params}};
}

}  // namespace canzona::model
