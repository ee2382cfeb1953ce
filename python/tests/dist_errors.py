"""Bad input to DistributedOptimizer under mpirun: every rank must raise the same exception.

    mpirun -np 2 python3 dist_errors.py CASE[,CASE...] OUT_DIR

Runs the cases one after another in one job; each rank writes OUT_DIR/rank<R>.json mapping each
case to "<ExceptionType>: <message>" or "no error".
"""
import json
import os
import sys

import torch

import canzona.torch as ct


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4))


def run(case):
    if case == "world":
        ct.DistributedOptimizer(model(), dp=3)
    elif case == "dtype":
        ct.DistributedOptimizer(model().double())
    elif case == "noncontiguous":
        m = model()
        m[0].weight = torch.nn.Parameter(torch.randn(8, 8).t())
        ct.DistributedOptimizer(m)
    elif case == "unknown":
        ct.DistributedOptimizer(model(), momentum=0.9)
    elif case == "option":
        ct.DistributedOptimizer(model(), optimizer_options={"momentum": 1.5})
    elif case == "strategy":
        ct.DistributedOptimizer(model(), strategy="zero")
    elif case == "no_backward":
        ct.DistributedOptimizer(model()).step()
    elif case == "unused":
        m = model()
        opt = ct.DistributedOptimizer(m)
        m[0](torch.randn(2, 8)).sum().backward()  # m[1] gets no gradient
        opt.step()
    elif case == "resized":
        m = model()
        opt = ct.DistributedOptimizer(m)
        m[0].weight.data = torch.randn(9, 8)
        m(torch.randn(2, 8)).sum().backward()
        opt.step()
    elif case == "replaced":
        m = model()
        opt = ct.DistributedOptimizer(m)
        m[1].weight.data = torch.randn(4, 8)
        m(torch.randn(2, 8)).sum().backward()
        opt.step()
    elif case == "added":
        m = model()
        opt = ct.DistributedOptimizer(m)
        m.extra = torch.nn.Linear(4, 4)
        m(torch.randn(2, 8)).sum().backward()
        opt.step()
    elif case == "view_numel":
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 2), torch.nn.Flatten(), torch.nn.Linear(4, 2))
        ct.DistributedOptimizer(m, matrix_view=lambda n, p: (4, 13) if p.dim() == 4
                                else None)
    elif case == "view_missing":
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 2), torch.nn.Flatten(), torch.nn.Linear(4, 2))
        ct.DistributedOptimizer(m, is_matrix=lambda n, p: n.endswith("weight"))
    elif case == "expert_no_ep":
        m = model()
        ct.moe.mark_experts(m[1])
        ct.DistributedOptimizer(m)
    elif case == "mixed_dtypes":
        m = model()
        m[1].to(torch.bfloat16)
        ct.DistributedOptimizer(m)
    elif case == "rank_dtypes":
        m = model()
        if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "1":
            m.to(torch.bfloat16)
        ct.DistributedOptimizer(m)
    elif case == "rank_grad_reduce":
        rank1 = os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "1"
        ct.DistributedOptimizer(model().to(torch.bfloat16), grad_reduce_in_fp32=rank1)
    elif case == "grad_reduce":
        ct.DistributedOptimizer(model().to(torch.bfloat16), grad_reduce_in_fp32=1)
    elif case == "zero_stage":
        ct.DistributedOptimizer(model(), zero_stage=2)
    elif case == "collective_timeout":
        ct.DistributedOptimizer(model(), collective_timeout=0)
    elif case == "zero_strategy":
        ct.DistributedOptimizer(model(), strategy="sc", zero_stage=3)
    else:
        raise SystemExit(f"unknown case {case}")


def main():
    cases, out = sys.argv[1].split(","), sys.argv[2]
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    results = {}
    for case in cases:  # "world" first: the others make the grid
        try:
            run(case)
            results[case] = "no error"
        except Exception as e:  # noqa: BLE001 - the test reads the type and message
            results[case] = f"{type(e).__name__}: {e}"
        for opt in list(ct.distributed._LIVE):
            opt.close()
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
