#!/usr/bin/python3
"""An independent reader of `canzona train` checkpoints (standard library + numpy only, run with
Debian's system interpreter): nothing here comes from the C++ code but the documented formats
(docs/checkpoints.md, include/canzona/ckpt/hf_names.h) and the documented init of
src/train/model.cpp, re-derived from the Hugging Face side.

  hf_reference.py check-init CKPT      CKPT (a step-<N> directory of a run with --lr 0
                                       --adamw-lr 0) is consistent and holds the init: every file's
                                       size and SHA-256 match trainer.json; model.safetensors holds
                                       exactly the HF Qwen3 tensors config.json implies, F32 of
                                       their HF shapes, each value bit for bit the counter-based
                                       init (splitmix64 / FNV-1a / Box-Muller) at the Megatron
                                       name and logical element derived here from the HF name and
                                       row; optimizer.safetensors holds exactly "<task>.
                                       momentum_buffer" per matrix task and "<tensor>.exp_avg" /
                                       ".exp_avg_sq" per element-wise tensor, F32, of their shapes.
                                       A bf16 run's (trainer.json run.precision): the params BF16,
                                       each the init rounded to nearest even, and "<task>.main" /
                                       "<tensor>.main" beside the state, F32, the bf16 init widened.
  hf_reference.py write-hf CKPT OUT EXPECTED
                                       writes OUT, a sharded HF directory (two files and
                                       model.safetensors.index.json, config.json copied) of
                                       CKPT's weights with some tensors BF16 and some F16 (rounded
                                       here) and the embedding 12 rows short of the padded
                                       vocabulary, and EXPECTED, an F32 safetensors file of what
                                       a model loaded from OUT holds (the rounded values, zero
                                       padding rows).
  hf_reference.py check-equal CKPT EXPECTED
                                       CKPT's files match trainer.json and its model.safetensors
                                       equals EXPECTED bit for bit (same names, shapes, F32; a
                                       bf16 run's: BF16, EXPECTED rounded to nearest even).
  hf_reference.py check-cast SOURCE TARGET
                                       TARGET's model.safetensors holds SOURCE's weights cast
                                       to its dtype (F32 -> BF16 rounded to nearest even, BF16
                                       -> F32 widened), bit for bit.
  hf_reference.py mutate CKPT OUT HOW [TENSOR]
                                       OUT = a copy of CKPT's weights (model.safetensors and
                                       config.json, plus the rest when HOW is a checkpoint edit)
                                       changed by HOW, with trainer.json's sizes and checksums
                                       updated when it has one:
                                         drop        TENSOR removed
                                         reshape     TENSOR stored with another shape
                                         f16         TENSOR stored as F16
                                         flip        one value of TENSOR changed
                                         flip-optimizer
                                                     flip, of a tensor of optimizer.safetensors
                                         garble      the header's first byte replaced by '['
                                         hf-drop / hf-reshape
                                                     as drop / reshape, written as a plain HF
                                                     directory (model.safetensors + config.json)
Exits non-zero with a message on the first mismatch.
"""
import hashlib
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ckpt"))
from safetensors_ref import bf16_to_f32, to_bf16, write_safetensors  # noqa: E402

FILES = ("model.safetensors", "optimizer.safetensors", "config.json", "plan.json")
DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
M64 = (1 << 64) - 1


def fail(message):
    sys.exit("hf_reference.py: " + message)


# --- safetensors, read independently of the C++ reader.

