"""Megatron-style tensor-parallel layers for canzona.torch (docs/python.md).

Each layer holds its TP rank's shard and tags it with Megatron's attributes
(`tensor_model_parallel=True`, `partition_dim`), which the planner reads. With tp = 1 they are
the plain layers. The collectives run on the grid's TP group (canzona.torch.parallel), summing
in TP rank order:

  ColumnParallelLinear   weight [out/tp, in] (rows of the full weight), bias [out/tp];
                         input copied to TP (its gradient all-reduced in backward)
  RowParallelLinear      weight [out, in/tp] (columns), bias [out] replicated; output all-reduced
  VocabParallelEmbedding weight [vocab/tp, dim]; rows outside the shard give 0, then all-reduced
  vocab_parallel_cross_entropy(logits [..., vocab/tp], target [...]) -> per-token loss
  copy_to_tp / reduce_from_tp / gather_from_tp: the autograd functions they are made of

A model cast to torch.bfloat16 (model.to(torch.bfloat16)) runs them in bf16: the collectives move
bf16 (an all-reduce sums in fp32 in TP rank order and rounds once), the cross-entropy widens the
logits to fp32.
"""
import torch
import torch.nn.functional as F

from canzona.torch import parallel


def _numpy(t, where):
    """A contiguous float32 or bfloat16 tensor's memory as the NumPy array the grid's collectives
    take (bf16: its bits as int16; NumPy has no bfloat16)."""
    if t.dtype == torch.float32:
        return t.view(-1).numpy()
    if t.dtype == torch.bfloat16:
        return t.view(-1).view(torch.int16).numpy()
    raise TypeError(f"canzona.torch.{where}: the TP collectives move torch.float32 or "
                    f"torch.bfloat16 (got {t.dtype})")


def _all_reduce(x):
    """Sum over TP in rank order; a bf16 x is summed in fp32 and rounded once."""
    out = x.detach().contiguous().clone()
    if parallel.tp_size() > 1:
        parallel.grid().tp_all_reduce(_numpy(out, "tensor_parallel"))
    return out


def _all_gather_last(x):
    tp = parallel.tp_size()
    if tp == 1:
        return x.detach().clone()
    send = x.detach().contiguous()
    recv = torch.empty((tp,) + tuple(send.shape), dtype=send.dtype)
    parallel.grid().tp_all_gather(_numpy(send, "tensor_parallel"), _numpy(recv, "tensor_parallel"))
    return torch.cat(list(recv.unbind(0)), dim=-1)


class _CopyToTp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad)


class _ReduceFromTp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _all_reduce(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _GatherFromTp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.width = x.shape[-1]
        return _all_gather_last(x)

    @staticmethod
    def backward(ctx, grad):
        t = parallel.tp_rank()
        return grad.narrow(-1, t * ctx.width, ctx.width).contiguous()


def copy_to_tp(x):
    """Identity forward; all-reduce of the gradient over TP in backward."""
    return _CopyToTp.apply(x) if parallel.tp_size() > 1 else x


def reduce_from_tp(x):
    """All-reduce over TP forward; identity backward."""
    return _ReduceFromTp.apply(x) if parallel.tp_size() > 1 else x


def gather_from_tp(x):
    """Concatenates every TP rank's x along the last dim; backward keeps this rank's slice."""
    return _GatherFromTp.apply(x) if parallel.tp_size() > 1 else x


def _divide(n, what, name):
    tp = parallel.tp_size()
    if n % tp:
        raise ValueError(f"{name}: {what} {n} is not divisible by tp {tp}")
    return n // tp


def _tag(p, dim):
    p.tensor_model_parallel = True
    p.partition_dim = dim
    return p


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, in_features, out_features, bias=True, gather_output=False):
        super().__init__()
        local = _divide(out_features, "out_features", "ColumnParallelLinear")
        self.in_features, self.out_features, self.gather_output = in_features, out_features, \
            gather_output
        self.weight = _tag(torch.nn.Parameter(torch.empty(local, in_features)), 0)
        torch.nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self.bias = _tag(torch.nn.Parameter(torch.zeros(local)), 0) if bias else None

    def forward(self, x):
        y = F.linear(copy_to_tp(x), self.weight, self.bias)
        return gather_from_tp(y) if self.gather_output else y


