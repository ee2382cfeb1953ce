// Tensor-parallel layers and collectives (tp_layers.h).
#include "canzona/train/tp_layers.h"

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A TpGroup travels through autograd's saved_data as three integers.
void save_group(AutogradContext* ctx, const TpGroup& tp) {
  ctx->saved_data["comm"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(tp.comm));
  ctx->saved_data["size"] = static_cast<std::int64_t>(tp.size);
  ctx->saved_data["rank"] = static_cast<std::int64_t>(tp.rank);
}

TpGroup load_group(AutogradContext* ctx) {
  TpGroup tp;
  tp.comm = reinterpret_cast<comm::Communicator*>(
      static_cast<std::intptr_t>(ctx->saved_data["comm"].toInt()));
  tp.size = static_cast<int>(ctx->saved_data["size"].toInt());
  tp.rank = static_cast<int>(ctx->saved_data["rank"].toInt());
  return tp;
}

std::span<float> float_span(torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, TpGroup tp) {
    save_group(ctx, tp);
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    torch::Tensor g = grads[0].contiguous().clone();
    all_reduce_sum(g, load_group(ctx));
    return {g, torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, TpGroup tp) {
    torch::Tensor y = x.contiguous().clone();
    all_reduce_sum(y, tp);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

// All-Gather of every rank's rows (tp_rows of `total`) of a [rows, ...] tensor.
torch::Tensor all_gather_rows(const torch::Tensor& mine, std::int64_t total, const TpGroup& tp) {
  const torch::Tensor send = mine.contiguous();
  std::vector<std::int64_t> shape = send.sizes().vec();
  const std::int64_t width = send.numel() / std::max<std::int64_t>(send.size(0), 1);
  shape[0] = total;
  torch::Tensor out = torch::empty(shape, send.options());
  std::vector<std::int64_t> counts, displs;
  for (int r = 0; r < tp.size; ++r) {
    const auto [begin, rows] = tp_rows(total, TpGroup{tp.comm, tp.size, r});
    counts.push_back(rows * width);
    displs.push_back(begin * width);
  }
  tp.comm->all_gather(typed_span(send), typed_span(out), counts, displs).wait();
  return out;
}

struct SplitRowsToTp : torch::autograd::Function<SplitRowsToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, TpGroup tp) {
    save_group(ctx, tp);
    ctx->saved_data["total"] = x.size(0);
    const auto [begin, rows] = tp_rows(x.size(0), tp);
    return x.slice(0, begin, begin + rows).clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gather_rows(grads[0], ctx->saved_data["total"].toInt(), load_group(ctx)),
            torch::Tensor()};
  }
};

struct GatherRowsFromTp : torch::autograd::Function<GatherRowsFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t total,
                               TpGroup tp) {
    save_group(ctx, tp);
    return all_gather_rows(x, total, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [begin, rows] = tp_rows(grads[0].size(0), load_group(ctx));
    return {grads[0].slice(0, begin, begin + rows).contiguous(), torch::Tensor(), torch::Tensor()};
  }
};

// Megatron's _VocabParallelCrossEntropy (cross_entropy.py), over a canzona TpGroup.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_in,
                               const torch::Tensor& targets, std::int64_t vocab_start, TpGroup tp) {
    const torch::Tensor logits = logits_in.contiguous();
    const std::int64_t n = logits.size(0);
    const std::int64_t local_vocab = logits.size(1);
    // The row maximum over the whole vocabulary: every rank's local maxima, gathered.
    torch::Tensor max = std::get<0>(logits.max(1)).contiguous();
    if (tp.size > 1) {
      torch::Tensor all = torch::empty({tp.size, n}, logits.options());
      std::vector<std::int64_t> counts(static_cast<std::size_t>(tp.size), n), displs(counts.size());
      for (std::size_t r = 0; r < displs.size(); ++r) displs[r] = static_cast<std::int64_t>(r) * n;
      tp.comm->all_gather(float_span(max), float_span(all), counts, displs).wait();
      max = std::get<0>(all.max(0)).contiguous();
    }
    const torch::Tensor shifted = logits - max.unsqueeze(1);
    const torch::Tensor exp = shifted.exp();
    torch::Tensor sum_exp = exp.sum(1).contiguous();
    all_reduce_sum(sum_exp, tp);
    const torch::Tensor local_target = targets - vocab_start;
    const torch::Tensor outside = (local_target < 0) | (local_target >= local_vocab);
    const torch::Tensor index = local_target.masked_fill(outside, 0).unsqueeze(1);
    torch::Tensor target_logit =
        shifted.gather(1, index).squeeze(1).masked_fill(outside, 0.0).contiguous();
    all_reduce_sum(target_logit, tp);
    ctx->save_for_backward({exp / sum_exp.unsqueeze(1), index, outside});
    return sum_exp.log() - target_logit;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& softmax = saved[0];
    const torch::Tensor& index = saved[1];
    const torch::Tensor& outside = saved[2];
    torch::Tensor grad = softmax.clone();
    const torch::Tensor one = (~outside).to(grad.scalar_type()).unsqueeze(1);
    grad.scatter_add_(1, index, -one);
    grad.mul_(grads[0].unsqueeze(1));
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

DType dtype_of(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kFloat32) return DType::kF32;
  CANZONA_CHECK(t.scalar_type() == torch::kBFloat16, "a tensor of ", t.scalar_type(),
                ": only fp32 and bf16 move through canzona");
  return DType::kBF16;
}

