// The model as the planner sees it: an ordered list of parameters with global shapes, how tensor
// parallelism splits each one, and which optimizer class updates it.
//
// Terms. A *param* is one registered weight (Megatron name and registration order). Its *global
// shape* is the un-split shape; TP rank t holds the t-th of TP equal slices along tp_split_dim
// (its *local shape*). A *piece* is a row subset of a 2-D param that the matrix optimizer treats
// as its own matrix (fused QKV -> q/k/v or per head, fc1 -> gate/up); a param without pieces is
// one matrix. Every piece of a matrix param is one optimizer *task*.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace canzona::model {

// Matrix params get the matrix optimizer (Muon, Shampoo, SOAP); element-wise params get AdamW.
enum class OptimizerClass { kMatrix, kElementwise };

// A row subset of a 2-D param, as half-open row ranges of the *global* matrix, in order.
// Its rows, concatenated, form the matrix the optimizer sees (shape rows() x param cols).
struct Piece {
  std::string name;  // suffix: "q", "k", "v", "gate", "up", per head "q7", "k1", "v1"
  std::vector<std::pair<std::int64_t, std::int64_t>> row_ranges;  // [begin, end) global rows

  std::int64_t rows() const;  // sum of the range lengths; throws UsageError on int64 overflow
};

struct ParamSpec {
  std::string name;                 // Megatron name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<std::int64_t> shape;  // global shape (1-D or 2-D), row-major: what is planned
  int tp_split_dim = -1;            // -1: replicated across TP; 0: column-parallel; 1: row-parallel
  OptimizerClass optimizer = OptimizerClass::kElementwise;
  int layer = -1;             // transformer layer index; -1 for model-level params
  int stage = -1;             // explicit pipeline stage; -1: derived from layer (assign_stages)
  std::vector<Piece> pieces;  // empty: the whole matrix is one task
  // The tensor's own shape when it differs from `shape` (a 0-D, 3-D or 4-D tensor such as a
  // position table, a class token or a conv filter, planned as a row-major 1-D or 2-D view of the
  // same elements: [numel] for AdamW, a declared rows x cols "matrix_view" for the matrix
  // optimizer); empty when the tensor is `shape`. Checkpoints write the param in this shape.
  // Such a param is never TP-split.
  std::optional<std::vector<std::int64_t>> tensor_shape = std::nullopt;

  // Product of the shape; throws UsageError naming the param when it overflows int64.
  std::int64_t numel() const;
  std::int64_t rows() const;  // shape[0]
  std::int64_t cols() const;  // shape[1] for 2-D, 1 for 1-D
  bool is_matrix() const { return optimizer == OptimizerClass::kMatrix; }
  // Number of elements TP rank t holds (numel / tp for split params, numel when replicated).
  // Throws as numel().
  std::int64_t local_numel(int tp) const;
  // Shape of one TP shard.
  std::vector<std::int64_t> local_shape(int tp) const;
  // The tensor's own shape: tensor_shape when set, else shape.
  const std::vector<std::int64_t>& own_shape() const {
    return tensor_shape ? *tensor_shape : shape;
  }
};

// Architecture facts that TP validation needs. Zero means unknown (a plain param list).
struct ArchInfo {
  int num_layers = 0;
  int num_heads = 0;
  int num_query_groups = 0;
  int head_dim = 0;
  std::int64_t vocab_size = 0;         // before padding
  std::int64_t padded_vocab_size = 0;  // Megatron: ceil(V / (128 TP)) * 128 TP
  int num_experts = 0;                 // experts per MoE layer; 0: dense
  int experts_per_token = 0;           // top-k: the experts of a layer one token reaches
  // The output layer is the word embedding (HF tie_word_embeddings): the model has no
  // output_layer.weight, and at PP > 1 the last stage keeps a copy of the embedding (plan.h).
  bool tied_embeddings = false;
};

struct ModelSpec {
  std::string name;
  ArchInfo arch;
  std::vector<ParamSpec> params;  // Megatron registration order

  std::int64_t total_numel() const;  // sum of numel(); throws UsageError on int64 overflow
  // Elements one token uses: total_numel() with each expert param (is_expert_param) counted
  // arch.experts_per_token / arch.num_experts of its size (rounded down); total_numel() for a
  // dense model.
  std::int64_t active_numel() const;
};

// The Megatron / official Canzona rule: 2-D weights get the matrix optimizer except embeddings
// (names containing "embedding"), the output layer ("output_layer") and MoE routers ("router").
OptimizerClass default_optimizer_class(const std::string& name,
                                       const std::vector<std::int64_t>& shape);

// Whether a param is one expert's weight: a name containing ".mlp.experts." (Megatron's and Hugging
// Face's MoE layouts) or with an expert index (below, any module path: a user's own MoE block
// under canzona.torch); a token uses it with probability experts_per_token / num_experts. Only a
// model with arch.num_experts > 0 has experts (has_experts).
bool is_expert_param(const ParamSpec& param);

// The expert an expert param belongs to: the number in the name component after a component
// "experts" (Megatron's "experts.local_experts.<e>." included); -1 when the name has none.
int expert_index(const ParamSpec& param);
// Whether the model is a mixture of experts: arch.num_experts > 0 and some expert param.
bool has_experts(const ModelSpec& model);

// Megatron keeps a MoE model in two buffers: the dense params over the DP x TP grid and the expert
// params of one EP rank over the expert grid, expert DP x expert TP (ETP), where
// expert DP = DP x TP / (EP x ETP). The expert part EP rank `ep_rank` of `ep` holds: the params of
// experts [ep_rank E/ep, (ep_rank + 1) E/ep) of every MoE layer, in model order, under their model
// names, split over ETP as Megatron's expert TP splits them (linear_fc1 column-parallel, its shard
// t holding [gate_t; up_t] and its gate and up pieces following the shards; linear_fc2
// row-parallel). Its arch keeps the layers (pipeline stages) and the expert counts only. `source`
// maps each of its params to its index in `model`. Throws UsageError naming the flag: a model
// without experts; ep or etp below 1; ep not dividing num_experts; an expert param without an
// expert index in [0, num_experts) or already split over TP; etp > 1 with an expert param other
// than a 2-D linear_fc1 / linear_fc2 weight or an FFN width etp does not divide.
struct ExpertPart {
  ModelSpec model;
  std::vector<int> source;
};
ExpertPart expert_part(const ModelSpec& model, int ep, int etp, int ep_rank);
// The model as ep x etp runs it: every expert param replaced by its expert_part form (split over
// etp, pieces following the shards), the rest unchanged. The single-process reference's model.
ModelSpec executed_model(const ModelSpec& model, int ep, int etp);

// "matrix" / "elementwise", the spelling used in param-list JSON.
const char* optimizer_class_name(OptimizerClass optimizer);

// Checks a model against a TP degree: positive 1-D or 2-D shapes (a tensor_shape of at most
// kMaxTensorDims positive dims, the same numel, on a param not split over TP), no empty model,
// unique names, split dims in range and divisible by tp, matrix params 2-D, pieces only on matrix
// params, each inside its param, together covering every row exactly once, heads and query groups
// divisible by tp where known. Bounds (limits.h): at most kMaxParams params, kMaxPieces pieces and
// kMaxRowRanges row ranges; dims in [1, kMaxDim], numel per param <= kMaxParamNumel, total
// <= kMaxModelNumel, layer < kMaxLayers, arch counts within kMaxLayers / kMaxHeads / kMaxHeadDim,
// vocab sizes <= kMaxDim. Throws UsageError naming the param, the rule and the limit.
void validate(const ModelSpec& model, int tp);

}  // namespace canzona::model
