"""Baseline for `canzona train`: PyTorch DDP (gloo, CPU) + distributed Muon on a Qwen3 model.

What a user would run instead of Canzona: a Qwen3-architecture decoder (preset `qwen3-cpu`)
trained data-parallel with torch.nn.parallel.DistributedDataParallel over gloo, optimised by
the usual distributed Muon (Keller Jordan's recipe):

  * the same matrices as `canzona train`: Q, K and V in one projection and gate and up in one
    (Megatron's linear_qkv and linear_fc1), so Muon orthogonalises the same shapes;
  * matrix params (every 2-D weight inside the decoder layers) use Muon with canzona's
    defaults: lr 0.02, momentum 0.95 with Nesterov, 5 Newton-Schulz iterations with the
    (3.4445, -4.7750, 2.0315) coefficients, their products in bf16 as Keller Jordan's recipe and
    torch.optim.Muon run them (`--ns-dtype fp32` for fp32), update scaled by 0.2 sqrt(max(rows, cols))
    (`--muon-scale aspect` gives Keller Jordan's sqrt(max(1, rows/cols))). The matrix params are
    put in a fixed order and grouped by shape; within a group rank r orthogonalises params r,
    r+N, r+2N, ... and each block of N params is then all-gathered (the last block padded with
    scratch tensors), so all ranks end with the same weights;
  * the non-matrix params (embedding, lm_head, RMSNorm weights) use torch.optim.AdamW (lr 1e-3,
    betas 0.9 / 0.999, eps 1e-8, weight decay 0.01, as canzona's);
  * both learning rates follow canzona's schedule: linear warmup over min(10, steps) steps,
    then cosine to 0.1 x the base lr.

DDP averages the gradients (all-reduce overlapped with backward, gradient_as_bucket_view,
static_graph) before the optimizer runs. The Newton-Schulz products use addmm, as Keller
Jordan's code does. The timing is the wall clock of each step (forward, backward, both
optimizers) after --warmup-steps-excluded steps, as `canzona train` times its steps; the
optimizer phase is split into its Newton-Schulz compute and its wait for the all-gathers.

`--autocast bf16` runs the forward (and so the backward) under CPU autocast to bf16, PyTorch's
own mixed precision: params, gradients, their all-reduce and the optimizers stay fp32.

Runs on the project's torch 2.x (.venv, scripts/install-deps.sh); it also runs on Debian's
python3-torch 1.13 under /usr/bin/python3.

Example:
  .venv/bin/python bench/train/torch_ddp_muon.py --ranks 2 --steps 6 --seq-len 64 --micro-batch 2
"""

import argparse
import json
import math
import os
import socket
import statistics
import sys
import time

# One thread per rank, as the Canzona side runs; set before torch loads its thread pools.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

FORTUNES_DIR = "/usr/share/games/fortunes"

# Preset `qwen3-cpu`.
QWEN3_CPU = dict(
    hidden=512,
    intermediate=1536,
    layers=6,
    heads=8,
    kv_heads=2,
    head_dim=64,
    vocab=4096,
    rms_eps=1e-6,
    rope_theta=1e6,
    init_std=0.02,
)


# --------------------------------------------------------------------------------------------
# Data


def load_corpus(path):
    """Bytes of `path`, or of the Debian fortunes corpus when path is None."""
    if path is not None:
        with open(path, "rb") as f:
            return f.read(), [path]
    names = []
    for name in sorted(os.listdir(FORTUNES_DIR)):
        full = os.path.join(FORTUNES_DIR, name)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        if name.endswith(".dat") or name.endswith(".u8"):
            continue
        names.append(full)
    if not names:
        raise SystemExit(f"no corpus files in {FORTUNES_DIR}")
    chunks = []
    for full in names:
        with open(full, "rb") as f:
            chunks.append(f.read())
    return b"".join(chunks), names


# --------------------------------------------------------------------------------------------
# Model: Qwen3 decoder


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rope(nn.Module):
    def __init__(self, head_dim, theta):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._cache = None

    def forward(self, seq_len):
        if self._cache is None or self._cache[0] != seq_len:
            t = torch.arange(seq_len, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)  # (T, head_dim)
            self._cache = (seq_len, emb.cos(), emb.sin())
        return self._cache[1], self._cache[2]