torch::Dtype torch_dtype(DType dtype) {
  return dtype == DType::kBF16 ? torch::kBFloat16 : torch::kFloat32;
}

TypedSpan typed_span(const torch::Tensor& t) {
  CANZONA_CHECK(t.is_contiguous(), "a typed span of a non-contiguous tensor");
  return {t.data_ptr(), t.numel(), dtype_of(t)};
}

void all_reduce_sum(torch::Tensor& tensor, const TpGroup& tp) {
  if (tp.size == 1) return;
  CANZONA_CHECK(tp.comm != nullptr && tp.comm->size() == tp.size, "TP group of size ", tp.size,
                " has no matching communicator");
  CANZONA_CHECK(tensor.is_contiguous(), "all_reduce_sum needs a contiguous tensor");
  const TypedSpan values = typed_span(tensor);
  tp.comm->all_reduce(values, values).wait();
}

torch::Tensor copy_to_tp(const torch::Tensor& x, const TpGroup& tp) {
  if (tp.size == 1) return x;
  return CopyToTp::apply(x, tp);
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, const TpGroup& tp) {
  if (tp.size == 1) return x;
  return ReduceFromTp::apply(x, tp);
}

std::pair<std::int64_t, std::int64_t> tp_rows(std::int64_t n, const TpGroup& tp) {
  const std::int64_t begin = n * tp.rank / tp.size;
  return {begin, n * (tp.rank + 1) / tp.size - begin};
}

torch::Tensor split_rows_to_tp(const torch::Tensor& x, const TpGroup& tp) {
  if (tp.size == 1) return x;
  CANZONA_CHECK(tp.comm != nullptr && tp.comm->size() == tp.size, "TP group of size ", tp.size,
                " has no matching communicator");
  return SplitRowsToTp::apply(x, tp);
}

torch::Tensor gather_rows_from_tp(const torch::Tensor& x, std::int64_t total_rows,
                                  const TpGroup& tp) {
  if (tp.size == 1) return x;
  CANZONA_CHECK(tp.comm != nullptr && tp.comm->size() == tp.size, "TP group of size ", tp.size,
                " has no matching communicator");
  CANZONA_CHECK_EQ(x.size(0), tp_rows(total_rows, tp).second);
  return GatherRowsFromTp::apply(x, total_rows, tp);
}

torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                     const torch::Tensor& bias, const TpGroup& tp) {
  return torch::nn::functional::linear(copy_to_tp(x, tp), weight, bias);
}

torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                  const TpGroup& tp) {
  return reduce_from_tp(torch::nn::functional::linear(x, weight), tp);
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight,
                                       std::int64_t vocab_start, const TpGroup& tp) {
  if (tp.size == 1) return torch::embedding(weight, ids);
  const torch::Tensor local = ids - vocab_start;
  const torch::Tensor outside = (local < 0) | (local >= weight.size(0));
  const torch::Tensor rows = torch::embedding(weight, local.masked_fill(outside, 0));
  return reduce_from_tp(rows.masked_fill(outside.unsqueeze(-1), 0.0), tp);
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits,
                                           const torch::Tensor& targets, std::int64_t vocab_start,
                                           const TpGroup& tp) {
  return VocabParallelCrossEntropy::apply(logits, targets, vocab_start, tp);
}

}  // namespace canzona::train
