"""One rank of DistributedOptimizer on examples/moe.py's mixture-of-experts GPT under expert
parallelism, launched by test_moe.py under mpirun:

    mpirun -np N python moe_worker.py EP RUNS STEPS OUT_DIR
    mpirun -np 2 python moe_worker.py errors OUT_DIR
    mpirun -np 2 python moe_worker.py ops OUT_DIR

RUNS: STRATEGY:ZERO_STAGE[:bf16],... (bf16: the model cast to torch.bfloat16). Each run trains
the same init (every EP rank's experts drawn from their global index) for STEPS steps of two micro-batches (the first under no_sync) and writes
OUT_DIR/ep<EP>.<STRATEGY>.z<Z>[.bf16].rank<R>.json: the SHA-256 of this rank's params, params_hash,
the loss, the expert bytes held, and (EP = 1) whether the params are bitwise the single-process
replay (canzona.torch.replay): at EP 1 each rank's experts see only its own tokens, so the expert
engine's sum over expert DP (= DP) of gradients scaled by 1/DP is the replay's. The lb-asc ZeRO-3
run saves a checkpoint and loads it under sc, ZeRO-1 (reload_bitwise), and both take one more
step (resume_bitwise). "errors": the bad input of
a MoE model, each case's message in OUT_DIR/errors.rank<R>.json. "ops" (EP 2): canzona.torch.moe's
route, dispatch and combine and their backward against a float64 plain loop over every token and
choice with all four experts in one process, routing ties and the load-balancing loss against
hand values, in OUT_DIR/ops.rank<R>.json.
"""
import argparse
import hashlib
import json
import os
import sys

import torch

import canzona.torch as ct
from canzona.torch.replay import replay

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import moe  # noqa: E402

ARGS = argparse.Namespace(seq=8, dim=16, layers=2, heads=2, experts=4, top_k=2, ffn=16, batch=2,
                          micro=2, seed=3, aux_coef=0.01, lr=0.02, adamw_lr=0.003)


def tokens():
    g = torch.Generator().manual_seed(11)
    return torch.randint(0, 256, (4096,), generator=g)


def params_bytes(model):
    # bf16 has no NumPy dtype: its bits as int16.
    return b"".join((p.detach().view(torch.int16) if p.dtype == torch.bfloat16 else p.detach())
                    .numpy().tobytes() for p in model.parameters())


def train(model, opt, loss, steps, first=0):
    rank = opt.dp_rank
    for step in range(first, first + steps):
        for m in range(ARGS.micro):
            if m < ARGS.micro - 1:
                with opt.no_sync():
                    loss(model, step, m, rank).backward()
            else:
                value = loss(model, step, m, rank)
                value.backward()
        opt.step()
        opt.zero_grad()
    return value.item()


def run(ep, strategy, zero_stage, steps, out_dir, bf16=False):
    args = argparse.Namespace(**vars(ARGS), dtype=torch.bfloat16 if bf16 else torch.float32)
    model = moe.make_model(args)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = ct.DistributedOptimizer(model, "muon", strategy, lr=ARGS.lr, adamw_lr=ARGS.adamw_lr,
                                  bucket_size=2000, zero_stage=zero_stage,
                                  experts_per_token=ARGS.top_k)
    # DP rank 0's values copied to every rank at construction: an expert's within its expert DP
    # group only, so each rank still holds its own EP rank's init.
    with opt.gathered():
        init_kept = params_bytes(model) == params_bytes(moe.make_model(args))
    loss = moe.make_loss_fn(tokens(), ARGS)
    last = train(model, opt, loss, steps)
    params_hash = opt.params_hash()
    held = opt.memory_held()
    with opt.gathered():
        got = params_bytes(model)
    g = ct.parallel.grid()
    report = {"rank": g.dp_rank, "ep_rank": g.ep_rank, "edp_rank": g.edp_rank,
              "params_sha": hashlib.sha256(got).hexdigest()[:16], "params_hash": params_hash,
              "loss": last, "held": held, "matrix": opt.matrix_param_names,
              "init_kept": init_kept, "dtype": str(next(model.parameters()).dtype)}
    # The optimizer state round trip (experts' state goes back to the expert engine).
    saved = opt.state_dict()
    opt.load_state_dict(saved)
    report["expert_states"] = sum(".experts." in s["param"] for s in saved["state"])
    if ep == 1:
        ref, _ = replay(moe.make_model(args), init, loss, steps, ARGS.micro, opt.plan.dp,
                        opt.kernel_settings, opt.matrix_param_names, (ARGS.lr, ARGS.adamw_lr))
        report["bitwise"] = got == params_bytes(ref)
    if strategy == "lb-asc" and zero_stage == 3:
        report["checkpoint"] = opt.save(os.path.join(out_dir, f"ep{ep}-ckpt{'-bf16' * bf16}"))
        other = moe.make_model(args)
        reload = ct.DistributedOptimizer(other, "muon", "sc", bucket_size=2000,
                                         experts_per_token=ARGS.top_k)
        reload.load(report["checkpoint"])
        reload.finish()
        report["reload_bitwise"] = params_bytes(other) == got
        # One more step from the checkpoint and from the run itself: the same params only when
        # the load brought back what the params alone do not hold (main params, optimizer state).
        train(other, reload, loss, 1, first=steps)
        reload.finish()
        train(model, opt, loss, 1, first=steps)
        with opt.gathered():
            report["resume_bitwise"] = params_bytes(other) == params_bytes(model)
        reload.close()
    opt.close()
    name = f"ep{ep}.{strategy}.z{zero_stage}{'.bf16' if bf16 else ''}"
    with open(f"{out_dir}/{name}.rank{g.dp_rank}.json", "w") as f:
        json.dump(report, f)


