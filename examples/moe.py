"""A mixture-of-experts GPT written with plain torch.nn, trained under expert parallelism with
canzona.torch.DistributedOptimizer.

    mpirun --allow-run-as-root -np 4 env PYTHONPATH=build/python .venv/bin/python \\
        examples/moe.py --ep 2 --strategy lb-asc --steps 30

gpt.py's model with every block's MLP replaced by a sparse MoE block: a router (Hugging Face
Qwen3-MoE's top-k softmax routing) and --experts SwiGLU experts, --ep of the EP group's ranks each
holding experts / ep of them (canzona.torch.parallel.init(ep=...): Megatron's expert groups,
expert DP = ranks / ep). Tokens travel to their experts' ranks and back through the dropless
dispatch and combine All-to-Alls of canzona.torch.moe; the loss adds --aux-coef x the
load-balancing loss. The experts (marked with canzona.torch.moe.mark_experts) go to the
optimizer's expert engine, Muon on each expert's two matrices, planned over expert DP; the rest to
the dense one. Each EP rank's experts start from their global index's own random init. Rank 0
prints the loss, tokens/s and the params hash, the same under sc, asc and lb-asc, ZeRO-1 and
ZeRO-3 (tests: python/tests/test_moe.py, test_examples.py); --save-dir writes a checkpoint
holding every expert under its global index. --precision bf16 trains in torch.bfloat16 (the
All-to-Alls move bf16 rows; the router's softmax stays fp32).
"""
import os
import sys

import torch

import canzona.torch as ct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import Block, Gpt, corpus, parse_args, train  # noqa: E402


class Expert(torch.nn.Module):
    """One SwiGLU expert: fc2(silu(gate x) * up x), fc1 = [gate; up]."""

    def __init__(self, dim, ffn):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, 2 * ffn, bias=False)
        self.fc2 = torch.nn.Linear(ffn, dim, bias=False)

    def forward(self, x):
        gate, up = self.fc1(x).chunk(2, dim=1)
        return self.fc2(torch.nn.functional.silu(gate) * up)


class Moe(torch.nn.Module):
    """The sparse MLP: this EP rank's experts (local index i = global expert ep_rank x local +
    i), each initialised from its global index, so every EP rank holds different experts."""

    def __init__(self, dim, ffn, experts, top_k):
        super().__init__()
        self.num_experts, self.top_k = experts, top_k
        self.router = torch.nn.Linear(dim, experts, bias=False)
        local = experts // ct.parallel.ep_size()
        self.experts = torch.nn.ModuleList(Expert(dim, ffn) for _ in range(local))
        ct.moe.mark_experts(self.experts)
        self.routing = None  # the last forward's, for the load-balancing loss

    @torch.no_grad()
    def init_experts(self, seed):
        """N(0, 0.02) weights drawn from (seed, the expert's global index)."""
        first = ct.parallel.ep_rank() * len(self.experts)
        for i, expert in enumerate(self.experts):
            g = torch.Generator().manual_seed(seed * 7919 + first + i)
            for p in expert.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        self.routing = ct.moe.route(flat, self.router.weight, self.top_k)
        out = ct.moe.experts_forward(flat, self.routing, self.experts, self.num_experts)
        return out.view(x.shape)


def make_model(a):
    torch.manual_seed(a.seed)

    class MoeBlock(Block):
        def __init__(self, dim, heads):
            super().__init__(dim, heads)
            del self.fc, self.fc_out
            self.moe = Moe(dim, a.ffn, a.experts, a.top_k)

        def mlp(self, x):
            return self.moe(x)

    model = Gpt(256, a.seq, a.dim, a.layers, a.heads, block=MoeBlock)
    # Gpt's init drew the experts from the shared seed: draw them again from their own.
    for layer, block in enumerate(model.blocks):
        block.moe.init_experts(a.seed * 1_000 + layer)
    return model.to(getattr(a, "dtype", torch.float32))  # --precision bf16: torch.bfloat16


def make_loss_fn(tokens, a):
    """loss_fn(model, step, micro, dp_rank): cross-entropy of that rank's micro-batch plus
    aux_coef x the load-balancing loss of every MoE layer, over the micro-batches."""
    def loss_fn(model, step, micro, rank):
        g = torch.Generator().manual_seed(a.seed * 1_000_003 + step * 1009 + micro * 31 + rank)
        starts = torch.randint(0, len(tokens) - a.seq - 1, (a.batch,), generator=g)
        chunk = torch.stack([tokens[s:s + a.seq + 1] for s in starts.tolist()])
        logits = model(chunk[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256),
                                                 chunk[:, 1:].reshape(-1))
        balance = ct.moe.load_balancing_loss([b.moe.routing for b in model.blocks], a.experts)
        return (loss + a.aux_coef * balance) / a.micro
    return loss_fn


def main():
    a = parse_args(__doc__.split("\n")[0], precision=True, ep=2, experts=4, top_k=2, ffn=128,
                   aux_coef=0.01, zero_stage=1)
    ct.parallel.init(ep=a.ep)
    model = make_model(a)
    opt = ct.DistributedOptimizer(model, a.optimizer, a.strategy, lr=a.lr, adamw_lr=a.adamw_lr,
                                  zero_stage=a.zero_stage, experts_per_token=a.top_k,
                                  grad_reduce_in_fp32=a.grad_reduce_in_fp32)
    g = ct.parallel.grid()
    rank, dp = opt.dp_rank, opt.plan.dp
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"moe: {n} params on rank 0 ({a.experts} experts per layer, top-{a.top_k}, "
              f"{a.experts // g.ep} per EP rank), dp={dp}, ep={g.ep}, expert dp={g.edp}, "
              f"strategy {a.strategy}, ZeRO-{a.zero_stage}, {a.optimizer} on "
              f"{len(opt.plan.tasks)} dense matrices, {a.precision}", flush=True)
    losses, seconds = train(model, opt, make_loss_fn(corpus(), a), a)
    hash_ = opt.params_hash()
    if rank == 0:
        rate = len(losses) * a.micro * a.batch * a.seq * dp / seconds
        print(f"moe: {len(losses)} steps in {seconds:.2f} s, {rate:.0f} tokens/s", flush=True)
        print(f"params hash {hash_:#018x}", flush=True)


if __name__ == "__main__":
    main()
