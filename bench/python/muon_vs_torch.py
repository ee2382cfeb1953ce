"""canzona.torch.Muon against PyTorch's own torch.optim.Muon (torch 2.9+): time per step and how far
the updates are apart, the same arguments, on the matrices of the qwen3-cpu preset (Megatron's
layout: linear_qkv 768x512, linear_proj 512x512, linear_fc1 3072x512, linear_fc2 512x1536, six
layers) in one thread.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=build/python .venv/bin/python \\
        bench/python/muon_vs_torch.py [--steps 7] [--warmup 2] [--repeats 3]

Each repeat builds both optimizers on copies of the same params and runs --steps steps of each,
alternating, with a fresh random gradient per step; a step's time is the wall time of
optimizer.step(). Prints every repeat's median step, then the medians and the ratio torch / ours,
and the largest relative difference (Frobenius) of one step's update over all matrices.
torch's Newton-Schulz runs in bf16 (its matrix products through oneDNN), Canzona's in fp32
(OpenBLAS sgemm).
"""
import argparse
import statistics
import time

import torch

import canzona.torch as ct

SHAPES = [(768, 512), (512, 512), (3072, 512), (512, 1536)] * 6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    kw = dict(lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True,
              adjust_lr_fn="match_rms_adamw")
    g = torch.Generator().manual_seed(0)
    init = [torch.randn(s, generator=g) * 0.02 for s in SHAPES]
    print(f"torch {torch.__version__}, {len(SHAPES)} matrices "
          f"({sum(r * c for r, c in SHAPES) / 1e6:.1f}M params), one thread, {kw}")
    ours_all, theirs_all, worst = [], [], 0.0
    for rep in range(a.repeats):
        sides = {}
        for name, cls in (("canzona", ct.Muon), ("torch", torch.optim.Muon)):
            ps = [torch.nn.Parameter(w.clone()) for w in init]
            sides[name] = (ps, cls(ps, **kw), [])
        for step in range(a.steps):
            grads = [torch.randn(s, generator=g) for s in SHAPES]
            before = {}
            for name, (ps, opt, times) in sides.items():
                for p, gr in zip(ps, grads):
                    p.grad = gr.clone()
                before[name] = [p.detach().clone() for p in ps]
                t = time.perf_counter()
                opt.step()
                times.append(time.perf_counter() - t)
            if step == 0 and rep == 0:
                for i in range(len(SHAPES)):
                    ours = sides["canzona"][0][i].detach() - before["canzona"][i]
                    theirs = sides["torch"][0][i].detach() - before["torch"][i]
                    rel = float((ours.double() - theirs.double()).norm() / theirs.double().norm())
                    worst = max(worst, rel)
        ours = statistics.median(sides["canzona"][2][a.warmup:]) * 1e3
        theirs = statistics.median(sides["torch"][2][a.warmup:]) * 1e3
        ours_all.append(ours)
        theirs_all.append(theirs)
        print(f"repeat {rep + 1}: step median canzona {ours:.1f} ms, torch.optim.Muon "
              f"{theirs:.1f} ms")
    o, t = statistics.median(ours_all), statistics.median(theirs_all)
    print(f"median of {a.repeats}: canzona {o:.1f} ms, torch.optim.Muon {t:.1f} ms, "
          f"torch / canzona {t / o:.2f}x")
    print(f"largest relative difference of the first step's update: {worst:.3e} "
          f"(bound 1/32 = {1 / 32:.3e}, python/tests/test_peers.py)")


if __name__ == "__main__":
    main()
