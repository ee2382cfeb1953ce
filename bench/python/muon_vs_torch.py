"""canzona.torch.Muon against PyTorch's own torch.optim.Muon (torch 2.9+): time per step and how far
the updates are apart, the same arguments, on the matrices of the qwen3-cpu preset (Megatron's
layout: linear_qkv 768x512, linear_proj 512x512, linear_fc1 3072x512, linear_fc2 512x1536, six
layers) in one thread, for each Newton-Schulz form of ours: ns_dtype fp32 | bf16 x ns_algorithm
standard | gram.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONPATH=build/python .venv/bin/python \\
        bench/python/muon_vs_torch.py [--steps 7] [--warmup 2] [--repeats 3] \\
        [--forms fp32/standard,fp32/gram,bf16/standard,bf16/gram] [--layers 6]

Each repeat builds torch.optim.Muon and one canzona.torch.Muon per form on copies of the same
params and runs --steps steps of each, alternating (torch, then each form), with a fresh random
gradient per step; a step's time is the wall time of optimizer.step(). Prints every repeat's
median step per optimizer, then the medians and the ratio torch / ours per form, and per form the
largest relative difference (Frobenius) of the first step's update over all matrices from
torch's. torch's Newton-Schulz runs in bf16 (its matrix products through oneDNN where the CPU has
bf16 instructions; on a CPU without them, as on an AVX2-only one, torch's bf16 matmul falls back to
a slow generic loop: --layers 1 keeps such a run short). Ours: bf16_products.h says which library
runs the bf16 products here (printed first).
"""
import argparse
import statistics
import time

import torch

import canzona
import canzona.torch as ct

LAYER = [(768, 512), (512, 512), (3072, 512), (512, 1536)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--layers", type=int, default=6, help="qwen3-cpu layers' matrices (6: all)")
    ap.add_argument("--forms", default="fp32/standard,fp32/gram,bf16/standard,bf16/gram",
                    help="ours: comma list of ns_dtype/ns_algorithm")
    a = ap.parse_args()
    if a.steps <= a.warmup:
        ap.error("--steps must exceed --warmup")
    forms = []
    for f in a.forms.split(","):
        dtype, _, algorithm = f.partition("/")
        if dtype not in ("fp32", "bf16") or algorithm not in ("standard", "gram"):
            ap.error(f"--forms: '{f}' is not fp32|bf16 / standard|gram")
        forms.append((dtype, algorithm))
    shapes = LAYER * a.layers
    torch.set_num_threads(1)
    kw = dict(lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True,
              adjust_lr_fn="match_rms_adamw")
    g = torch.Generator().manual_seed(0)
    init = [torch.randn(s, generator=g) * 0.02 for s in shapes]
    print(f"torch {torch.__version__} (cpu capability {torch.backends.cpu.get_cpu_capability()}), "
          f"{len(shapes)} matrices ({sum(r * c for r, c in shapes) / 1e6:.1f}M params), one "
          f"thread, {kw}")
    print(f"canzona bf16 products: {canzona.bf16_backend_report()}")
    names = ["torch"] + [f"{d}/{al}" for d, al in forms]
    medians = {n: [] for n in names}
    worst = {n: 0.0 for n in names[1:]}
    for rep in range(a.repeats):
        sides = {}
        for name in names:
            ps = [torch.nn.Parameter(w.clone()) for w in init]
            if name == "torch":
                opt = torch.optim.Muon(ps, **kw)
            else:
                dtype, algorithm = name.split("/")
                opt = ct.Muon(ps, ns_dtype=dtype, ns_algorithm=algorithm, **kw)
            sides[name] = (ps, opt, [])
        for step in range(a.steps):
            grads = [torch.randn(s, generator=g) for s in shapes]
            before = {}
            for name, (ps, opt, times) in sides.items():
                for p, gr in zip(ps, grads):
                    p.grad = gr.clone()
                before[name] = [p.detach().clone() for p in ps]
                t = time.perf_counter()
                opt.step()
                times.append(time.perf_counter() - t)
            if step == 0 and rep == 0:
                for name in names[1:]:
                    for i in range(len(shapes)):
                        ours = sides[name][0][i].detach() - before[name][i]
                        theirs = sides["torch"][0][i].detach() - before["torch"][i]
                        rel = float((ours.double() - theirs.double()).norm() /
                                    theirs.double().norm())
                        worst[name] = max(worst[name], rel)
        line = []
        for name in names:
            m = statistics.median(sides[name][2][a.warmup:]) * 1e3
            medians[name].append(m)
            line.append(f"{name} {m:.1f} ms")
        print(f"repeat {rep + 1}: step median " + ", ".join(line))
    t = statistics.median(medians["torch"])
    print(f"median of {a.repeats}: torch.optim.Muon {t:.1f} ms")
    for name in names[1:]:
        o = statistics.median(medians[name])
        print(f"  canzona {name}: {o:.1f} ms, torch / canzona {t / o:.2f}x; largest relative "
              f"difference of the first step's update {worst[name]:.3e} (bound 1/32 = "
              f"{1 / 32:.3e}, python/tests/test_peers.py)")


if __name__ == "__main__":
    main()
