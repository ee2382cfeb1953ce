"""One rank of a DistributedOptimizer run, launched by test_distributed.py under mpirun.

    mpirun -np N python3 dist_worker.py STRATEGY[,STRATEGY...] OPTIMIZER STEPS MICRO [bf16] OUT_DIR

Trains a small GPT-style model (plain torch.nn: Embedding, LayerNorm, GELU MLP, tied output),
initialised differently on every rank (the optimizer copies rank 0's values to all), under
canzona.torch.DistributedOptimizer with gradient accumulation (no_sync), then, on every
rank, replays the run in one process: for each step each DP rank's micro-batches in rank order,
each rank's gradient times float(1/dp) and summed in rank order (what the engine's deterministic
Reduce-Scatter computes), stepped by canzona.torch's single-process optimizers. Each rank writes
OUT_DIR/<STRATEGY>.rank<R>.json for each strategy (one after another in one job): its losses,
whether its params are bitwise the replay's, their hashes.

With `bf16` the model is cast to torch.bfloat16 (the optimizer then keeps bf16 buffers and fp32
main params) and the replay is a bf16 run written out here: each rank's bf16 gradient times
float(1/dp) in fp32, rounded to bf16; the ranks' products summed in fp32 in rank order, the sum
rounded once to bf16; the single-process optimizers step fp32 copies of the params on that
gradient widened to fp32; each param is its copy rounded to bf16. A strategy written
STRATEGY+fp32grads (bf16 only) runs with grad_reduce_in_fp32=True: each micro-batch's bf16
gradient widened and summed in fp32 (param.main_grad), times float(1/dp) and summed over the ranks
in fp32, no rounding before the step.
"""
import hashlib
import json
import os
import sys

import torch

import canzona.torch as ct
from canzona.torch.replay import replay

VOCAB, DIM, SEQ, BATCH = 48, 16, 8, 2


class TinyGpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, DIM)
        self.wpe = torch.nn.Embedding(SEQ, DIM)
        self.ln = torch.nn.LayerNorm(DIM)
        self.fc = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(3 * DIM, DIM)
        self.frozen = torch.nn.Linear(DIM, DIM)  # not trained: requires_grad False
        self.frozen.requires_grad_(False)
        self.ln_f = torch.nn.LayerNorm(DIM)
        # An int64 buffer drawn with the params: broadcast from rank 0 as bytes.
        self.register_buffer("shift", torch.randint(0, SEQ, (1,)))

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe((torch.arange(tokens.shape[1]) + self.shift) % SEQ)
        x = x + self.proj(torch.nn.functional.gelu(self.fc(self.ln(x))))
        x = x + 0.1 * self.frozen(x)
        return self.ln_f(x) @ self.wte.weight.T  # tied output layer


def batch(step, micro, rank):
    g = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def loss_of(model, step, micro, rank, micros):
    x, y = batch(step, micro, rank)
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)) / micros


def params_bytes(model):
    # bf16 has no NumPy dtype: its bits as int16.
    return b"".join((p.detach().view(torch.int16) if p.dtype == torch.bfloat16 else p.detach())
                    .numpy().tobytes() for p in model.parameters())


def main():
    bf16 = len(sys.argv) == 7 and sys.argv[5] == "bf16"
    for strategy in sys.argv[1].split(","):
        run(strategy, sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[-1], bf16,
            bf16 and strategy.endswith("+fp32grads"))


def make_model(bf16):
    m = TinyGpt()
    return m.to(torch.bfloat16) if bf16 else m


# optimizer "muon-forms": Muon with its Newton-Schulz products in bf16 and the Gram iteration.
NS_FORMS = {"ns_dtype": "bf16", "ns_algorithm": "gram"}


