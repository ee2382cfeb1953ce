"""examples/gpt.py's GPT with Megatron-style tensor parallelism (canzona.torch's TP layers).

    mpirun --allow-run-as-root -np 4 env PYTHONPATH=build/python .venv/bin/python \\
        examples/gpt_tp.py --tp 2 --strategy lb-asc --steps 50 --verify

q, k and v are column-parallel (each TP rank holds heads/tp heads), the attention output and the
MLP's second linear row-parallel, the MLP's first column-parallel, the token embedding
vocabulary-parallel and tied to the output, whose vocabulary-parallel logits go to
vocab_parallel_cross_entropy. Positions and LayerNorms are replicated. The model starts from the
TP=1 model of the same seed (copy_shards). With --verify the run is replayed in one process with
that TP=1 model (every DP rank's micro-batches in rank order); TP changes the order of sums, so
the replay is not bitwise: the script prints the largest relative difference of rank 0's losses
against the bound --loss-bound (default 1e-4) and exits 1 above it. --precision bf16 runs both
models in torch.bfloat16 (the TP collectives then move bf16).
"""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import canzona.torch as ct
from canzona.torch.replay import replay

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402  (the corpus, the flags and the training loop of examples/gpt.py)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, parallel):
        super().__init__()
        col = ct.ColumnParallelLinear if parallel else torch.nn.Linear
        row = ct.RowParallelLinear if parallel else torch.nn.Linear
        self.ln1 = torch.nn.LayerNorm(dim)
        self.q, self.k, self.v = col(dim, dim), col(dim, dim), col(dim, dim)
        self.proj = row(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc = col(dim, 4 * dim)
        self.fc_out = row(4 * dim, dim)
        self.head_dim = dim // heads

    def forward(self, x):
        b, t, _ = x.shape
        h = self.ln1(x)
        q, k, v = (z.view(b, t, -1, self.head_dim).transpose(1, 2)
                   for z in (self.q(h), self.k(h), self.v(h)))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, -1))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class GptTp(torch.nn.Module):
    """parallel=False: the same model with plain layers (TP = 1), the replay's."""

    def __init__(self, vocab, seq, dim, layers, heads, parallel):
        super().__init__()
        self.parallel = parallel
        emb = ct.VocabParallelEmbedding if parallel else torch.nn.Embedding
        self.wte = emb(vocab, dim)
        self.wpe = torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads, parallel) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        h = self.ln_f(x)
        if self.parallel:  # logits of this rank's vocabulary shard
            logits = ct.tensor_parallel.copy_to_tp(h) @ self.wte.weight.T
            return ct.vocab_parallel_cross_entropy(logits, targets).mean()
        logits = (h @ self.wte.weight.T).float()  # fp32 like vocab_parallel_cross_entropy's
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_loss_fn(tokens, seq, batch, micros, seed):
    def loss_fn(model, step, micro, rank):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + micro * 31 + rank)
        starts = torch.randint(0, len(tokens) - seq - 1, (batch,), generator=g)
        chunk = torch.stack([tokens[s:s + seq + 1] for s in starts.tolist()])
        return model(chunk[:, :-1], chunk[:, 1:]) / micros
    return loss_fn


def main():
    a = gpt.parse_args(__doc__.split("\n")[0], precision=True, tp=2, loss_bound=1e-4)
    grid = ct.parallel.init(tp=a.tp)
    loss_fn = make_loss_fn(gpt.corpus(), a.seq, a.batch, a.micro, a.seed)
    torch.manual_seed(a.seed)
    full = GptTp(256, a.seq, a.dim, a.layers, a.heads, parallel=False).to(a.dtype)
    init = {k: v.clone() for k, v in full.state_dict().items()}
    model = GptTp(256, a.seq, a.dim, a.layers, a.heads, parallel=True).to(a.dtype)
    ct.copy_shards(full, model)
    opt = ct.DistributedOptimizer(model, a.optimizer, a.strategy, lr=a.lr, adamw_lr=a.adamw_lr,
                                  grad_reduce_in_fp32=a.grad_reduce_in_fp32)
    first = grid.dp_rank == 0 and grid.tp_rank == 0
    if first:
        n = sum(p.numel() for p in full.parameters())
        print(f"gpt_tp: {n} params, dp={grid.dp} tp={grid.tp}, strategy {a.strategy}, "
              f"{a.optimizer} on {len(opt.plan.tasks)} matrices, {a.precision}", flush=True)
    losses, seconds = gpt.train(model, opt, loss_fn, a)
    if first:
        rate = len(losses) * a.micro * a.batch * a.seq * grid.dp / seconds
        print(f"gpt_tp: {len(losses)} steps in {seconds:.2f} s, {rate:.0f} tokens/s", flush=True)
        print(f"params hash {opt.params_hash():#018x}", flush=True)
    else:
        opt.params_hash()
    if a.verify:
        _, ref = replay(full, init, loss_fn, a.steps, a.micro, grid.dp, opt.kernel_settings,
                        opt.matrix_param_names, (a.lr, a.adamw_lr), gpt.lr_lambda_for(a.steps))
        worst = max(abs(x - y) / abs(y) for step, mine in enumerate(losses)
                    for x, y in zip(mine, ref[step][grid.dp_rank]))
        ok = worst <= a.loss_bound
        if first:
            print(f"largest relative loss difference to single process: {worst:.3g} "
                  f"(bound {a.loss_bound:g}): {'within' if ok else 'ABOVE'}", flush=True)
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