class Experts(torch.nn.Module):
    def __init__(self, shape, names="experts"):
        super().__init__()
        self.add_module(names, torch.nn.ModuleList(torch.nn.Linear(*shape) for _ in range(2)))
        self.router = torch.nn.Linear(4, 4)
        ct.moe.mark_experts(getattr(self, names))


def errors(out_dir):
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    results = {}

    def attempt(case, fn):
        try:
            fn()
            results[case] = "no error"
        except (ValueError, TypeError) as e:
            results[case] = f"{type(e).__name__}: {e}"

    attempt("ep_divides", lambda: ct.parallel.init(ep=3))
    attempt("etp_alone", lambda: ct.parallel.init(etp=2))
    ct.parallel.init(ep=2)
    attempt("shapes_differ",
            lambda: ct.DistributedOptimizer(Experts((4, 4 if rank == 0 else 5))))
    attempt("no_index", lambda: ct.DistributedOptimizer(Experts((4, 4), names="pool")))
    attempt("per_token", lambda: ct.DistributedOptimizer(Experts((4, 4)), experts_per_token=9))
    attempt("route_k", lambda: ct.moe.route(torch.zeros(3, 4), torch.zeros(4, 4), 5))
    with open(f"{out_dir}/errors.rank{rank}.json", "w") as f:
        json.dump(results, f)


def ops(out_dir):
    """Four SwiGLU experts (two per EP rank) and a router, the same on both ranks; each rank
    routes its own 6 tokens. The reference: every token of both ranks, each of its k = 2
    choices, one expert at a time in float64, then the gradient of sum(out * cotangent)."""
    ct.parallel.init(ep=2)
    g = ct.parallel.grid()
    rank = g.ep_rank
    dim, ffn, experts, k = 4, 3, 4, 2

    def draw(seed, *shape):
        return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))

    fc1 = [draw(10 + e, 2 * ffn, dim) for e in range(experts)]
    fc2 = [draw(20 + e, dim, ffn) for e in range(experts)]
    router = draw(30, experts, dim)
    xs = [draw(40 + r, 6, dim) for r in range(2)]
    cots = [draw(50 + r, 6, dim) for r in range(2)]

    class Expert(torch.nn.Module):
        def __init__(self, e):
            super().__init__()
            self.fc1 = torch.nn.Parameter(fc1[e].clone())
            self.fc2 = torch.nn.Parameter(fc2[e].clone())

        def forward(self, x):
            gate, up = (x @ self.fc1.t()).chunk(2, dim=1)
            return (torch.nn.functional.silu(gate) * up) @ self.fc2.t()

    local = [Expert(2 * rank + i) for i in range(2)]
    routing = ct.moe.route(xs[rank], router, k)
    out = ct.moe.experts_forward(xs[rank], routing, local, experts)
    (out * cots[rank]).sum().backward()

    # The reference in float64: every rank's tokens through every expert they chose.
    w1 = [w.double().requires_grad_() for w in fc1]
    w2 = [w.double().requires_grad_() for w in fc2]
    total, want = 0.0, None
    for r in range(2):
        probs = torch.softmax(xs[r].double() @ router.double().t(), dim=1)
        rows = []
        for n in range(6):
            order = sorted(range(experts), key=lambda e: (-probs[n, e].item(), e))[:k]
            weights = probs[n, order] / probs[n, order].sum()
            y = torch.zeros(dim, dtype=torch.float64)
            for j, e in enumerate(order):
                h = w1[e] @ xs[r][n].double()
                y = y + weights[j] * (w2[e] @ (torch.nn.functional.silu(h[:ffn]) * h[ffn:]))
            rows.append(y)
        y = torch.stack(rows)
        if r == rank:
            want = y.detach()
        total = total + (y * cots[r].double()).sum()
    total.backward()

    def rel(a, b):
        return ((a.double() - b).abs().max() / b.abs().max()).item()

    report = {"out": rel(out, want),
              "fc1_grad": max(rel(m.fc1.grad, w1[2 * rank + i].grad) for i, m in enumerate(local)),
              "fc2_grad": max(rel(m.fc2.grad, w2[2 * rank + i].grad) for i, m in enumerate(local))}
    # Ties go to the lower expert; weights renormalised to 1 (hand values: uniform probs).
    tie = ct.moe.route(torch.zeros(2, dim), torch.zeros(experts, dim), 3)
    report["tie_experts"] = tie.experts.tolist()
    report["tie_weights"] = tie.weights.tolist()
    # By hand: probs uniform (P_e = 1/4), both tokens choose experts 0 and 1, so the shares of
    # choices per token are F = [1, 1, 0, 0] and E x sum_e F_e P_e = 4 x (0.25 + 0.25) = 2.
    report["balance"] = ct.moe.load_balancing_loss(
        [ct.moe.route(torch.zeros(2, dim), torch.zeros(experts, dim), 2)], experts).item()
    with open(f"{out_dir}/ops.rank{rank}.json", "w") as f:
        json.dump(report, f)


def main():
    if sys.argv[1] in ("errors", "ops"):
        (errors if sys.argv[1] == "errors" else ops)(sys.argv[2])
        return
    ep, runs, steps, out_dir = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    ct.parallel.init(ep=ep)
    for item in runs.split(","):
        strategy, zero_stage, *precision = item.split(":")
        run(ep, strategy, int(zero_stage), steps, out_dir, precision == ["bf16"])


if __name__ == "__main__":
    main()
