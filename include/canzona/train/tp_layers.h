// Megatron-style tensor-parallel building blocks in libtorch, over a canzona Communicator
// (Megatron-LM megatron/core/tensor_parallel/{mappings,layers,cross_entropy}.py; docs/design.md
// section 2).
//
// Terms. A *TP group* of size T: rank t holds shard t of every TP-split weight. Column-parallel
// weights [out/T, in] are split on dim 0 (QKV, gate/up, output layer), row-parallel ones
// [out, in/T] on dim 1 (attention output projection, down projection). Activations entering a
// column-parallel layer are replicated (identical on every rank); its outputs are partitioned on
// the last dim; a row-parallel layer takes partitioned inputs and returns the replicated sum.
//
// The two TP collectives are custom autograd functions:
//   copy_to_tp      forward: identity            backward: All-Reduce (sum) of the gradient
//   reduce_from_tp  forward: All-Reduce (sum)    backward: identity
// Sums are the communicator's (ReduceMode::kDeterministic: rank order, identical bits on every
// rank). With T = 1 (or no communicator) they are identities and no collective is made.
//
// The vocabulary-parallel embedding and cross-entropy keep the vocabulary split on dim 0 of the
// embedding and output weights (rank t holds rows [t V/T, (t+1) V/T) of the padded vocabulary V)
// and are exact under TP: the cross-entropy's max, sum of exponentials and target logit are
// combined over ranks, so no rank ever materialises the full logits.
//
// Precision. Activations are fp32 or bf16 (--precision, docs/precision.md); every collective
// moves the tensor's own dtype, and a bf16 sum is taken in fp32 in rank order and rounded once
// (comm::Communicator). The cross-entropy takes fp32 logits (the model widens bf16 ones first).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "canzona/comm/communicator.h"
#include "canzona/common/dtype.h"

namespace canzona::train {

struct TpGroup {
  comm::Communicator* comm = nullptr;  // borrowed; may be null when size == 1
  int size = 1;
  int rank = 0;
};

// The canzona dtype of an fp32 or bf16 tensor (Error for another), and back.
DType dtype_of(const torch::Tensor& t);
torch::Dtype torch_dtype(DType dtype);
// The elements of a contiguous fp32 or bf16 tensor as a typed span.
TypedSpan typed_span(const torch::Tensor& t);

// In-place sum over the group of a contiguous fp32 or bf16 tensor (blocking). No-op when
// size == 1.
void all_reduce_sum(torch::Tensor& tensor, const TpGroup& tp);

torch::Tensor copy_to_tp(const torch::Tensor& x, const TpGroup& tp);
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TpGroup& tp);

// Rows of a replicated activation cut over the group, for work split by tokens (the MoE block's
// experts; Megatron's scatter / gather of its sequence-parallel region). Rank t owns rows
// [t N / T, (t + 1) N / T) of x [N, ...] (N need not divide).
//   split_rows_to_tp    forward: this rank's rows      backward: All-Gather of the rows' gradient
//   gather_rows_from_tp forward: All-Gather of rows    backward: this rank's rows of the gradient
// The gradient of a replicated activation is itself replicated (every rank holds the whole, as
// copy_to_tp's All-Reduce leaves it), so neither backward sums: the pair is an identity.
torch::Tensor split_rows_to_tp(const torch::Tensor& x, const TpGroup& tp);
torch::Tensor gather_rows_from_tp(const torch::Tensor& x, std::int64_t total_rows,
                                  const TpGroup& tp);
// The first row and the row count rank tp_rank owns of n rows.
std::pair<std::int64_t, std::int64_t> tp_rows(std::int64_t n, const TpGroup& tp);

// x [..., in] replicated; weight [out/T, in]; bias [out/T] or undefined -> [..., out/T].
torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                     const torch::Tensor& bias, const TpGroup& tp);
// x [..., in/T] partitioned; weight [out, in/T] -> [..., out] replicated.
torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                  const TpGroup& tp);
// ids [...] int64 in [0, V); weight [V/T, h] (rows from vocab_start) -> [..., h] replicated.
torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight,
                                       std::int64_t vocab_start, const TpGroup& tp);
// logits [N, V/T] (this rank's vocabulary columns from vocab_start), targets [N] int64 in
// [0, V) -> per-token loss [N] = log sum_v exp(logit_v) - logit_target, identical on every rank.
// Backward: (softmax - onehot(target)) x the incoming gradient, on this rank's columns only.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits,
                                           const torch::Tensor& targets, std::int64_t vocab_start,
                                           const TpGroup& tp);

}  // namespace canzona::train
