"""bf16 matrix products on this CPU: libtorch's own bf16 matmul against widening both bf16 inputs
to fp32 and multiplying in fp32 (the product of two bf16 values is exact in fp32, so the second
is "bf16 inputs, fp32 accumulation" computed by the fp32 GEMM), against the fp32 matmul itself.
The shapes are the products of one qwen3-cpu layer at the training preset's 2048 tokens (seq 256
x micro-batch 8): the forward x W^T of QKV, the attention output, fc1 (gate and up) and fc2, and
the output layer, each with its two backward products (dX = dY W, dW = dY^T X).

Usage: .venv/bin/python bench/train/bf16_matmul.py [--tokens N] [--repeats R] [--threads T]
Prints, per product, GFLOP/s (median of R timings of a loop of calls) of: fp32 mm; bf16 mm
(libtorch, oneDNN); widened (bf16 -> fp32 casts of both inputs, fp32 mm, the result rounded to
bf16: what a trainer that keeps bf16 tensors pays), and the widened / bf16 ratio; then the sums.
The machine, torch version and whether the CPU has AVX512-BF16 / AMX-BF16 are printed first.
"""
import argparse
import platform
import statistics
import time

import torch


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    except OSError:
        pass
    return []


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = {}
            for line in f:
                if ":" in line:
                    key, value = line.split(":", 1)
                    info.setdefault(key.strip(), value.strip())
        return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')} model "
                f"{info.get('model', '?')})")
    except OSError:
        return platform.processor()


def timed(fn, calls):
    fn()  # warm: first-call dispatch and oneDNN primitive creation
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    hidden, ffn, vocab, kv = 512, 1536, 4096, 2 * 64
    t = a.tokens
    forward = {"qkv": (t, hidden, hidden + 2 * kv), "attention out": (t, hidden, hidden),
               "fc1 (gate, up)": (t, hidden, 2 * ffn), "fc2": (t, ffn, hidden),
               "output layer": (t, hidden, vocab)}
    products = []
    for name, (m, k, n) in forward.items():
        products += [(f"{name} fwd", m, k, n), (f"{name} dX", m, n, k), (f"{name} dW", n, m, k)]
    print(f"{cpu_name()}; torch {torch.__version__}; {a.threads} thread(s); "
          f"native bf16: {', '.join(cpu_flags()) or 'none'}; {a.tokens} tokens; "
          f"median of {a.repeats}")
    print(f"{'product (M x K x N)':36s} {'fp32':>8s} {'bf16':>8s} {'widened':>8s} "
          f"{'widened/bf16':>13s}  GFLOP/s")
    totals = {"fp32": 0.0, "bf16": 0.0, "widened": 0.0}
    for name, m, k, n in products:
        x32 = torch.randn(m, k)
        w32 = torch.randn(k, n)
        x16, w16 = x32.bfloat16(), w32.bfloat16()
        flop = 2.0 * m * k * n
        calls = max(1, int(2e9 / flop))
        runs = {
            "fp32": lambda: torch.mm(x32, w32),
            "bf16": lambda: torch.mm(x16, w16),
            "widened": lambda: torch.mm(x16.float(), w16.float()).bfloat16(),
        }
        secs = {key: statistics.median(timed(fn, calls) for _ in range(a.repeats))
                for key, fn in runs.items()}
        for key in totals:
            totals[key] += secs[key]
        rate = {key: flop / s / 1e9 for key, s in secs.items()}
        print(f"{name + f' ({m} x {k} x {n})':36s} {rate['fp32']:8.1f} {rate['bf16']:8.1f} "
              f"{rate['widened']:8.1f} {secs['bf16'] / secs['widened']:13.2f}")
    print(f"{'all products, seconds':36s} {totals['fp32']:8.4f} {totals['bf16']:8.4f} "
          f"{totals['widened']:8.4f} {totals['bf16'] / totals['widened']:13.2f}")


if __name__ == "__main__":
    main()