def read_safetensors(path):
    """{name: (dtype, shape, numpy array of the stored values in file dtype)} in header order;
    checks the length prefix, 8-byte alignment, the tensors tiling the data section exactly."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(f"{path}: {len(blob)} bytes, no length prefix")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob) or (8 + n) % 8:
        fail(f"{path}: header length {n} (file {len(blob)} bytes, data must start 8-aligned)")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    header.pop("__metadata__", None)
    out, spans = {}, []
    for name, entry in header.items():
        dtype, shape = entry["dtype"], entry["shape"]
        begin, end = entry["data_offsets"]
        numel = int(np.prod(shape, dtype=np.int64))
        width = np.dtype(DTYPES[dtype]).itemsize
        if end - begin != numel * width:
            fail(f"{path}: tensor '{name}' {dtype} {shape} spans {end - begin} bytes")
        spans.append((begin, end))
        out[name] = (dtype, list(shape), np.frombuffer(data[begin:end], dtype=DTYPES[dtype]))
    pos = 0
    for begin, end in sorted(spans):
        if begin != pos:
            fail(f"{path}: data bytes [{pos}, {begin}) belong to no tensor (or tensors overlap)")
        pos = end
    if pos != len(data):
        fail(f"{path}: data section has {len(data)} bytes, tensors cover {pos}")
    return out


def file_entry(path):
    with open(path, "rb") as f:
        blob = f.read()
    return {"bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}


def check_manifest(ckpt):
    with open(os.path.join(ckpt, "trainer.json")) as f:
        trainer = json.load(f)
    if trainer.get("format") != "canzona-checkpoint" or trainer.get("version") != 1:
        fail(f"{ckpt}/trainer.json: format {trainer.get('format')!r} version {trainer.get('version')!r}")
    files = trainer["files"]
    if sorted(files) != sorted(FILES):
        fail(f"{ckpt}/trainer.json: files {sorted(files)}, expected {sorted(FILES)}")
    for name in FILES:
        got = file_entry(os.path.join(ckpt, name))
        if got != files[name]:
            fail(f"{ckpt}/{name}: {got}, trainer.json says {files[name]}")
    return trainer


def rehash(ckpt):
    path = os.path.join(ckpt, "trainer.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        trainer = json.load(f)
    for name in FILES:
        trainer["files"][name] = file_entry(os.path.join(ckpt, name))
    with open(path, "w") as f:
        json.dump(trainer, f, indent=2)


# --- The HF Qwen3 tensors config.json implies (HF convention), with their Megatron sources.

def hf_tensors(config):
    """[(hf name, shape, megatron name, row map)]: row map(j) = the Megatron logical row of HF
    row j (the tp = 1 matrix; for the fused QKV the grouped layout, for fc1 [gate; up]).
    Qwen3: q / k norms, no QKV bias."""
    if config.get("model_type") != "qwen3":
        fail(f"config.json: model_type {config.get('model_type')!r}, this reader knows qwen3")
    h = config["hidden_size"]
    f = config["intermediate_size"]
    heads = config["num_attention_heads"]
    groups = config["num_key_value_heads"]
    d = config.get("head_dim") or h // heads
    vocab = config["vocab_size"]
    per_group = heads // groups
    block = (per_group + 2) * d
    same = lambda j: j  # noqa: E731

    def q_row(j):
        i = j // d
        return (i // per_group) * block + (i % per_group) * d + j % d

    def k_row(j):
        return (j // d) * block + per_group * d + j % d

    def v_row(j):
        return (j // d) * block + (per_group + 1) * d + j % d

    out = [("model.embed_tokens.weight", [vocab, h], "embedding.word_embeddings.weight", same)]
    for i in range(config["num_hidden_layers"]):
        L, M = f"model.layers.{i}.", f"decoder.layers.{i}."
        qkv = M + "self_attention.linear_qkv.weight"
        fc1 = M + "mlp.linear_fc1.weight"
        out += [
            (L + "input_layernorm.weight", [h], M + "self_attention.linear_qkv.layer_norm_weight", same),
            (L + "self_attn.q_proj.weight", [heads * d, h], qkv, q_row),
            (L + "self_attn.k_proj.weight", [groups * d, h], qkv, k_row),
            (L + "self_attn.v_proj.weight", [groups * d, h], qkv, v_row),
            (L + "self_attn.q_norm.weight", [d], M + "self_attention.q_layernorm.weight", same),
            (L + "self_attn.k_norm.weight", [d], M + "self_attention.k_layernorm.weight", same),
            (L + "self_attn.o_proj.weight", [h, heads * d], M + "self_attention.linear_proj.weight", same),
            (L + "post_attention_layernorm.weight", [h], M + "mlp.linear_fc1.layer_norm_weight", same),
            (L + "mlp.gate_proj.weight", [f, h], fc1, same),
            (L + "mlp.up_proj.weight", [f, h], fc1, lambda r, f=f: f + r),
            (L + "mlp.down_proj.weight", [h, f], M + "mlp.linear_fc2.weight", same),
        ]
    out.append(("model.norm.weight", [h], "decoder.final_layernorm.weight", same))
    if not config.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [vocab, h], "output_layer.weight", same))
    return out


def optimizer_tensors(config):
    """{name: shape} of optimizer.safetensors for Muon / AdamW with no QKV / fc1 split."""
    h = config["hidden_size"]
    f = config["intermediate_size"]
    heads = config["num_attention_heads"]
    groups = config["num_key_value_heads"]
    d = config.get("head_dim") or h // heads
    out = {}
    for name, shape, _, _ in hf_tensors(config):
        if len(shape) == 1 or name in ("model.embed_tokens.weight", "lm_head.weight"):
            out[name + ".exp_avg"] = shape
            out[name + ".exp_avg_sq"] = shape
    for i in range(config["num_hidden_layers"]):
        L = f"model.layers.{i}."
        out[L + "self_attn.qkv_proj.weight.momentum_buffer"] = [(heads + 2 * groups) * d, h]
        out[L + "mlp.gate_up_proj.weight.momentum_buffer"] = [2 * f, h]
        out[L + "self_attn.o_proj.weight.momentum_buffer"] = [h, heads * d]
        out[L + "mlp.down_proj.weight.momentum_buffer"] = [h, f]
    return out


# --- The counter-based init (src/train/model.cpp), reimplemented.

U64 = np.uint64


def splitmix64_np(x):
    """Vectorised splitmix64 on a uint64 array (numpy's uint64 arithmetic wraps mod 2^64)."""
    with np.errstate(over="ignore"):
        x = x + U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> U64(27))) * U64(0x94D049BB133111EB)
        return x ^ (x >> U64(31))


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def fnv1a64(name):
    h = 1469598103934665603
    for byte in name.encode():
        h = ((h ^ byte) * 1099511628211) & M64
    return h


