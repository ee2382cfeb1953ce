"""canzona.torch's TP layers at TP=2 against torch's plain layers, under mpirun -np 2.

    mpirun -np 2 python3 tp_worker.py OUT_DIR

Every rank builds the full layer (same seed), its TP layer from it (copy_shards), runs both on the
same input and writes OUT_DIR/rank<R>.json: the largest relative difference of each layer's
output, input gradient and (this rank's shard of the) weight gradient; then again with both layers
cast to torch.bfloat16 (under "bf16", with the dtypes the TP layer gave), and the bf16 logits'
cross-entropy against torch's on the same logits widened to fp32.
"""
import json
import sys

import torch
import torch.nn.functional as F

import canzona.torch as ct


def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def compare(name, full, tp, make_input, forward_full, forward_tp, out, local=lambda v: v,
            dtype=torch.float32):
    """local(x): this rank's part of the full layer's input (a row-parallel layer's slice)."""
    full, tp = full.to(dtype), tp.to(dtype)
    ct.copy_shards(full, tp)
    x = make_input()
    x = x.to(dtype) if x.is_floating_point() else x
    xf = x.clone().requires_grad_(x.is_floating_point())
    xt = local(x).clone().requires_grad_(x.is_floating_point())
    yf, yt = forward_full(full, xf), forward_tp(tp, xt)
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(yf.shape, generator=gen).to(dtype)
    (yf * w).sum().backward()
    (yt * w).sum().backward()
    result = {"output": rel(yt.detach(), yf.detach())}
    dtypes = {str(yt.dtype)} | {str(p.grad.dtype) for p in tp.parameters()}
    if x.is_floating_point():
        result["input_grad"] = rel(xt.grad, local(xf.grad))
    t = ct.parallel.tp_rank()
    for (n, pf), (_, pt) in zip(full.named_parameters(), tp.named_parameters()):
        g = pf.grad
        if getattr(pt, "tensor_model_parallel", False):
            d = pt.partition_dim
            g = g.narrow(d, t * pt.shape[d], pt.shape[d])
        result[f"grad {n}"] = rel(pt.grad, g)
    if x.is_floating_point():
        dtypes.add(str(xt.grad.dtype))
    out[name] = result
    return sorted(dtypes)


def main():
    ct.parallel.init(tp=2)
    out = {}
    layers(out, torch.float32)
    # Cross-entropy: full logits on every rank, each rank's vocabulary slice into the TP version.
    logits = torch.randn(4, 7, 10)
    target = torch.randint(0, 10, (4, 7))
    lf = logits.clone().requires_grad_(True)
    lt = logits.narrow(-1, ct.parallel.tp_rank() * 5, 5).clone().requires_grad_(True)
    full_loss = F.cross_entropy(lf.reshape(-1, 10), target.reshape(-1), reduction="none")
    tp_loss = ct.vocab_parallel_cross_entropy(lt, target).reshape(-1)
    w = torch.randn(full_loss.shape, generator=torch.Generator().manual_seed(9))
    (full_loss * w).sum().backward()
    (tp_loss * w).sum().backward()
    out["cross_entropy"] = {
        "output": rel(tp_loss.detach(), full_loss.detach()),
        "input_grad": rel(lt.grad, lf.grad.narrow(-1, ct.parallel.tp_rank() * 5, 5))}
    out["bf16"] = {}
    out["bf16_dtypes"] = layers(out["bf16"], torch.bfloat16)
    logits = torch.randn(4, 7, 10).bfloat16()
    target = torch.randint(0, 10, (4, 7))
    lt = logits.narrow(-1, ct.parallel.tp_rank() * 5, 5).clone().requires_grad_(True)
    loss = ct.vocab_parallel_cross_entropy(lt, target)
    loss.sum().backward()
    lf = logits.float().requires_grad_(True)
    widened = F.cross_entropy(lf.reshape(-1, 10), target.reshape(-1), reduction="none")
    widened.sum().backward()
    out["bf16_cross_entropy"] = {
        "output": rel(loss.detach().reshape(-1), widened.detach()),
        "input_grad": rel(lt.grad, lf.grad.narrow(-1, ct.parallel.tp_rank() * 5, 5)),
        "dtypes": [str(loss.dtype), str(lt.grad.dtype)]}
    errors = {}
    for key, make in (("column_divisible", lambda: ct.ColumnParallelLinear(8, 5)),
                      ("row_divisible", lambda: ct.RowParallelLinear(5, 8)),
                      ("vocab_divisible", lambda: ct.VocabParallelEmbedding(9, 4)),
                      ("collective_dtype", lambda: ct.tensor_parallel.reduce_from_tp(
                          torch.ones(3, dtype=torch.float64))),
                      ("grid_shape", lambda: ct.parallel.init(tp=1))):
        try:
            make()
            errors[key] = "no error"
        except Exception as e:  # noqa: BLE001 - the test reads type and message
            errors[key] = f"{type(e).__name__}: {e}"
    out["errors"] = errors
    with open(f"{sys.argv[1]}/rank{ct.parallel.grid().tp_rank}.json", "w") as f:
        json.dump(out, f)


def layers(out, dtype):
    """The column, row and embedding comparisons in `dtype`; returns the dtypes the TP layers
    gave (outputs and gradients)."""
    torch.manual_seed(3)
    x = torch.randn(3, 5, 8)
    seen = compare("column", torch.nn.Linear(8, 6),
                   ct.ColumnParallelLinear(8, 6, gather_output=True), lambda: x,
                   lambda m, v: m(v), lambda m, v: m(v), out, dtype=dtype)
    seen += compare("row", torch.nn.Linear(6, 4), ct.RowParallelLinear(6, 4),
                    lambda: torch.randn(3, 6), lambda m, v: m(v), lambda m, v: m(v), out,
                    local=lambda v: v.narrow(-1, ct.parallel.tp_rank() * 3, 3), dtype=dtype)
    tokens = torch.randint(0, 10, (4, 7))
    seen += compare("embedding", torch.nn.Embedding(10, 4), ct.VocabParallelEmbedding(10, 4),
                    lambda: tokens, lambda m, v: m(v), lambda m, v: m(v), out, dtype=dtype)
    return sorted(set(seen))


if __name__ == "__main__":
    main()
