"""Megatron-LM's own layer-wise layout beside ours: megatron-core's code lays out the params of a
model on a DP x TP grid, and the DP owner of every param is compared with `canzona.plan`'s
`layerwise` (Megatron-LM at d98e8a64dd) and `layerwise-paper`.

    PYTHONPATH=build/python .venv/bin/python bench/peers/megatron_layerwise.py \\
        [--model qwen3-32b] [--dp 32] [--tp 8]

megatron-core is the newest release that installs on this Python (3.11): 0.16.1, pinned in
requirements.txt (0.17 and later need Python 3.12, which Debian 12 does not have). Its layer-wise
optimizer is megatron/core/optimizer/layer_wise_optimizer.py's LayerWiseDistributedOptimizer,
whose shard_params() lays out the params: every param of every optimizer's param groups sorted
by numel (stable) and dealt to the DP ranks ping-pong (0..D-1, D-1..0, ...). The script runs that
method itself, on the param groups megatron-core's own _get_param_groups makes from a module
holding the model's params as `meta` tensors (no memory, no GPU) with TP rank 0's shapes, under
Megatron's names in Megatron's named_parameters order (canzona's param list of the model): the
Muon optimizer's groups (2-D params that are not the embedding or output layer) first, then
Adam's (the others), as get_megatron_muon_optimizer chains them. torch.distributed is initialised
as a one-process gloo group (_get_param_groups all-gathers its keys); the DP group handed to
shard_params is an object answering size() = --dp and rank() = 0, which is all shard_params asks
of it, so one call gives every rank's list. Nothing of it needs a GPU; get_megatron_muon_optimizer
itself cannot run here because it asserts NVIDIA's emerging_optimizers package, which is not on
PyPI for this Python.

Prints, for each of our two strategies, how many params have the same DP owner as megatron-core's
layout (the Muon params; ours keep the element-wise params in the regular distributed optimizer's
buffer, cut between ranks, where 0.16.1 gives each to one owner), and the DP balance of each
layout: max/mean over ranks of the Muon params' numel and of Newton-Schulz FLOPs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist

import canzona

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Group:
    """What shard_params asks of a process group: its size and this process's rank in it."""

    def __init__(self, size):
        self._size = size

    def size(self):
        return self._size

    def rank(self):
        return 0


class _PgCollection:
    def __init__(self, dp):
        self.dp_cp = _Group(dp)
        self.expt_dp = _Group(1)


class _Groups:
    def __init__(self, param_groups):
        self.param_groups = param_groups


def param_list(model, tp, cli):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "params.json")
        subprocess.run([cli, "plan", "--model", model, "--tp", str(tp), "--dump-params", path],
                       check=True, capture_output=True)
        return json.load(open(path))["params"]


def local_shape(p, tp):
    shape = list(p["shape"])
    if p["tp_split_dim"] >= 0:
        shape[p["tp_split_dim"]] //= tp
    return shape


def megatron_owners(params, dp, tp):
    from megatron.core.optimizer import _get_param_groups
    from megatron.core.optimizer.layer_wise_optimizer import LayerWiseDistributedOptimizer
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    module = torch.nn.Module()
    tensors = {}
    for p in params:
        t = torch.nn.Parameter(torch.empty(local_shape(p, tp), device="meta"))
        if p["name"] in ("embedding.word_embeddings.weight", "output_layer.weight"):
            t.is_embedding_or_output_parameter = True
        tensors[p["name"]] = t
        module.register_parameter(p["name"].replace(".", "__"), t)
    linear = [t for t in tensors.values()
              if t.dim() == 2 and not getattr(t, "is_embedding_or_output_parameter", False)]
    other = [t for t in tensors.values() if not any(t is q for q in linear)]
    config = OptimizerConfig(optimizer="adam", lr=1e-3, weight_decay=0.1)
    for t in other:  # get_megatron_muon_optimizer: Muon's groups with the others frozen
        t.requires_grad = False
    muon_groups = _get_param_groups([module], config, None)
    for t in other:
        t.requires_grad = True
    for t in linear:  # then Adam's, the linear params frozen
        t.requires_grad = False
    adam_groups = _get_param_groups([module], config, None)
    for t in linear:
        t.requires_grad = True
    holder = LayerWiseDistributedOptimizer.__new__(LayerWiseDistributedOptimizer)
    holder.pg_collection = _PgCollection(dp)
    LayerWiseDistributedOptimizer.shard_params(holder, [_Groups(muon_groups),
                                                        _Groups(adam_groups)])
    owner_of = {}
    for rank, ps in enumerate(holder.dp_cp_params_list):
        for t in ps:
            owner_of[id(t)] = rank
    return {name: owner_of[id(t)] for name, t in tensors.items()}, {id(t) for t in linear}, tensors


def balance(owners, params, tp, dp):
    numel, flops = [0.0] * dp, [0.0] * dp
    for p in params:
        r = owners[p["name"]]
        rows, cols = local_shape(p, tp)
        numel[r] += rows * cols
        big, small = max(rows, cols), min(rows, cols)
        flops[r] += 5 * (4 * big * small * small + 2 * small ** 3)
    return max(numel) * dp / sum(numel), max(flops) * dp / sum(flops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen3-32b")
    ap.add_argument("--dp", type=int, default=32)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "apps", "canzona"))
    a = ap.parse_args()
    import megatron.core
    if not dist.is_initialized():
        store = dist.HashStore()
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    params = param_list(a.model, a.tp, a.cli)
    theirs, linear_ids, tensors = megatron_owners(params, a.dp, a.tp)
    muon = [p for p in params if id(tensors[p["name"]]) in linear_ids]
    print(f"{a.model} DP={a.dp} TP={a.tp}: {len(params)} params, {len(muon)} with Muon; "
          f"megatron-core {megatron.core.__version__}, torch {torch.__version__}")
    tn, tf = balance(theirs, muon, a.tp, a.dp)
    print(f"  megatron-core {megatron.core.__version__} layer-wise (numel-sorted ping-pong): "
          f"Muon numel max/mean {tn:.3f}, NS FLOPs max/mean {tf:.3f}")
    for strategy in ("layerwise", "layerwise-paper"):
        plan = canzona.plan(a.model, dp=a.dp, tp=a.tp, strategy=strategy, optimizer="muon")
        ours = {p["name"]: plan.owner(p["name"]) for p in muon}
        same = sum(ours[n] == theirs[n] for n in ours)
        on = [p for p in muon if isinstance(ours[p["name"]], int)]
        n, f = balance(ours, on, a.tp, a.dp) if len(on) == len(muon) else (float("nan"),) * 2
        print(f"  ours {strategy:16s}: same owner as megatron-core for {same} of {len(muon)} "
              f"Muon params; Muon numel max/mean {n:.3f}, NS FLOPs max/mean {f:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