def init_values(megatron_name, indices, seed, num_layers):
    """float32 init of the elements `indices` (logical row * global cols + col) of a Megatron
    param, computed with Python's math (the libm C++ calls) per element."""
    if megatron_name.endswith("layer_norm_weight") or megatron_name.endswith("layernorm.weight"):
        return np.ones(indices.shape, dtype=np.float32)
    if megatron_name.endswith(".bias"):
        return np.zeros(indices.shape, dtype=np.float32)
    stddev = 0.02
    if megatron_name.endswith("linear_proj.weight") or megatron_name.endswith("linear_fc2.weight"):
        stddev /= math.sqrt(2.0 * num_layers)
    key = U64(splitmix64(seed) ^ fnv1a64(megatron_name))
    index = indices.astype(np.uint64)
    a = splitmix64_np(key ^ splitmix64_np(U64(2) * index))
    b = splitmix64_np(key ^ splitmix64_np(U64(2) * index + U64(1)))
    # Exact in double: (a >> 11) + 1 <= 2^53, times a power of two.
    u1 = ((a >> U64(11)).astype(np.float64) + 1.0) * 2.0 ** -53
    u2 = (b >> U64(11)).astype(np.float64) * 2.0 ** -53
    two_pi = 2.0 * 3.14159265358979323846
    log, cos, sqrt = math.log, math.cos, math.sqrt
    values = [stddev * (sqrt(-2.0 * log(x)) * cos(two_pi * y))
              for x, y in zip(u1.tolist(), u2.tolist())]
    return np.array(values, dtype=np.float64).astype(np.float32)  # static_cast<float>


def expected_init(name, shape, megatron, row_of, seed, num_layers):
    rows = shape[0]
    cols = shape[1] if len(shape) > 1 else 1
    logical = np.array([row_of(j) for j in range(rows)], dtype=np.int64)
    # Every Megatron param here has as many columns as its HF tensors (QKV and fc1 fuse rows).
    indices = (logical[:, None] * cols + np.arange(cols, dtype=np.int64)[None, :]).reshape(-1)
    return init_values(megatron, indices, seed, num_layers)


