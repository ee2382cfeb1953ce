"""A GPT written with plain torch.nn, trained with canzona.torch.DistributedOptimizer.

    mpirun --allow-run-as-root -np 2 env PYTHONPATH=build/python .venv/bin/python \\
        examples/gpt.py --strategy lb-asc --steps 50 --verify

Learned token and position embeddings, pre-LayerNorm blocks of causal self-attention and a GELU
MLP, the output layer tied to the token embedding; bytes of Debian's fortunes text (the default
corpus of `canzona train`) as tokens. Each DP rank trains on its own micro-batches; with --verify
the run is replayed in one process (every DP rank's micro-batches in rank order) and the script
prints whether the params are bitwise those of the replay, exiting 1 when they are not.
--save-dir DIR writes a checkpoint (DistributedOptimizer.save) after the last step (and every
--save-every steps); --resume DIR loads a checkpoint (or the newest in a save directory) first and
trains on from its step, under any DP, TP and strategy. --precision bf16 casts the model to
torch.bfloat16 (bf16 params and gradients, fp32 main params and optimizer state; the replay is a
bf16 run too), --grad-reduce-in-fp32 keeps its gradients in fp32.
"""
import argparse
import glob
import math
import os
import sys
import time

import torch

import canzona.torch as ct
from canzona.torch.replay import replay

CORPUS = "/usr/share/games/fortunes"


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, 4 * dim)
        self.fc_out = torch.nn.Linear(4 * dim, dim)

    def attend(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))

    def mlp(self, x):
        return self.fc_out(torch.nn.functional.gelu(self.fc(x)))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, seq, dim, layers, heads, block=Block):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)
        self.wpe = torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList(block(dim, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)
        for name, p in self.named_parameters():  # GPT-2's init: N(0, 0.02) weights, zero biases
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T


def corpus():
    files = sorted(f for f in glob.glob(os.path.join(CORPUS, "*"))
                   if os.path.isfile(f) and not os.path.islink(f)
                   and not f.endswith((".dat", ".u8")))
    if not files:
        raise SystemExit(f"gpt.py: {CORPUS} is missing; install the Debian package fortunes")
    data = b"".join(open(f, "rb").read() for f in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def make_loss_fn(tokens, seq, batch, micros, seed):
    """loss_fn(model, step, micro, dp_rank): the loss of that rank's micro-batch (random windows
    of the text, drawn from the seed, the step, the micro-batch and the rank), over micros."""
    def loss_fn(model, step, micro, rank):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + micro * 31 + rank)
        starts = torch.randint(0, len(tokens) - seq - 1, (batch,), generator=g)
        chunk = torch.stack([tokens[s:s + seq + 1] for s in starts.tolist()])
        logits = model(chunk[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 256),
                                                 chunk[:, 1:].reshape(-1)) / micros
    return loss_fn


def parse_args(description, precision=False, **extra):
    """The examples' flags; `extra` adds flags with their defaults (e.g. tp=2); precision=True
    adds --precision and --grad-reduce-in-fp32 (for an example that casts its model)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--strategy", default="lb-asc")
    ap.add_argument("--optimizer", default="muon")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--micro", type=int, default=2, help="micro-batches per step per rank")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--adamw-lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--save-dir", help="write a checkpoint here after the last step")
    ap.add_argument("--save-every", type=int, default=0, help="and every N steps")
    ap.add_argument("--resume", help="load this checkpoint (or save directory's newest) first")
    if precision:
        ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="bf16: the model cast to torch.bfloat16 (fp32 main params and state)")
        ap.add_argument("--grad-reduce-in-fp32", action="store_true",
                        help="bf16: keep and reduce the gradients in fp32 (param.main_grad)")
    for key, value in extra.items():
        ap.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    a = ap.parse_args()
    if a.verify and a.resume:
        ap.error("--verify replays the run from its initial params; it does not take --resume")
    if precision and a.grad_reduce_in_fp32 and a.precision != "bf16":
        ap.error("--grad-reduce-in-fp32 needs --precision bf16")
    a.dtype = torch.bfloat16 if getattr(a, "precision", "fp32") == "bf16" else torch.float32
    return a


def lr_lambda_for(steps):
    warmup = max(steps // 10, 1)
    return lambda s: min(1.0, (s + 1) / warmup)


def train(model, opt, loss_fn, a):
    """The loop: --micro micro-batches per step (all but the last under no_sync), a linear
    warmup of both learning rates. Returns this rank's losses[step][micro] and the seconds."""
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda_for(a.steps))
    first = 0
    if a.resume:
        opt.load(a.resume)
        first = opt.step_count
        sched.last_epoch = first - 1
        sched.step()  # the schedule's lr at step `first` (LambdaLR: base lr x lambda(first))
    rank = opt.dp_rank
    losses = []
    start = time.perf_counter()
    for step in range(first, a.steps):
        losses.append([])
        for micro in range(a.micro):
            if micro < a.micro - 1:
                with opt.no_sync():
                    loss = loss_fn(model, step, micro, rank)
                    loss.backward()
            else:
                loss = loss_fn(model, step, micro, rank)
                loss.backward()
            losses[-1].append(loss.item())
        opt.step()
        sched.step()
        opt.zero_grad()
        if a.save_dir and (step + 1 == a.steps or a.save_every and (step + 1) % a.save_every == 0):
            path = opt.save(a.save_dir)
            if rank == 0 and opt.tp_rank == 0:
                print(f"saved {path}", flush=True)
        if rank == 0 and opt.tp_rank == 0 and (step % 10 == 0 or step == a.steps - 1):
            print(f"step {step + 1:4d}  loss {sum(losses[-1]):.4f} (rank 0's micro-batches)",
                  flush=True)
    opt.finish()
    return losses, time.perf_counter() - start


