"""ZeRO-3 peer of `canzona train --zero-stage 3`: PyTorch FSDP2 + muon-fsdp2's distributed Muon.

What a PyTorch user runs for fully sharded training with Muon: torch_ddp_muon.py's Qwen3 model
(the `qwen3-cpu` preset's shapes, the same data, schedule, learning rates and block-causal
attention), each decoder layer and then the whole model wrapped by FSDP2's `fully_shard` over
gloo on the CPU (params, gradients and optimizer state sharded along dim 0; each layer's params
all-gathered before its forward and backward, its gradients reduce-scattered after), optimised
by muon-fsdp2 0.3.0's `Muon` (PyPI): each matrix's gradient shards gathered to the rank
index % world, Newton-Schulz there (bf16, its loop under torch.compile), the result scattered
back; the other params by that package's Adam (betas 0.9 / 0.999, eps 1e-8, weight decay 0.01,
the values torch_ddp_muon.py gives torch.optim.AdamW). Muon's scale: 0.2 sqrt(max(rows, cols))
(its rms_scale, canzona's default). Timed as torch_ddp_muon.py times: the wall clock of each step
after --warmup-steps-excluded steps (the first steps include torch.compile's compilation).

Example:
  .venv/bin/python bench/train/torch_fsdp2_muon.py --ranks 2 --steps 6 --seq-len 64 --micro-batch 2
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ddp_muon as base  # noqa: E402  (sets the one-thread environment before torch)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from muon_fsdp2 import Muon  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402


def worker(rank, args, init_method, result_q):
    world = args.ranks
    tokens = base.start_rank(rank, args, init_method)

    torch.manual_seed(args.seed)
    model = base.Qwen3(dict(base.QWEN3_CPU, attention_block=128))
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    # fully_shard replaced the params with DTensors: split them as torch_ddp_muon.py does.
    matrix, other = base.split_params(model)
    opt = Muon([dict(params=matrix, lr=args.lr, momentum=0.95, weight_decay=0.0, use_muon=True,
                     rms_scale=True, nesterov=True, ns_steps=5),
                dict(params=other, lr=args.adamw_lr, betas=(0.9, 0.999), eps=1e-8,
                     weight_decay=0.01, use_muon=False)])
    base_lr = [args.lr, args.adamw_lr]

    next_batch = base.batch_sampler(tokens, args, rank)
    lr_factor = base.lr_factor_for(args.steps)

    step_ms, fb_ms, opt_ms, losses = [], [], [], []
    for step in range(1, args.steps + 1):
        for group, lr in zip(opt.param_groups, base_lr):
            group["lr"] = lr * lr_factor(step)
        inp, tgt = next_batch()
        t0 = time.perf_counter()
        loss = model(inp, tgt)
        loss.backward()  # FSDP2 reduce-scatters (averages) each layer's gradients
        t1 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        mean_loss, times = base.step_stats(loss, [(t1 - t0) * 1e3, (t2 - t1) * 1e3,
                                                  (t2 - t0) * 1e3], world)
        losses.append(mean_loss)
        fb_ms.append(times[0])
        opt_ms.append(times[1])
        step_ms.append(times[2])
        if rank == 0:
            tag = "" if step > args.warmup_steps_excluded else "  (warmup)"
            print(f"step {step:4d}  loss {losses[-1]:.4f}  ms {step_ms[-1]:8.1f}  "
                  f"(fwd+bwd {fb_ms[-1]:.1f}, opt {opt_ms[-1]:.1f}){tag}", flush=True)
    if rank == 0:
        result_q.put(dict(step_ms=step_ms, fwd_bwd_ms=fb_ms, opt_ms=opt_ms, loss=losses,
                          n_matrix=len(matrix), n_other=len(other)))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps-excluded", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--adamw-lr", type=float, default=1e-3)
    ap.add_argument("--data", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.ranks < 1 or args.seq_len < 1 or args.micro_batch < 1:
        ap.error("--ranks, --seq-len and --micro-batch must be >= 1")
    if args.warmup_steps_excluded < 0 or args.steps <= args.warmup_steps_excluded:
        ap.error("--steps must exceed --warmup-steps-excluded (>= 0)")
    init_method = f"tcp://127.0.0.1:{base.free_port()}"
    result_q = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args, init_method, result_q), nprocs=args.ranks, join=True)
    res = result_q.get()
    timed = slice(args.warmup_steps_excluded, None)
    tokens_per_step = args.ranks * args.micro_batch * args.seq_len
    summary = dict(
        tokens_per_s_median=statistics.median(tokens_per_step / (ms / 1e3)
                                              for ms in res["step_ms"][timed]),
        step_ms_median=statistics.median(res["step_ms"][timed]),
        fwd_bwd_ms_median=statistics.median(res["fwd_bwd_ms"][timed]),
        opt_ms_median=statistics.median(res["opt_ms"][timed]),
        muon_compute_ms_median=0.0,  # not separable: muon-fsdp2 overlaps gathers and compute
    )
    print(f"timed steps {len(res['step_ms'][timed])}: median step {summary['step_ms_median']:.1f}"
          f" ms (fwd+bwd {summary['fwd_bwd_ms_median']:.1f} ms, optimizer "
          f"{summary['opt_ms_median']:.1f} ms); tokens/s median "
          f"{summary['tokens_per_s_median']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(res, **summary, args=vars(args), torch=torch.__version__), f)


if __name__ == "__main__":
    main()
