"""One rank of a DistributedOptimizer run on a Hugging Face model, launched by test_hf.py.

    mpirun -np N python hf_worker.py ARCH STRATEGY[,STRATEGY...] STEPS OUT_DIR
    mpirun -np N python hf_worker.py ARCH save STEPS OUT_DIR

ARCH is qwen3 (transformers' Qwen3ForCausalLM) or llama (LlamaForCausalLM), built from a small
config with transformers' own random init (no weights are downloaded), seeded differently on every
rank (the optimizer copies rank 0's values to all, as DDP does). Each strategy trains STEPS steps
of two micro-batches per rank (the first under no_sync) with the loss transformers computes from
labels, then the run is replayed in one process (canzona.torch.replay: every DP rank's
micro-batches in rank order, summed as the engine reduces). Each rank writes
OUT_DIR/<ARCH>.<STRATEGY>.rank<R>.json: whether its params are bitwise the replay's, their hashes.

`save`: trains STEPS steps under lb-asc, DistributedOptimizer.save(OUT_DIR/ckpt), then on every
rank transformers' from_pretrained of the checkpoint and a fresh model (another init) loaded by a
DistributedOptimizer under sc; OUT_DIR/<ARCH>.save.rank<R>.json says whether each holds the
trained params bit for bit. Then the same with the model cast to torch.bfloat16 (one step,
OUT_DIR/ckpt-bf16): from_pretrained with its default dtype "auto" must give bfloat16 params, the
trained bits.
"""
import hashlib
import json
import os
import sys

import torch
import transformers

import canzona.torch as ct
from canzona.torch.replay import replay

VOCAB, SEQ, BATCH, MICROS = 96, 12, 2, 2


def config(arch):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  max_position_embeddings=64, tie_word_embeddings=False)
    if arch == "qwen3":
        return transformers.Qwen3Config(**common)
    if arch == "llama":
        return transformers.LlamaConfig(**common)
    raise SystemExit(f"hf_worker.py: unknown ARCH {arch!r} (qwen3 or llama)")


def model_of(arch, seed):
    torch.manual_seed(seed)
    cfg = config(arch)
    cls = transformers.Qwen3ForCausalLM if arch == "qwen3" else transformers.LlamaForCausalLM
    return cls(cfg)


def loss_fn(model, step, micro, rank):
    g = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return model(input_ids=tokens, labels=tokens).loss / MICROS


def params_bytes(model):
    return b"".join(p.detach().numpy().tobytes() for p in model.parameters())


def run(arch, strategy, steps, out_dir):
    model = model_of(arch, 100 + int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    init = {k: v.clone() for k, v in model_of(arch, 100).state_dict().items()}
    opt = ct.DistributedOptimizer(model, "muon", strategy, lr=0.02, adamw_lr=0.003,
                                  bucket_size=4000)
    dp, rank = opt.plan.dp, opt.dp_rank
    lam = lambda s: 1.0 / (1 + s)  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    for step in range(steps):
        for m in range(MICROS):
            if m < MICROS - 1:
                with opt.no_sync():
                    loss_fn(model, step, m, rank).backward()
            else:
                loss_fn(model, step, m, rank).backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    opt.finish()
    got = params_bytes(model)
    ref, _ = replay(model_of(arch, 100), init, loss_fn, steps, MICROS, dp, opt.kernel_settings,
                    opt.matrix_param_names, (0.02, 0.003), lam)
    report = {"rank": rank, "dp": dp, "bitwise": got == params_bytes(ref),
              "params_sha": hashlib.sha256(got).hexdigest()[:16],
              "params_hash": opt.params_hash(), "tasks": len(opt.plan.tasks),
              "matrices": opt.matrix_param_names, "changed": got != params_bytes(
                  model_of(arch, 100))}
    opt.close()
    with open(f"{out_dir}/{arch}.{strategy}.rank{rank}.json", "w") as f:
        json.dump(report, f)


def same_params(a, b):
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    bits = lambda t: t.detach().view(  # noqa: E731
        torch.int16 if t.dtype == torch.bfloat16 else torch.int32)
    return sorted(pa) == sorted(pb) and all(
        pa[n].dtype == pb[n].dtype and torch.equal(bits(pa[n]), bits(pb[n])) for n in pa)


def save_and_load(arch, steps, out_dir):
    model = model_of(arch, 100)
    opt = ct.DistributedOptimizer(model, "muon", "lb-asc", lr=0.02, adamw_lr=0.003,
                                  bucket_size=4000)
    rank = opt.dp_rank
    for step in range(steps):
        loss_fn(model, step, 0, rank).backward()
        opt.step()
        opt.zero_grad()
    path = opt.save(f"{out_dir}/ckpt")
    opt.close()
    cls = type(model)
    loaded = cls.from_pretrained(path)
    fresh = model_of(arch, 7)
    opt2 = ct.DistributedOptimizer(fresh, "muon", "sc", lr=0.02, adamw_lr=0.003)
    opt2.load(path)
    report = {"path": path, "from_pretrained": same_params(loaded, model),
              "load": same_params(fresh, model), "step_count": opt2.step_count,
              "changed": not same_params(model, model_of(arch, 100))}
    opt2.close()
    model = model_of(arch, 100)
    model.config.dtype = torch.float32  # as from_pretrained of an fp32 checkpoint records it
    model = model.to(torch.bfloat16)
    opt = ct.DistributedOptimizer(model, "muon", "lb-asc", lr=0.02, adamw_lr=0.003,
                                  bucket_size=4000)
    loss_fn(model, 0, 0, rank).backward()
    opt.step()
    path = opt.save(f"{out_dir}/ckpt-bf16")
    opt.close()
    loaded = cls.from_pretrained(path)
    report["bf16_from_pretrained"] = same_params(loaded, model)
    report["bf16_dtype"] = str(next(loaded.parameters()).dtype)
    with open(f"{out_dir}/{arch}.save.rank{rank}.json", "w") as f:
        json.dump(report, f)


def main():
    torch.set_num_threads(1)
    if sys.argv[2] == "save":
        save_and_load(sys.argv[1], int(sys.argv[3]), sys.argv[4])
        return
    for strategy in sys.argv[2].split(","):
        run(sys.argv[1], strategy, int(sys.argv[3]), sys.argv[4])


if __name__ == "__main__":
    main()
