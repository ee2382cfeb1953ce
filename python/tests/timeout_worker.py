"""A hung rank under DistributedOptimizer(collective_timeout=5): rank 1 stops after its first
step (sleeps), rank 0's next step waits on it and must end the process in one line, exit 2.

    mpirun -np 2 python3 timeout_worker.py OUT_DIR
"""
import sys
import time

import torch

import canzona.torch as ct

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4))
opt = ct.DistributedOptimizer(model, "muon", "lb-asc", collective_timeout=5)
rank = ct.parallel.grid().dp_rank
for step in range(2):
    if step == 1 and rank == 1:
        time.sleep(120)  # hung; mpirun ends it once rank 0 has exited
    model(torch.ones(3, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
print("rank", rank, "finished: the timeout did not fire", flush=True)
