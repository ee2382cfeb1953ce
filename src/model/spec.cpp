#include "canzona/model/spec.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/model/limits.h"

namespace canzona::model {
namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void validate_shape(const ParamSpec& p, int tp) {
  const int ndim = static_cast<int>(p.shape.size());
  CANZONA_REQUIRE(ndim == 1 || ndim == 2, "param '", p.name, "' has shape ", shape_string(p.shape),
                  "; only 1-D and 2-D params are supported");
  for (std::int64_t d : p.shape) {
    CANZONA_REQUIRE(d != 0, "param '", p.name, "' has a zero-size dimension (shape ",
                    shape_string(p.shape), ")");
    CANZONA_REQUIRE(d > 0, "param '", p.name, "' has a negative dimension (shape ",
                    shape_string(p.shape), ")");
    CANZONA_REQUIRE(d <= kMaxDim, "param '", p.name, "': dimension ", d, " (shape ",
                    shape_string(p.shape), ") must lie in [1, ", kMaxDim, "] (kMaxDim)");
  }
  require_in_range(
      p.numel(), 1, kMaxParamNumel, [&] { return str("param '", p.name, "': numel"); },
      "kMaxParamNumel");
  CANZONA_REQUIRE(p.tp_split_dim >= -1 && p.tp_split_dim < ndim, "param '", p.name,
                  "': tp_split_dim ", p.tp_split_dim, " out of range for a ", ndim,
                  "-D shape (use -1 for replicated)");
  if (p.tp_split_dim >= 0) {
    const std::int64_t size = p.shape[p.tp_split_dim];
    CANZONA_REQUIRE(size % tp == 0, "param '", p.name, "': dim ", p.tp_split_dim, " (size ", size,
                    ") not divisible by tp=", tp);
  }
  CANZONA_REQUIRE(!p.is_matrix() || ndim == 2, "param '", p.name,
                  "': the matrix optimizer needs a 2-D shape, got ", shape_string(p.shape));
  if (p.tensor_shape) {
    const std::vector<std::int64_t>& own = *p.tensor_shape;
    CANZONA_REQUIRE(static_cast<int>(own.size()) <= kMaxTensorDims, "param '", p.name,
                    "': tensor shape ", shape_string(own), " has more than ", kMaxTensorDims,
                    " dims (kMaxTensorDims)");
    std::int64_t n = 1;
    for (std::int64_t d : own) {
      CANZONA_REQUIRE(d >= 1 && d <= kMaxDim, "param '", p.name, "': tensor shape ",
                      shape_string(own), " needs every dimension in [1, ", kMaxDim, "]");
      n = checked_mul(n, d, [&] { return str("param '", p.name, "': tensor numel"); });
    }
    CANZONA_REQUIRE(n == p.numel(), "param '", p.name, "': its matrix view ", shape_string(p.shape),
                    " has ", p.numel(), " elements, its tensor shape ", shape_string(own), " ", n);
    CANZONA_REQUIRE(p.tp_split_dim == -1, "param '", p.name, "' of tensor shape ",
                    shape_string(own), " cannot be split over TP (only 1-D and 2-D params are)");
  }
  CANZONA_REQUIRE(p.layer >= -1, "param '", p.name, "': layer ", p.layer, " is negative");
  require_in_range(
      p.layer, -1, kMaxLayers - 1, [&] { return str("param '", p.name, "': layer"); },
      "kMaxLayers");
  CANZONA_REQUIRE(p.stage >= -1, "param '", p.name, "': stage ", p.stage, " is negative");
}

void validate_pieces(const ParamSpec& p) {
  if (p.pieces.empty()) return;
  CANZONA_REQUIRE(p.is_matrix(), "param '", p.name,
                  "': pieces are only allowed on matrix-optimizer params");
  std::set<std::string> names;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (const Piece& piece : p.pieces) {
    CANZONA_REQUIRE(!piece.name.empty(), "param '", p.name, "': a piece has an empty name");
    CANZONA_REQUIRE(names.insert(piece.name).second, "param '", p.name, "': duplicate piece '",
                    piece.name, "'");
    CANZONA_REQUIRE(!piece.row_ranges.empty(), "param '", p.name, "': piece '", piece.name,
                    "' has no rows");
    for (const auto& [begin, end] : piece.row_ranges) {
      CANZONA_REQUIRE(0 <= begin && begin < end && end <= p.rows(), "param '", p.name, "': piece '",
                      piece.name, "' rows [", begin, ", ", end, ") out of range for ", p.rows(),
                      " rows");
      ranges.emplace_back(begin, end);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  std::int64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    CANZONA_REQUIRE(begin >= covered, "param '", p.name, "': pieces overlap at row ", begin);
    CANZONA_REQUIRE(begin == covered, "param '", p.name, "': pieces leave rows [", covered, ", ",
                    begin, ") uncovered");
    covered = end;
  }
  CANZONA_REQUIRE(covered == p.rows(), "param '", p.name, "': pieces leave rows [", covered, ", ",
                  p.rows(), ") uncovered");
}

void validate_arch(const ModelSpec& model, int tp) {
  const ArchInfo& a = model.arch;
  const std::string m = str("model '", model.name, "': arch ");
  require_in_range(a.num_layers, 0, kMaxLayers, m + "num_layers", "kMaxLayers");
  require_in_range(a.num_heads, 0, kMaxHeads, m + "num_heads", "kMaxHeads");
  require_in_range(a.num_query_groups, 0, kMaxHeads, m + "num_query_groups", "kMaxHeads");
  require_in_range(a.head_dim, 0, kMaxHeadDim, m + "head_dim", "kMaxHeadDim");
  require_in_range(a.vocab_size, 0, kMaxDim, m + "vocab_size", "kMaxDim");
  require_in_range(a.padded_vocab_size, 0, kMaxDim, m + "padded_vocab_size", "kMaxDim");
  require_in_range(a.num_experts, 0, kMaxExperts, m + "num_experts", "kMaxExperts");
  require_in_range(a.experts_per_token, a.num_experts > 0 ? 1 : 0, a.num_experts,
                   m + "experts_per_token", "num_experts");
  CANZONA_REQUIRE(a.num_heads % tp == 0, "model '", model.name, "': ", a.num_heads,
                  " attention heads not divisible by tp=", tp, " (Megatron splits heads over TP)");
  CANZONA_REQUIRE(a.num_query_groups % tp == 0, "model '", model.name, "': ", a.num_query_groups,
                  " query groups (KV heads) not divisible by tp=", tp,
                  " (Megatron splits query groups over TP)");
}

}  // namespace

std::int64_t Piece::rows() const {
  std::int64_t n = 0;
  for (const auto& [begin, end] : row_ranges) {
    std::int64_t length = 0;
    if (__builtin_sub_overflow(end, begin, &length))
      throw UsageError(str("piece '", name, "': rows [", begin, ", ", end, ") overflow int64"));
    n = checked_add(n, length, [&] { return str("piece '", name, "': rows"); });
  }
  return n;
}

// The message is formed only on overflow: numel() runs for every param in every plan candidate.
std::int64_t ParamSpec::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    n = checked_mul(n, d, [&] { return str("param '", name, "': numel"); });
  return n;
}