def run(name, optimizer, steps, micros, out_dir, bf16=False, fp32_grads=False):
    strategy = name.split("+")[0]
    # Every rank starts from its own values: the optimizer copies DP rank 0's to all (as DDP).
    torch.manual_seed(100 + int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    model = make_model(bf16)
    torch.manual_seed(100)
    init = {n: p.detach().clone() for n, p in make_model(bf16).named_parameters()}
    forms = optimizer == "muon-forms"
    opt = ct.DistributedOptimizer(model, "muon" if forms else optimizer, strategy, lr=0.02,
                                  adamw_lr=0.003, bucket_size=600, grad_reduce_in_fp32=fp32_grads,
                                  optimizer_options=dict(NS_FORMS) if forms else None)
    dp, rank = opt.plan.dp, opt.dp_rank
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    losses = []
    grads_seen = set()  # (param.grad, param.main_grad) dtypes after each backward
    for step in range(steps):
        total = 0.0
        for m in range(micros):
            if m < micros - 1:
                with opt.no_sync():
                    loss = loss_of(model, step, m, rank, micros)
                    loss.backward()
            else:
                loss = loss_of(model, step, m, rank, micros)
                loss.backward()
            total += loss.item()
            p = model.fc.weight
            grads_seen.add((str(p.grad.dtype) if p.grad is not None else "None",
                            str(getattr(p, "main_grad", p.grad).dtype)))
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(total)
    opt.finish()
    got = params_bytes(model)

    # The replay in one process.
    torch.manual_seed(100)
    ref = make_model(bf16)  # rank 0's init, buffers included
    with torch.no_grad():
        for n, p in ref.named_parameters():
            p.copy_(init[n])
    trainable = [(n, p) for n, p in ref.named_parameters() if p.requires_grad]
    # What the optimizers step: the params, or under bf16 fp32 copies of them.
    main_of = {id(p): p.detach().float().clone() if bf16 else p for _, p in trainable}
    matrix = [(n, main_of[id(p)]) for n, p in trainable
              if p.dim() == 2 and n in ("fc.weight", "proj.weight")]
    other = [(n, main_of[id(p)]) for n, p in trainable
             if n not in ("fc.weight", "proj.weight")]
    kernel = {"muon": lambda ps: ct.Muon(ps, lr=0.02, weight_decay=0.0,
                                         adjust_lr_fn="match_rms_adamw"),
              "muon-forms": lambda ps: ct.Muon(ps, lr=0.02, weight_decay=0.0,
                                               adjust_lr_fn="match_rms_adamw", **NS_FORMS),
              "shampoo": lambda ps: ct.Shampoo(ps, lr=0.02),
              "soap": lambda ps: ct.SOAP(ps, lr=0.02)}[optimizer]
    ref_opts = [kernel(matrix), ct.AdamW(other, lr=0.003)]
    ref_scheds = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (1 + s)) for o in ref_opts]
    scale = torch.tensor(1.0 / dp, dtype=torch.float32)
    for step in range(steps):
        summed = None
        for r in range(dp):
            for _, p in trainable:
                p.grad = torch.zeros_like(p)
            main_grad = [torch.zeros(p.shape) for _, p in trainable]
            for m in range(micros):
                if fp32_grads:
                    for _, p in trainable:
                        p.grad = None
                loss_of(ref, step, m, r, micros).backward()
                if fp32_grads:
                    for g, (_, p) in zip(main_grad, trainable):
                        g += p.grad.float()
            if fp32_grads:
                scaled = [g * scale for g in main_grad]
            elif bf16:
                scaled = [(p.grad.float() * scale).bfloat16().float() for _, p in trainable]
            else:
                scaled = [p.grad * scale for _, p in trainable]
            summed = scaled if summed is None else [a + b for a, b in zip(summed, scaled)]
        for (_, p), g in zip(trainable, summed):
            main_of[id(p)].grad = g.bfloat16().float() if bf16 and not fp32_grads else g
        for o in ref_opts:
            o.step()
        if bf16:
            with torch.no_grad():
                for _, p in trainable:
                    p.copy_(main_of[id(p)].bfloat16())
        for s in ref_scheds:
            s.step()
    want = params_bytes(ref)
    # canzona.torch.replay, the examples' --verify, must give the same bits (its bf16 path too).
    torch.manual_seed(100)
    start = make_model(bf16).state_dict()
    replayed, _ = replay(make_model(bf16), start,
                         lambda m, s, micro, r: loss_of(m, s, micro, r, micros), steps, micros,
                         dp, opt.kernel_settings, opt.matrix_param_names, (0.02, 0.003),
                         lambda s: 1.0 / (1 + s))
    digest = hashlib.sha256(got).hexdigest()[:16]
    report = {"rank": rank, "dp": dp, "losses": losses, "bitwise": got == want,
              "params_sha": digest, "params_hash": opt.params_hash(),
              "tasks": len(opt.plan.tasks), "precision": opt.kernel_settings["precision"],
              "replay_bitwise": got == params_bytes(replayed),
              "param_dtype": str(model.fc.weight.dtype), "grads_seen": sorted(grads_seen)}
    opt.close()
    with open(f"{out_dir}/{name}.rank{rank}.json", "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
