"""examples/gpt.py's model (or examples/vit.py's torchvision ViT, --model vit), data and loop timed
under two backends, one rank per process:

  canzona  canzona.torch.DistributedOptimizer (Muon on the blocks' matrices, AdamW on the rest)
  ddp      torch.nn.parallel.DistributedDataParallel over gloo (gradient_as_bucket_view, 25 MB
           buckets, PyTorch's defaults) + the distributed Muon of bench/train/torch_ddp_muon.py
           (Keller Jordan's recipe: rank r orthogonalises every N-th matrix of each shape, then
           all-gathers; a 4-D conv filter as its 2-D view, as Keller Jordan's Muon does) on the
           same matrices as canzona's, torch.optim.AdamW on the rest

Both with the same hyperparameters (Muon lr 0.02, momentum 0.95 Nesterov, 5 Newton-Schulz steps,
update scale 0.2 sqrt(max(rows, cols)); AdamW lr 3e-3, betas 0.9/0.999, eps 1e-8, weight decay
0.01) and one thread per rank. Run under mpirun by bench/python/gpt-vs-ddp.sh; rank 0 prints one
JSON line: the median step time after --warmup steps and tokens/s (ViT: images/s) as "per_s".
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["canzona", "ddp"], required=True)
    ap.add_argument("--model", choices=["gpt", "vit"], default="gpt")
    ap.add_argument("--zero-stage", type=int, default=1)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--patch", type=int, default=4)
    ap.add_argument("--strategy", default="lb-asc")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--micro", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    gpt = load("gpt", "examples/gpt.py")
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    view = None
    if a.model == "gpt":
        loss_fn = gpt.make_loss_fn(gpt.corpus(), a.seq, a.batch, a.micro, 1)
        torch.manual_seed(1)
        model = gpt.Gpt(256, a.seq, a.dim, a.layers, a.heads)
        per_item = a.seq  # tokens
    else:
        vit = load("vit_example", "examples/vit.py")
        a.seed = 1
        loss_fn = vit.make_loss_fn(a.image, a.batch, a.micro, 1)
        model = vit.make_model(a)
        view = vit.conv_view
        per_item = 1  # images
    if a.backend == "canzona":
        import canzona.torch as ct
        opt = ct.DistributedOptimizer(model, "muon", a.strategy, lr=0.02, adamw_lr=3e-3,
                                      matrix_view=view, zero_stage=a.zero_stage)
        opts, net, sync = [opt], model, opt.no_sync
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp_muon = load("torch_ddp_muon", "bench/train/torch_ddp_muon.py")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank,
                                world_size=world)
        net = DDP(model, gradient_as_bucket_view=True)
        if a.model == "gpt":
            chosen = {n for n, p in model.named_parameters()
                      if p.dim() == 2 and n.startswith("blocks.")}
        else:  # canzona's matrices (planning needs no MPI)
            import canzona
            chosen = {t["name"] for t in canzona.plan(model, matrix_view=view).tasks}
        named = sorted((n, p) for n, p in model.named_parameters() if n in chosen)
        matrix_ids = {id(p) for _, p in named}
        other = [p for p in model.parameters() if id(p) not in matrix_ids]
        opts = [ddp_muon.DistMuon([p for _, p in named], lr=0.02, rank=rank, world=world),
                torch.optim.AdamW(other, lr=3e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01)]
        sync = net.no_sync
    times, losses = [], []
    for step in range(a.steps):
        start = time.perf_counter()
        total = 0.0
        for micro in range(a.micro):
            if micro < a.micro - 1:
                with sync():
                    loss = loss_fn(net, step, micro, rank)
                    loss.backward()
            else:
                loss = loss_fn(net, step, micro, rank)
                loss.backward()
            total += loss.item()
        for o in opts:
            o.step()
        for o in opts:
            o.zero_grad()
        times.append(time.perf_counter() - start)
        losses.append(total)
    if a.backend == "canzona":
        opts[0].finish()
    step_s = statistics.median(times[a.warmup:])
    items = a.micro * a.batch * per_item * world
    if rank == 0:
        print(json.dumps({"backend": a.backend, "model": a.model,
                          "strategy": a.strategy if a.backend == "canzona" else "ddp+dist-muon",
                          "zero_stage": a.zero_stage if a.backend == "canzona" else None,
                          "ranks": world, "median_step_s": step_s, "per_s": items / step_s,
                          "unit": "tokens" if a.model == "gpt" else "images",
                          "first_loss": losses[0],
                          "last_loss": losses[-1], "steps": a.steps, "warmup": a.warmup}),
              flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
