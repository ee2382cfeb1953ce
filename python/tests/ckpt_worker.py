"""DistributedOptimizer.save/load under mpirun, on examples/gpt_tp.py's GPT (tiny, random tokens).

    mpirun -np N python3 ckpt_worker.py MODE TP STRATEGY CKPT_DIR OUT_DIR

train:  2 steps, the matrix group's lr changed to 0.01, save into CKPT_DIR, 2 more steps.
resume: a model of another seed, load CKPT_DIR (its newest checkpoint), save again at the same
        step into OUT_DIR/resaved, 2 more steps; at TP=1 also reads model.safetensors with the
        plain reader below and compares every param with it, and tries bad loads.
MODE train:bf16 / resume:bf16: the same with the model cast to torch.bfloat16.
Each rank writes OUT_DIR/<mode>.rank<R>.json: the losses of steps 3 and 4 (float.hex), its params
hash, the SHA-256 of the files it saved (from trainer.json), model.safetensors' dtypes and what
the checks found.
"""
import json
import os
import struct
import sys

import torch

import canzona.torch as ct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
from gpt_tp import GptTp, make_loss_fn  # noqa: E402

VOCAB, SEQ, DIM, LAYERS, HEADS = 64, 8, 16, 1, 2


def read_safetensors(path):
    """name -> float32 tensor, from the format's definition: an 8-byte little-endian header
    length, a JSON header of {name: {dtype, shape, data_offsets}}, then the data (BF16: the upper
    16 bits of a float32, widened here by shifting them up)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] in ("F32", "BF16"), entry
        begin, end = entry["data_offsets"]
        data = bytearray(raw[8 + n + begin:8 + n + end])
        if entry["dtype"] == "BF16":
            bits = torch.frombuffer(data, dtype=torch.int16).to(torch.int32) << 16
            out[name] = bits.view(torch.float32).view(entry["shape"])
        else:
            out[name] = torch.frombuffer(data, dtype=torch.float32).view(entry["shape"])
    return out


def dtypes_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sorted({e["dtype"] for k, e in header.items() if k != "__metadata__"})


def make(tp, strategy, seed, dtype=torch.float32, **kw):
    ct.parallel.init(tp=tp)
    torch.manual_seed(seed)
    full = GptTp(VOCAB, SEQ, DIM, LAYERS, HEADS, parallel=False).to(dtype)
    model = GptTp(VOCAB, SEQ, DIM, LAYERS, HEADS, parallel=True).to(dtype)
    ct.copy_shards(full, model)
    return model, ct.DistributedOptimizer(model, kw.pop("optimizer", "muon"), strategy, lr=0.02,
                                          adamw_lr=3e-3, **kw)


def steps(model, opt, loss_fn, first, count):
    losses = []
    for step in range(first, first + count):
        loss = loss_fn(model, step, 0, opt.dp_rank)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item().hex())
    opt.finish()
    return losses


def error_of(fn):
    try:
        fn()
    except (ValueError, RuntimeError) as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


def main():
    mode, tp, strategy, ckpt, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:6]
    dtype = torch.bfloat16 if mode.endswith(":bf16") else torch.float32
    mode = mode.split(":")[0]
    tokens = torch.randint(0, VOCAB, (4000,), generator=torch.Generator().manual_seed(3))
    loss_fn = make_loss_fn(tokens, SEQ, 2, 1, 5)
    report = {}
    if mode == "train":
        model, opt = make(tp, strategy, 1, dtype)
        steps(model, opt, loss_fn, 0, 2)
        opt.param_groups[0]["lr"] = 0.01
        saved = opt.save(ckpt)
    else:
        model, opt = make(tp, strategy, 2, dtype)
        report["loaded"] = opt.load(ckpt)
        report["lr"] = [g["lr"] for g in opt.param_groups]
        saved = opt.save(os.path.join(out, "resaved"))
        if tp == 1:
            stored = read_safetensors(os.path.join(saved, "model.safetensors"))
            names = [n for n, _ in model.named_parameters()]
            report["names_match"] = sorted(stored) == sorted(names)
            report["values_match"] = all(
                torch.equal(p.detach().float().view(torch.int32), stored[n].view(torch.int32))
                for n, p in model.named_parameters())
            # What load() gave: the loaded checkpoint's weights (BF16 ones widened).
            loaded = read_safetensors(os.path.join(report["loaded"], "model.safetensors"))
            report["loaded_match"] = all(
                torch.equal(p.detach().float().view(torch.int32), loaded[n].view(torch.int32))
                for n, p in model.named_parameters())
            report["errors"] = {
                "missing": error_of(lambda: opt.load(os.path.join(out, "nowhere"))),
                "optimizer": error_of(lambda: make(tp, strategy, 2, optimizer="shampoo")[1]
                                      .load(ckpt)),
            }
            other = torch.nn.Sequential(torch.nn.Linear(DIM, DIM))
            report["errors"]["model"] = error_of(
                lambda: ct.DistributedOptimizer(other, "muon", strategy).load(ckpt))
    with open(os.path.join(saved, "trainer.json")) as f:
        files = json.load(f)["files"]
    report["sha"] = {k: files[k]["sha256"] for k in ("model.safetensors",
                                                    "optimizer.safetensors")}
    report["model_dtypes"] = dtypes_of(os.path.join(saved, "model.safetensors"))
    report["losses"] = steps(model, opt, loss_fn, 2, 2)
    report["params_hash"] = opt.params_hash()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    with open(os.path.join(out, f"{sys.argv[1].replace(':', '.')}.rank{rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