def blocked_causal_attention(q, k, v, block):
    """Causal attention over query blocks: block [i0, i0+n) multiplies keys [0, i0+n) only.

    The same algorithm `canzona train` runs (its src/train/attention.cpp), written here for the
    baseline: every later key is masked for the whole block, so skipping it changes nothing but
    the work (about half of the two attention matmuls) and the scores kept for the backward. The
    mask is an additive 0 / -inf bias the score product accumulates onto (baddbmm).
    """
    b, h, t, d = q.shape
    qs = (q / math.sqrt(d)).reshape(b * h, t, d)
    k3, v3 = k.reshape(b * h, t, d), v.reshape(b * h, t, d)
    outs = []
    for i0 in range(0, t, block):
        n = min(block, t - i0)
        end = i0 + n
        future = torch.ones(n, end, dtype=torch.bool).triu(i0 + 1)
        mask = torch.zeros(n, end).masked_fill_(future, float("-inf"))
        scores = torch.baddbmm(mask, qs[:, i0:end], k3[:, :end].transpose(1, 2))
        outs.append(torch.bmm(torch.softmax(scores, dim=-1), v3[:, :end]))
    return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)).view(b, h, t, d)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = c["attention_block"]
        self.heads = c["heads"]
        self.kv_heads = c["kv_heads"]
        self.head_dim = c["head_dim"]
        h = c["hidden"]
        self.q_size = self.heads * self.head_dim
        self.kv_size = self.kv_heads * self.head_dim
        self.qkv_proj = nn.Linear(h, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.q_norm = RMSNorm(self.head_dim, c["rms_eps"])
        self.k_norm = RMSNorm(self.head_dim, c["rms_eps"])

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = self.q_norm(q.reshape(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.reshape(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = v.reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        if groups > 1:  # grouped-query attention: each KV head serves `groups` query heads
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        if self.block:
            out = blocked_causal_attention(q, k, v, self.block)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
            scores = scores + mask
            probs = torch.softmax(scores, dim=-1)
            out = torch.matmul(probs, v)  # (b, heads, t, head_dim)
        out = out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_up_proj = nn.Linear(c["hidden"], 2 * c["intermediate"], bias=False)
        self.down_proj = nn.Linear(c["intermediate"], c["hidden"], bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["rms_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["rms_eps"])
        self.mlp = Mlp(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class Qwen3(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["rms_eps"])
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)  # untied
        self.rope = Rope(c["head_dim"], c["rope_theta"])
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=c["init_std"])

    def forward(self, idx, targets):
        t = idx.shape[1]
        cos, sin = self.rope(t)
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


# --------------------------------------------------------------------------------------------
# Distributed Muon


def newton_schulz5(g, steps=5, eps=1e-7, dtype=torch.float32):
    """Approximately orthogonalise g with the quintic iteration, its products in `dtype`: fp32, or
    bf16 as Keller Jordan's and torch.optim.Muon's code run it (X = G.bfloat16(), every product
    and its result bf16); the result is returned in fp32."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.to(dtype)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.t()
    x = x / (x.norm() + eps)
    for _ in range(steps):
        s = x @ x.t()
        poly = torch.addmm(s, s, s, beta=b, alpha=c)  # b s + c s s
        x = torch.addmm(x, poly, x, beta=a)  # a x + poly x
    if transposed:
        x = x.t()
    return x.float()


class DistMuon(torch.optim.Optimizer):
    """Muon where rank r updates matrix params r, r+N, ... of each same-shape group, then
    the updated params are all-gathered block by block."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5,
                 weight_decay=0.0, rank=0, world=1, scale="spectral", ns_dtype=torch.float32):
        params = list(params)
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps,
                        weight_decay=weight_decay)
        # One param group per shape, in the (fixed) order given; same on every rank.
        by_shape = {}
        for p in params:
            by_shape.setdefault(tuple(p.shape), []).append(p)
        groups = [dict(params=ps) for _, ps in sorted(by_shape.items(), key=lambda kv: (-kv[0][0] * kv[0][1], kv[0]))]
        super().__init__(groups, defaults)
        self.rank = rank
        self.world = world
        self._pad = {}  # shape -> scratch tensors for padding the last block
        self.scale_rule = scale
        self.ns_dtype = ns_dtype
        self.compute_s = 0.0  # this step's momentum + Newton-Schulz + update time

    @torch.no_grad()
    def step(self):
        t_start = time.perf_counter()
        handles = []
        n = self.world
        for group in self.param_groups:
            ps = group["params"]
            shape = tuple(ps[0].shape)
            missing = (-len(ps)) % n
            if missing:
                if shape not in self._pad:
                    self._pad[shape] = [torch.empty(shape) for _ in range(missing)]
                padded = ps + self._pad[shape]
            else:
                padded = ps
            # A conv filter (4-D) is orthogonalised as its 2-D view out x in*kh*kw (Keller
            # Jordan's Muon flattens it the same way).
            rows, cols = shape[0], math.prod(shape[1:])
            if self.scale_rule == "spectral":
                scale = 0.2 * max(rows, cols) ** 0.5
            else:
                scale = max(1.0, rows / cols) ** 0.5
            for base in range(0, len(padded), n):
                mine = padded[base + self.rank]
                if base + self.rank < len(ps):
                    g = mine.grad
                    state = self.state[mine]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(g)
                    buf = state["momentum_buffer"]
                    buf.lerp_(g, 1.0 - group["momentum"])
                    u = g.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                    x = newton_schulz5(u.reshape(rows, cols), steps=group["ns_steps"],
                                       dtype=self.ns_dtype)
                    x = x.reshape(shape)
                    if group["weight_decay"]:
                        mine.mul_(1.0 - group["lr"] * group["weight_decay"])
                    mine.add_(x, alpha=-group["lr"] * scale)
                if n > 1:
                    # .data: gloo copies into the outputs on its own thread, where grad mode
                    # is on, so hand it plain tensors rather than leaves that require grad.
                    outs = [q.data for q in padded[base:base + n]]
                    handles.append(dist.all_gather(outs, mine.data, async_op=True))
        self.compute_s = time.perf_counter() - t_start
        for h in handles:
            h.wait()


# --------------------------------------------------------------------------------------------
# Worker


def split_params(model):
    """(matrix params in a fixed order, other params). Matrix = 2-D weights inside layers."""
    matrix, other = [], []
    for name, p in model.named_parameters():
        if p.ndim == 2 and name.startswith("layers."):
            matrix.append((name, p))
        else:
            other.append((name, p))
    matrix.sort(key=lambda np_: np_[0])
    return [p for _, p in matrix], [p for _, p in other]


def lr_factor_for(steps):
    """canzona's schedule (src/train/schedule.cpp): linear warmup over min(10, steps) steps, then
    cosine to 0.1 x the base lr; lr_factor(step) for step = 1..steps."""
    warmup = min(10, steps)

    def lr_factor(step):
        if step <= warmup:
            return step / warmup
        if steps == warmup:
            return 1.0
        q = (step - warmup) / (steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * q))
    return lr_factor


def batch_sampler(tokens, args, rank):
    """next_batch() -> (inputs, targets): micro_batch random windows of seq_len + 1 tokens, drawn
    from this rank's own generator."""
    gen = torch.Generator()
    gen.manual_seed(args.seed * 1000003 + rank + 1)
    window = args.seq_len + 1
    max_start = tokens.numel() - window
    offsets = torch.arange(window)

    def next_batch():
        starts = torch.randint(0, max_start + 1, (args.micro_batch,), generator=gen)
        batch = tokens[starts[:, None] + offsets[None, :]]
        return batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
    return next_batch


def step_stats(loss, times_ms, world):
    """Bookkeeping outside the timed region: the loss averaged over ranks and each time the
    slowest rank's. Returns (mean loss, [times])."""
    stats = torch.tensor([loss.item() / world, *times_ms], dtype=torch.float64)
    mean_loss = stats[:1].clone()
    dist.all_reduce(mean_loss, op=dist.ReduceOp.SUM)
    times = stats[1:].clone()
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return float(mean_loss[0]), [float(t) for t in times]


def start_rank(rank, args, init_method):
    """One thread, the gloo group of args.ranks ranks; returns the corpus as token ids."""
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=args.ranks)
    corpus, _ = load_corpus(args.data)
    return torch.frombuffer(bytearray(corpus), dtype=torch.uint8).to(torch.long)


def worker(rank, args, init_method, result_q):
    world = args.ranks
    tokens = start_rank(rank, args, init_method)

    torch.manual_seed(args.seed)  # same init on every rank (DDP also broadcasts rank 0's)
    cfg = dict(QWEN3_CPU, attention_block=128 if args.attention == "blocked" else 0)
    model = Qwen3(cfg)
    ddp = DDP(model, broadcast_buffers=False, gradient_as_bucket_view=True, static_graph=True)
    matrix, other = split_params(model)
    muon = DistMuon(matrix, lr=args.lr, momentum=0.95, nesterov=True, ns_steps=5,
                    weight_decay=0.0, rank=rank, world=world, scale=args.muon_scale,
                    ns_dtype=torch.bfloat16 if args.ns_dtype == "bf16" else torch.float32)
    adamw = torch.optim.AdamW(other, lr=args.adamw_lr, betas=(0.9, 0.999), eps=1e-8,
                              weight_decay=0.01)

    next_batch = batch_sampler(tokens, args, rank)
    lr_factor = lr_factor_for(args.steps)

    step_ms, fb_ms, opt_ms, ns_ms, losses = [], [], [], [], []
    for step in range(1, args.steps + 1):
        for opt, base in ((muon, args.lr), (adamw, args.adamw_lr)):
            for group in opt.param_groups:
                group["lr"] = base * lr_factor(step)
        inp, tgt = next_batch()

        t0 = time.perf_counter()
        # --autocast bf16: PyTorch's CPU mixed precision (fp32 params, grads and optimizer; the
        # products of the forward, and so of the backward, in bf16).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss = ddp(inp, tgt)
        loss.backward()  # DDP all-reduces (averages) grads, overlapped with backward
        t1 = time.perf_counter()
        muon.step()
        adamw.step()
        # The grads are views into DDP's buckets (gradient_as_bucket_view): zero them in place.
        muon.zero_grad(set_to_none=False)
        adamw.zero_grad(set_to_none=False)
        t2 = time.perf_counter()

        mean_loss, times = step_stats(loss, [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t0) * 1e3,
                                             muon.compute_s * 1e3], world)
        losses.append(mean_loss)
        fb_ms.append(times[0])
        opt_ms.append(times[1])
        step_ms.append(times[2])
        ns_ms.append(times[3])
        if rank == 0:
            tag = "" if step > args.warmup_steps_excluded else "  (warmup)"
            print(f"step {step:4d}  loss {losses[-1]:.4f}  ms {step_ms[-1]:8.1f}  "
                  f"(fwd+bwd {fb_ms[-1]:.1f}, opt {opt_ms[-1]:.1f} of which Muon compute "
                  f"{ns_ms[-1]:.1f}){tag}", flush=True)

    # Sanity check (untimed): Muon's all-gather must leave every rank with the same weights.
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
        sig = torch.stack([flat.sum(), (flat * torch.arange(flat.numel(), dtype=torch.float64)
                                        .remainder_(997)).sum()])
    sigs = [torch.zeros_like(sig) for _ in range(world)]
    dist.all_gather(sigs, sig)
    in_sync = all(torch.equal(sigs[0], x) for x in sigs)

    if rank == 0:
        result_q.put(dict(step_ms=step_ms, fwd_bwd_ms=fb_ms, opt_ms=opt_ms, muon_compute_ms=ns_ms,
                          loss=losses,
                          params_in_sync=in_sync,
                          n_params=sum(p.numel() for p in model.parameters()),
                          n_matrix=len(matrix), n_other=len(other)))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps-excluded", type=int, default=2,
                    help="first steps left out of the timing medians")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.02, help="Muon learning rate")
    ap.add_argument("--adamw-lr", type=float, default=1e-3)
    ap.add_argument("--muon-scale", choices=["spectral", "aspect"], default="spectral",
                    help="spectral: 0.2 sqrt(max(rows, cols)) (canzona's default); aspect: "
                         "sqrt(max(1, rows/cols)) (Keller Jordan)")
    ap.add_argument("--attention", choices=["blocked", "full"], default="blocked",
                    help="blocked: causal attention in query blocks of 128, the algorithm "
                         "`canzona train` runs (default); full: the whole masked S x S scores, "
                         "as HF's eager attention computes them")
    ap.add_argument("--data", default=None,
                    help=f"plain-text file (default: the fortunes files in {FORTUNES_DIR})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="run the forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--ns-dtype", choices=["fp32", "bf16"], default="bf16",
                    help="Newton-Schulz products: bf16 (default), as Keller Jordan's Muon and "
                         "torch.optim.Muon run them, or fp32")
    ap.add_argument("--json", default=None, help="write results here")
    args = ap.parse_args()

    if args.ranks < 1:
        ap.error("--ranks must be >= 1")
    if args.seq_len < 1 or args.micro_batch < 1:
        ap.error("--seq-len and --micro-batch must be >= 1")
    if args.warmup_steps_excluded < 0 or args.steps <= args.warmup_steps_excluded:
        ap.error("--steps must exceed --warmup-steps-excluded (>= 0)")
    if QWEN3_CPU["heads"] % QWEN3_CPU["kv_heads"]:
        ap.error("heads must be a multiple of kv_heads")
    corpus, files = load_corpus(args.data)
    if len(corpus) < args.seq_len + 1:
        ap.error(f"corpus has {len(corpus)} bytes, fewer than seq_len + 1")

    init_method = f"tcp://127.0.0.1:{free_port()}"
    ctx = mp.get_context("spawn")
    result_q = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, init_method, result_q), nprocs=args.ranks, join=True)
    res = result_q.get()

    timed = slice(args.warmup_steps_excluded, None)
    tokens_per_step = args.ranks * args.micro_batch * args.seq_len
    tps = [tokens_per_step / (ms / 1e3) for ms in res["step_ms"][timed]]
    summary = dict(
        tokens_per_s_median=statistics.median(tps),
        step_ms_median=statistics.median(res["step_ms"][timed]),
        fwd_bwd_ms_median=statistics.median(res["fwd_bwd_ms"][timed]),
        opt_ms_median=statistics.median(res["opt_ms"][timed]),
        muon_compute_ms_median=statistics.median(res["muon_compute_ms"][timed]),
    )
    print(f"timed steps {len(tps)}: median step {summary['step_ms_median']:.1f} ms "
          f"(fwd+bwd {summary['fwd_bwd_ms_median']:.1f} ms, "
          f"optimizer {summary['opt_ms_median']:.1f} ms, of which Muon compute "
          f"{summary['muon_compute_ms_median']:.1f} ms)")
    print(f"tokens/s median: {summary['tokens_per_s_median']:.1f}")
    if not res["params_in_sync"]:
        print("error: ranks ended with different weights", file=sys.stderr)

    if args.json:
        out = dict(summary)
        out.update(
            params_in_sync=res["params_in_sync"],
            step_ms=res["step_ms"],
            fwd_bwd_ms=res["fwd_bwd_ms"],
            opt_ms=res["opt_ms"],
            muon_compute_ms=res["muon_compute_ms"],
            loss=res["loss"],
            config=dict(
                framework=f"pytorch {torch.__version__} DDP gloo",
                optimizer="muon (distributed, round-robin NS + all_gather) + adamw",
                model="qwen3-cpu", **QWEN3_CPU,
                params=res["n_params"], matrix_params=res["n_matrix"],
                other_params=res["n_other"],
                ranks=args.ranks, steps=args.steps,
                warmup_steps_excluded=args.warmup_steps_excluded,
                seq_len=args.seq_len, micro_batch=args.micro_batch, attention=args.attention,
                tokens_per_step=tokens_per_step,
                lr=args.lr, momentum=0.95, nesterov=True, ns_steps=5,
                ns_coefficients=[3.4445, -4.7750, 2.0315], muon_scale=args.muon_scale,
                ns_dtype=args.ns_dtype,
                schedule="warmup min(10, steps), cosine to 0.1",
                ddp="gloo, gradient_as_bucket_view, static_graph",
                muon_weight_decay=0.0,
                adamw_lr=args.adamw_lr, adamw_betas=[0.9, 0.999], adamw_eps=1e-8,
                adamw_weight_decay=0.01,
                data=args.data or FORTUNES_DIR, data_files=len(files), data_bytes=len(corpus),
                seed=args.seed, threads_per_rank=1,
            ),
        )
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0 if res["params_in_sync"] else 1


if __name__ == "__main__":
    sys.exit(main())