def first_difference(name, got, expected, shape):
    g, e = got.view(np.uint32), expected.view(np.uint32)
    bad = np.nonzero(g != e)[0]
    if len(bad) == 0:
        return None
    k = int(bad[0])
    cols = shape[1] if len(shape) > 1 else 1
    return (f"tensor '{name}': {len(bad)} of {len(g)} values differ; first at row {k // cols}, "
            f"col {k % cols}: {got[k]!r} (0x{int(g[k]):08x}), expected {expected[k]!r} "
            f"(0x{int(e[k]):08x})")


def check_names(path, tensors, want, want_dtype="F32"):
    got = {name: shape for name, (_, shape, _) in tensors.items()}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    if missing or extra:
        fail(f"{path}: missing tensors {missing}, unexpected tensors {extra}")
    for name, shape in want.items():
        dtype = tensors[name][0]
        if dtype != want_dtype or got[name] != list(shape):
            fail(f"{path}: tensor '{name}' is {dtype} {got[name]}, expected {want_dtype} "
                 f"{list(shape)}")


# The matrix tasks of a layer (no QKV / fc1 split): task name -> its HF tensors, whose rows go to
# the task's logical rows by each tensor's row map (the fused QKV grouped per query group).
def task_parts(config):
    out = {}
    for i in range(config["num_hidden_layers"]):
        L = f"model.layers.{i}."
        out[L + "self_attn.qkv_proj.weight"] = [L + "self_attn.q_proj.weight",
                                                L + "self_attn.k_proj.weight",
                                                L + "self_attn.v_proj.weight"]
        out[L + "mlp.gate_up_proj.weight"] = [L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight"]
        out[L + "self_attn.o_proj.weight"] = [L + "self_attn.o_proj.weight"]
        out[L + "mlp.down_proj.weight"] = [L + "mlp.down_proj.weight"]
    return out


def check_main(path, optimizer, config, values):
    """A bf16 run's fp32 main params at the init: each the bf16 init widened, element-wise
    tensors under "<tensor>.main", matrix tasks under "<task>.main" with their rows placed by
    the HF tensors' row maps."""
    layout = {name: (shape, row_of) for name, shape, _, row_of in hf_tensors(config)}
    wide = {name: bf16_to_f32(to_bf16(v.reshape(-1))).reshape(layout[name][0])
            for name, v in values.items()}
    tasks = task_parts(config)
    in_task = {part for parts in tasks.values() for part in parts}
    want = {name + ".main": v for name, v in wide.items() if name not in in_task}
    for task, parts in tasks.items():
        rows = sum(layout[p][0][0] for p in parts)
        main = np.zeros((rows, layout[parts[0]][0][1]), dtype=np.float32)
        for p in parts:
            row_of = layout[p][1]
            for j in range(layout[p][0][0]):
                main[row_of(j)] = wide[p][j]
        want[task + ".main"] = main
    for name, expected in want.items():
        shape = list(expected.shape)
        message = first_difference(name, optimizer[name][2], expected.reshape(-1), shape)
        if message:
            fail(f"{path}: {message}")
    return len(want)


def check_init(ckpt):
    trainer = check_manifest(ckpt)
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    seed = int(trainer["run"]["seed"])
    layers = config["num_hidden_layers"]
    # --precision bf16: the params BF16, each the init rounded to nearest even; the fp32 main
    # params beside the optimizer state.
    bf16 = trainer["run"].get("precision", "fp32") == "bf16"
    if config.get("torch_dtype") != ("bfloat16" if bf16 else "float32"):
        fail(f"{ckpt}/config.json: torch_dtype {config.get('torch_dtype')!r} for a "
             f"{'bf16' if bf16 else 'fp32'} checkpoint")
    model_path = os.path.join(ckpt, "model.safetensors")
    model = read_safetensors(model_path)
    layout = hf_tensors(config)
    check_names(model_path, model, {name: shape for name, shape, _, _ in layout},
                "BF16" if bf16 else "F32")
    inits = {}
    for name, shape, megatron, row_of in layout:
        expected = inits[name] = expected_init(name, shape, megatron, row_of, seed, layers)
        if bf16:
            got, want = model[name][2], to_bf16(expected)
            bad = np.nonzero(got != want)[0]
            if len(bad):
                k = int(bad[0])
                fail(f"{model_path}: tensor '{name}': {len(bad)} of {len(got)} values differ; "
                     f"first at element {k}: 0x{int(got[k]):04x}, expected the init "
                     f"{expected[k]!r} rounded, 0x{int(want[k]):04x} (Megatron {megatron})")
            continue
        message = first_difference(name, model[name][2], expected, shape)
        if message:
            fail(f"{model_path}: {message} (Megatron {megatron})")
    optimizer_path = os.path.join(ckpt, "optimizer.safetensors")
    optimizer = read_safetensors(optimizer_path)
    want = optimizer_tensors(config)
    mains = 0
    if bf16:
        want.update({name + ".main": shape for name, shape, _, _ in layout
                     if name not in {p for ps in task_parts(config).values() for p in ps}})
        want.update({task + ".main": want[task + ".momentum_buffer"] for task in task_parts(config)})
        check_names(optimizer_path, optimizer, want)
        mains = check_main(optimizer_path, optimizer, config, inits)
    else:
        check_names(optimizer_path, optimizer, want)
    print(f"{ckpt}: {len(FILES)} files match trainer.json; {len(layout)} HF tensors hold the "
          f"init bit for bit{' (BF16)' if bf16 else ''}; {len(want)} optimizer tensors named and "
          f"shaped{f', {mains} fp32 main params the bf16 init widened' if mains else ''}")


def check_equal(ckpt, expected_path):
    trainer = check_manifest(ckpt)
    model_path = os.path.join(ckpt, "model.safetensors")
    model = read_safetensors(model_path)
    expected = read_safetensors(expected_path)
    # A bf16 run keeps EXPECTED's values rounded to bf16 (BF16 sources: their bits unchanged).
    bf16 = trainer["run"].get("precision", "fp32") == "bf16"
    check_names(model_path, model, {n: s for n, (_, s, _) in expected.items()},
                "BF16" if bf16 else "F32")
    for name, (_, shape, values) in expected.items():
        got = bf16_to_f32(model[name][2]) if bf16 else model[name][2]
        want = bf16_to_f32(to_bf16(values)) if bf16 else values
        message = first_difference(name, got, want, shape)
        if message:
            fail(f"{model_path}: {message}")
    print(f"{ckpt}: {len(expected)} tensors equal {expected_path} bit for bit")


def check_cast(source, target):
    """TARGET's weights are SOURCE's cast to TARGET's dtype: F32 -> BF16 rounded to nearest even,
    BF16 -> F32 widened (docs/checkpoints.md's cross-precision rule, after a run at lr 0)."""
    check_manifest(target)
    a = read_safetensors(os.path.join(source, "model.safetensors"))
    b = read_safetensors(os.path.join(target, "model.safetensors"))
    if sorted(a) != sorted(b):
        fail(f"{target}: tensors {sorted(set(a) ^ set(b))} not in both")
    for name, (da, shape, va) in a.items():
        db, vb = b[name][0], b[name][2]
        if (da, db) == ("F32", "BF16"):
            want, got = to_bf16(va), vb
        elif (da, db) == ("BF16", "F32"):
            want, got = bf16_to_f32(va).view(np.uint32), vb.view(np.uint32)
        else:
            fail(f"{name}: {da} -> {db} is not a cast between precisions")
        bad = np.nonzero(got != want)[0]
        if len(bad):
            k = int(bad[0])
            fail(f"{target}: tensor '{name}' ({da} -> {db}): {len(bad)} of {len(got)} values "
                 f"differ from the cast; first at element {k}")
    print(f"{target}: {len(a)} tensors are {source}'s cast bit for bit")


# --- Writers.

def as_f32(values):
    return np.asarray(values, dtype="<f4")


def write_hf(ckpt, out, expected_path):
    """The sharded, mixed-precision HF copy of CKPT's weights and what loading it must give."""
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    model = read_safetensors(os.path.join(ckpt, "model.safetensors"))
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(ckpt, "config.json"), os.path.join(out, "config.json"))
    shards = ([], [])
    expected = []
    for k, (name, (_, shape, values)) in enumerate(model.items()):
        values = as_f32(values).reshape(shape)
        full_shape = list(shape)
        if name == "model.embed_tokens.weight":
            values = values[:shape[0] - 12]  # shorter than the padded vocabulary
            shape = [shape[0] - 12] + shape[1:]
        if k % 3 == 0:
            stored, dtype = to_bf16(values.reshape(-1)).reshape(shape), "BF16"
            loaded = bf16_to_f32(stored.reshape(-1))
        elif k % 3 == 1:
            stored, dtype = values.astype(np.float16), "F16"
            loaded = stored.astype(np.float32).reshape(-1)
        else:
            stored, dtype = values, "F32"
            loaded = values.reshape(-1)
        padded = np.zeros(int(np.prod(full_shape)), dtype=np.float32)
        padded[:loaded.size] = loaded
        expected.append((name, "F32", full_shape, padded.reshape(full_shape)))
        shards[k % 2].append((name, dtype, list(shape), stored))
    weight_map = {}
    for i, shard in enumerate(shards, start=1):
        file = f"model-{i:05d}-of-00002.safetensors"
        write_safetensors(os.path.join(out, file), shard, {"format": "pt"})
        weight_map.update({t[0]: file for t in shard})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    write_safetensors(expected_path, expected, {"format": "pt"}, key_order=[t[0] for t in expected])
    dtypes = sorted({t[1] for shard in shards for t in shard})
    print(f"{out}: {len(expected)} tensors in 2 shards ({', '.join(dtypes)}), "
          f"{config['vocab_size'] - 12} embedding rows")