class RowParallelLinear(torch.nn.Module):
    """Takes its input already split along the last dim (a ColumnParallelLinear's output)."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        local = _divide(in_features, "in_features", "RowParallelLinear")
        self.in_features, self.out_features = in_features, out_features
        self.weight = _tag(torch.nn.Parameter(torch.empty(out_features, local)), 1)
        torch.nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x):
        y = reduce_from_tp(F.linear(x, self.weight))
        return y + self.bias if self.bias is not None else y


class VocabParallelEmbedding(torch.nn.Module):
    is_embedding = True  # the planner gives its weight AdamW, as an nn.Embedding's

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        local = _divide(num_embeddings, "num_embeddings", "VocabParallelEmbedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.start = parallel.tp_rank() * local
        self.weight = _tag(torch.nn.Parameter(torch.empty(local, embedding_dim)), 0)
        torch.nn.init.normal_(self.weight)

    def forward(self, tokens):
        if parallel.tp_size() == 1:
            return F.embedding(tokens, self.weight)
        outside = (tokens < self.start) | (tokens >= self.start + self.weight.shape[0])
        out = F.embedding((tokens - self.start).masked_fill(outside, 0), self.weight)
        return reduce_from_tp(out.masked_fill(outside.unsqueeze(-1), 0.0))


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        tp, t = parallel.tp_size(), parallel.tp_rank()
        local = logits.shape[-1]
        start = t * local
        local_max = logits.detach().max(dim=-1).values
        global_max = _all_gather_last(local_max.unsqueeze(-1)).max(dim=-1).values
        shifted = logits.detach() - global_max.unsqueeze(-1)
        exp = shifted.exp()
        sum_exp = _all_reduce(exp.sum(dim=-1))
        outside = (target < start) | (target >= start + local)
        idx = (target - start).masked_fill(outside, 0)
        picked = shifted.gather(-1, idx.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        picked = _all_reduce(picked) if tp > 1 else picked
        softmax = exp / sum_exp.unsqueeze(-1)
        ctx.save_for_backward(softmax, idx, outside)
        return sum_exp.log() - picked

    @staticmethod
    def backward(ctx, grad):
        softmax, idx, outside = ctx.saved_tensors
        g = softmax.clone()
        inside = (~outside).to(g.dtype)
        g.scatter_add_(-1, idx.unsqueeze(-1), -inside.unsqueeze(-1))
        return g * grad.unsqueeze(-1), None


def vocab_parallel_cross_entropy(logits, target):
    """Per-token cross-entropy of vocabulary-parallel logits (this rank's [..., vocab/tp]) against
    the full-vocabulary target ids; the same on every TP rank. Take .mean() for the loss.
    Computed in fp32 (bf16 logits are widened first, as Megatron's): the loss is float32."""
    logits = logits.float()
    if parallel.tp_size() == 1:
        shape = target.shape
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                               reduction="none").view(shape)
    return _VocabParallelCrossEntropy.apply(logits, target)


def copy_shards(full, sharded):
    """Copies each param of the TP=1 module `full` into the same-named param of `sharded` (this
    rank's slice along partition_dim for tagged params), so a TP run starts from the same model."""
    t, tp = parallel.tp_rank(), parallel.tp_size()
    source = dict(full.named_parameters())
    with torch.no_grad():
        for name, p in sharded.named_parameters():
            if name not in source:
                raise ValueError(f"copy_shards: the full model has no param '{name}'")
            value = source[name]
            if getattr(p, "tensor_model_parallel", False):
                dim = p.partition_dim
                value = value.narrow(dim, t * p.shape[dim], p.shape[dim])
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(f"copy_shards: param '{name}' is {tuple(p.shape)} here, "
                                 f"{tuple(value.shape)} in the full model")
            p.copy_(value)