std::int64_t ParamSpec::rows() const {
  return shape.empty() ? 1 : shape[0];
}

std::int64_t ParamSpec::cols() const {
  return shape.size() >= 2 ? shape[1] : 1;
}

std::int64_t ParamSpec::local_numel(int tp) const {
  CANZONA_CHECK(tp > 0, "tp=", tp);
  return tp_split_dim >= 0 ? numel() / tp : numel();
}

std::vector<std::int64_t> ParamSpec::local_shape(int tp) const {
  CANZONA_CHECK(tp > 0, "tp=", tp);
  std::vector<std::int64_t> local = shape;
  if (tp_split_dim >= 0) {
    CANZONA_CHECK(tp_split_dim < static_cast<int>(local.size()), name);
    CANZONA_CHECK(local[tp_split_dim] % tp == 0, name, " tp=", tp);
    local[tp_split_dim] /= tp;
  }
  return local;
}

std::int64_t ModelSpec::total_numel() const {
  std::int64_t n = 0;
  for (const ParamSpec& p : params)
    n = checked_add(n, p.numel(), [&] { return str("model '", name, "': numel"); });
  return n;
}

OptimizerClass default_optimizer_class(const std::string& name,
                                       const std::vector<std::int64_t>& shape) {
  const bool excluded = name.find("embedding") != std::string::npos ||
                        name.find("output_layer") != std::string::npos ||
                        name.find("router") != std::string::npos;
  return shape.size() == 2 && !excluded ? OptimizerClass::kMatrix : OptimizerClass::kElementwise;
}

std::int64_t ModelSpec::active_numel() const {
  if (arch.num_experts <= 0) return total_numel();
  std::int64_t experts = 0;
  for (const ParamSpec& p : params)
    if (is_expert_param(p)) experts += p.numel();
  return total_numel() - experts + experts / arch.num_experts * arch.experts_per_token;
}

bool is_expert_param(const ParamSpec& param) {
  return param.name.find(".mlp.experts.") != std::string::npos || expert_index(param) >= 0;
}

const char* optimizer_class_name(OptimizerClass optimizer) {
  return optimizer == OptimizerClass::kMatrix ? "matrix" : "elementwise";
}

void validate(const ModelSpec& model, int tp) {
  CANZONA_REQUIRE(tp > 0, "tp must be positive, got tp=", tp);
  CANZONA_REQUIRE(!model.params.empty(), "model '", model.name, "' has no params");
  const std::string m = str("model '", model.name, "': ");
  require_in_range(static_cast<std::int64_t>(model.params.size()), 1, kMaxParams, m + "params",
                   "kMaxParams");
  std::int64_t pieces = 0, row_ranges = 0;
  for (const ParamSpec& p : model.params) {
    pieces += static_cast<std::int64_t>(p.pieces.size());
    for (const Piece& piece : p.pieces)
      row_ranges += static_cast<std::int64_t>(piece.row_ranges.size());
  }
  require_in_range(pieces, 0, kMaxPieces, m + "pieces", "kMaxPieces");
  require_in_range(row_ranges, 0, kMaxRowRanges, m + "piece row ranges", "kMaxRowRanges");
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const ParamSpec& p = model.params[i];
    CANZONA_REQUIRE(!p.name.empty(), "model '", model.name, "': param ", i, " has an empty name");
    const auto [it, inserted] = seen.emplace(p.name, i);
    CANZONA_REQUIRE(inserted, "duplicate param name '", p.name, "' (params ", it->second, " and ",
                    i, ")");
    validate_shape(p, tp);
    validate_pieces(p);
  }
  require_in_range(model.total_numel(), 1, kMaxModelNumel, m + "numel", "kMaxModelNumel");
  validate_arch(model, tp);
}

}  // namespace canzona::model