def mutate(ckpt, out, how, tensor=None):
    hf_only = how.startswith("hf-")
    how = how[3:] if hf_only else how
    if os.path.exists(out):
        shutil.rmtree(out)
    if hf_only:
        os.makedirs(out)
        for name in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(ckpt, name), os.path.join(out, name))
    else:
        shutil.copytree(ckpt, out)
    # flip-optimizer: flip, in optimizer.safetensors (a main param of a bf16 run).
    path = os.path.join(out, "optimizer.safetensors" if how == "flip-optimizer" else
                        "model.safetensors")
    how = "flip" if how == "flip-optimizer" else how
    if how == "garble":
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(b"[")
    else:
        model = read_safetensors(path)
        if tensor not in model:
            fail(f"{path}: no tensor '{tensor}' to change")
        tensors = []
        for name, (dtype, shape, values) in model.items():
            values = values.reshape(shape)
            if name == tensor:
                if how == "drop":
                    continue
                if how == "reshape":
                    shape = [shape[0] // 2, shape[1] * 2] if len(shape) == 2 else [2, shape[0] // 2]
                    values = values.reshape(shape)
                elif how == "f16":
                    dtype, values = "F16", values.astype(np.float16)
                elif how == "flip":
                    values = values.copy()
                    values.reshape(-1)[7] = np.float32(values.reshape(-1)[7]) * np.float32(-2.0) + np.float32(1.0)
                else:
                    fail(f"unknown change '{how}'")
            tensors.append((name, dtype, list(shape), values))
        write_safetensors(path, tensors, {"format": "pt"}, key_order=[t[0] for t in tensors])
    rehash(out)


if __name__ == "__main__":
    commands = {"check-init": (check_init, 1), "check-equal": (check_equal, 2),
                "check-cast": (check_cast, 2),
                "write-hf": (write_hf, 3), "mutate": (mutate, (3, 4))}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    fn, count = commands[sys.argv[1]]
    args = sys.argv[2:]
    if len(args) not in (count if isinstance(count, tuple) else (count,)):
        sys.exit(__doc__)
    fn(*args)
