"""The single-process replay of a DistributedOptimizer run (what `--verify` of the examples
checks against): for each step, each DP rank's micro-batches in rank order, each rank's gradient
times float(1/dp) and summed in rank order (the engine's deterministic reduction), then one step
of the same kernels with the same options on one process (canzona.torch's optimizers).

A torch.bfloat16 model (settings["precision"] == "bf16") is replayed as a bf16 run with fp32
main params, written here with torch's own ops: each rank's bf16 gradient (accumulated by
autograd in bf16) times float(1/dp) in fp32 and rounded to bf16, the ranks' products summed in
fp32 in rank order and the sum rounded once to bf16; the kernels step fp32 copies of the params
on that gradient widened to fp32, and each param is its copy rounded to bf16 (torch's float ->
bfloat16 conversion rounds to nearest even). With settings["grad_reduce_in_fp32"] each
micro-batch's bf16 gradient is widened and summed into an fp32 gradient (DistributedOptimizer's
param.main_grad), which is scaled, summed over the ranks and stepped in fp32 with no rounding.
"""
import json

import torch

from canzona.torch.optim import _KernelOptimizer


class _Kernel(_KernelOptimizer):
    """A kernel by registry name with Canzona's option keys (lr applied as the group's)."""

    def __init__(self, params, kernel, options, lr, matrix_only, views=None):
        self._kernel = kernel
        self._matrix_only = matrix_only
        self._views = views or {}
        self._options = json.dumps(dict(options, lr=1.0), sort_keys=True)
        super().__init__(params, dict(lr=lr))

    def _native_options(self, group):
        return self._options


def replay(model, init, loss_fn, steps, micros, dp, settings, matrix_names, lrs, lr_lambda=None):
    """Trains `model` (a fresh instance) from the state dict `init` in one process.

    loss_fn(model, step, micro, dp_rank) -> the loss whose backward gives that micro-batch's
    gradient (already divided by micros if the run did). settings: DistributedOptimizer's
    kernel_settings (the matrix views of params that are not 2-D included); matrix_names: its matrix_param_names; lrs: (matrix lr, AdamW lr) at step 0;
    lr_lambda: the LambdaLR factor the run used, if any. Returns the model and the losses,
    losses[step][rank][micro] (floats).
    """
    model.load_state_dict(init)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    bf16 = settings.get("precision") == "bf16"
    fp32_grads = bf16 and settings.get("grad_reduce_in_fp32", False)
    # What the kernels step: the params themselves, or under bf16 their fp32 main copies.
    stepped = {id(p): (p.detach().float().clone() if bf16 else p) for _, p in trainable}
    matrix = [stepped[id(p)] for n, p in trainable if n in matrix_names]
    other = [stepped[id(p)] for n, p in trainable if n not in matrix_names]
    views = {id(stepped[id(p)]): tuple(settings.get("matrix_views", {})[n]) for n, p in trainable
             if n in settings.get("matrix_views", {})}
    opts = []
    if matrix:
        opts.append(_Kernel(matrix, settings["optimizer"], settings["optimizer_options"], lrs[0],
                            True, views))
    if other:
        opts.append(_Kernel(other, "adamw", settings["adamw_options"], lrs[1], False))
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda) for o in opts] if lr_lambda else []
    scale = torch.tensor(1.0 / dp, dtype=torch.float32)
    losses = []
    for step in range(steps):
        summed = None
        losses.append([])
        for rank in range(dp):
            for _, p in trainable:
                p.grad = torch.zeros_like(p)
            main = [torch.zeros_like(p, dtype=torch.float32) for _, p in trainable]
            losses[-1].append([])
            for micro in range(micros):
                if fp32_grads:
                    for _, p in trainable:
                        p.grad = None
                loss = loss_fn(model, step, micro, rank)
                loss.backward()
                losses[-1][-1].append(loss.item())
                if fp32_grads:
                    for m, (_, p) in zip(main, trainable):
                        m += p.grad.float()
            if fp32_grads:
                scaled = [m * scale for m in main]
            elif bf16:
                scaled = [(p.grad.float() * scale).bfloat16().float() for _, p in trainable]
            else:
                scaled = [p.grad * scale for _, p in trainable]
            summed = scaled if summed is None else [a + b for a, b in zip(summed, scaled)]
        for (_, p), g in zip(trainable, summed):
            if fp32_grads:
                stepped[id(p)].grad = g
            elif bf16:
                stepped[id(p)].grad = g.bfloat16().float()
            else:
                p.grad = g
        for o in opts:
            o.step()
        if bf16:
            with torch.no_grad():
                for _, p in trainable:
                    p.copy_(stepped[id(p)].bfloat16())
        for s in scheds:
            s.step()
    return model, losses