def train_and_report(model, opt, loss_fn, a, label):
    """train(), then rank 0 prints the tokens/s and the params hash (every rank computes it)."""
    rank, dp = opt.dp_rank, opt.plan.dp
    losses, seconds = train(model, opt, loss_fn, a)
    if rank == 0:
        rate = len(losses) * a.micro * a.batch * a.seq * dp / seconds
        print(f"{label}{len(losses)} steps in {seconds:.2f} s, {rate:.0f} tokens/s", flush=True)
        print(f"params hash {opt.params_hash():#018x}", flush=True)
    else:
        opt.params_hash()


def report_bitwise(model, ref, rank):
    """Prints whether `model`'s params are bitwise `ref`'s (the replay's); exits 1 when not."""
    bits = lambda t: t.detach().view(-1).view(  # noqa: E731
        torch.int16 if t.dtype == torch.bfloat16 else torch.int32)
    same = all(p.dtype == q.dtype and torch.equal(bits(p), bits(q))
               for p, q in zip(model.parameters(), ref.parameters()))
    if rank == 0:
        print(f"bitwise identical to single process: {'yes' if same else 'no'}", flush=True)
    if not same:
        sys.exit(1)


def main():
    a = parse_args(__doc__.split("\n")[0], precision=True)
    loss_fn = make_loss_fn(corpus(), a.seq, a.batch, a.micro, a.seed)
    torch.manual_seed(a.seed)
    model = Gpt(256, a.seq, a.dim, a.layers, a.heads).to(a.dtype)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = ct.DistributedOptimizer(model, a.optimizer, a.strategy, lr=a.lr, adamw_lr=a.adamw_lr,
                                  grad_reduce_in_fp32=a.grad_reduce_in_fp32)
    rank, dp = opt.dp_rank, opt.plan.dp
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"gpt: {n} params, dp={dp}, strategy {a.strategy}, {a.optimizer} on "
              f"{len(opt.plan.tasks)} matrices, {a.micro} micro-batches of {a.batch}x{a.seq} "
              f"per rank per step, {a.precision}", flush=True)
    train_and_report(model, opt, loss_fn, a, "gpt: ")
    if a.verify:
        torch.manual_seed(a.seed)
        ref, _ = replay(Gpt(256, a.seq, a.dim, a.layers, a.heads).to(a.dtype), init, loss_fn,
                        a.steps,
                        a.micro, dp, opt.kernel_settings, opt.matrix_param_names,
                        (a.lr, a.adamw_lr), lr_lambda_for(a.steps))
        report_bitwise(model, ref, rank)


if __name__ == "__main__":
    main()
