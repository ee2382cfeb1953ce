"""torchvision's VisionTransformer trained with canzona.torch.DistributedOptimizer.

    mpirun --allow-run-as-root -np 2 env PYTHONPATH=build/python .venv/bin/python \\
        examples/vit.py --strategy lb-asc --steps 50 --verify

torchvision.models.VisionTransformer (its own random init; nothing is downloaded) classifies
synthetic images: 10 classes, each a fixed random pattern, every image its class's pattern plus
noise, drawn from the seed, the step, the micro-batch and the DP rank. Muon runs on the encoder's
matrices, the head and the 4-D conv patch embedding (matrix_view: its 2-D view p.flatten(1), as
Keller Jordan's Muon flattens conv filters); AdamW on the rest, the 3-D class token and position
table included. --zero-stage 3 keeps each rank's shard of the params and gradients between uses.
Rank 0 prints the loss, images/s, the params hash and the bytes the largest rank keeps between
steps against the model's total (params, gradients and all optimizer state) / dp; --verify replays the run in one process and
prints whether the params are bitwise those of the replay, exiting 1 when they are not.
"""
import os
import sys

import torch
from torchvision.models import VisionTransformer

import canzona.torch as ct
from canzona.torch.replay import replay

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import lr_lambda_for, parse_args, report_bitwise, train  # noqa: E402

CLASSES = 10


def conv_view(name, p):
    """The conv patch embedding's filters as a matrix (out channels x in channels * kh * kw)."""
    return p.flatten(1) if p.dim() == 4 else None


def make_model(a):
    torch.manual_seed(a.seed)
    return VisionTransformer(image_size=a.image, patch_size=a.patch, num_layers=a.layers,
                             num_heads=a.heads, hidden_dim=a.dim, mlp_dim=4 * a.dim,
                             num_classes=CLASSES)


def make_loss_fn(image, batch, micros, seed):
    """loss_fn(model, step, micro, dp_rank): the cross-entropy of that rank's micro-batch, over
    micros."""
    patterns = torch.randn(CLASSES, 3, image, image,
                           generator=torch.Generator().manual_seed(seed))

    def loss_fn(model, step, micro, rank):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + micro * 31 + rank)
        labels = torch.randint(0, CLASSES, (batch,), generator=g)
        images = patterns[labels] + 1.5 * torch.randn(batch, 3, image, image, generator=g)
        return torch.nn.functional.cross_entropy(model(images), labels) / micros
    return loss_fn


def main():
    a = parse_args(__doc__.split("\n")[0], image=32, patch=4, zero_stage=1)
    loss_fn = make_loss_fn(a.image, a.batch, a.micro, a.seed)
    model = make_model(a)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = ct.DistributedOptimizer(model, a.optimizer, a.strategy, lr=a.lr, adamw_lr=a.adamw_lr,
                                  matrix_view=conv_view, zero_stage=a.zero_stage)
    rank, dp = opt.dp_rank, opt.plan.dp
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"vit: {n} params, dp={dp}, strategy {a.strategy}, ZeRO-{a.zero_stage}, "
              f"{a.optimizer} on {len(opt.plan.tasks)} matrices, {a.micro} micro-batches of "
              f"{a.batch} images {a.image}x{a.image} per rank per step", flush=True)
    losses, seconds = train(model, opt, loss_fn, a)
    hash_ = opt.params_hash()
    held = opt.memory_held(all_ranks=True)
    if rank == 0:
        rate = len(losses) * a.micro * a.batch * dp / seconds
        print(f"vit: {len(losses)} steps in {seconds:.2f} s, {rate:.1f} images/s", flush=True)
        print(f"params hash {hash_:#018x}", flush=True)
        # The model's total: its params and gradients (fp32) and every rank's optimizer state.
        n = sum(p.numel() for p in model.parameters())
        total = 8 * n + sum(h["optimizer_state_bytes"] for h in held)
        kept = max(h["params_bytes"] + h["grads_bytes"] + h["optimizer_state_bytes"]
                   for h in held)
        print(f"kept per rank (params + grads + optimizer state, the largest rank): {kept} bytes "
              f"= {kept / (total / dp):.3f} x the model's total / {dp}", flush=True)
    if a.verify:
        ref, _ = replay(make_model(a), init, loss_fn, a.steps, a.micro, dp, opt.kernel_settings,
                        opt.matrix_param_names, (a.lr, a.adamw_lr), lr_lambda_for(a.steps))
        with opt.gathered():
            report_bitwise(model, ref, rank)


if __name__ == "__main__":
    main()
