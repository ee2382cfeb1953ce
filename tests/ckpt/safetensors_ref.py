#!/usr/bin/python3
"""An independent safetensors reader/writer (standard library + numpy only), run with Debian's
system interpreter to check the C++ implementation against a second one.

  safetensors_ref.py check FILE     FILE (from `ckpt_tool write-pattern`) follows the format: length
                                    prefix, JSON header with keys in PATTERN_TENSORS order then
                                    __metadata__, data start 8-aligned, tensors tiling the data
                                    section, file exactly as long; every value equals
                                    float32(sin(0.37 i + k)) bit for bit as numpy computes it.
  safetensors_ref.py write DIR      writes DIR/mixed.safetensors (F32, BF16, F16, F64 tensors with
                                    subnormals, inf, nan, -0), a sharded DIR/sharded/ with
                                    model.safetensors.index.json, DIR/expected/<tensor>.f32 (the
                                    F32 values numpy converts them to) and DIR/manifest.json.
  safetensors_ref.py checkpoint DIR writes a small checkpoint directory (trainer.json with hashlib
                                    SHA-256 of each file) for the `canzona ckpt inspect` tests.
Exits non-zero with a message on any mismatch.
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np

# Same list in ckpt_tool.cpp (kPatternTensors).
PATTERN_TENSORS = [
    ("model.layers.0.self_attn.q_proj.weight", [16, 8]),
    ("model.norm.weight", [8]),
    ("scalar", []),
    ("empty", [0, 5]),
    ("model.embed_tokens.weight", [33, 7]),
    ("lm_head.weight", [5, 3, 2]),
]
PATTERN_METADATA = {"writer": "canzona", "step": "42"}
DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
          "BF16": np.dtype("<u2")}


def fail(message):
    sys.exit("safetensors_ref.py: " + message)


def pattern(numel, k):
    i = np.arange(numel, dtype=np.float64)
    return np.sin(i * 0.37 + k).astype(np.float32)


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    if (8 + n) % 8:
        fail(f"{path}: data section starts at {8 + n}, not a multiple of 8")
    text = blob[8:8 + n].decode("utf-8")
    if text.rstrip(" ") != text.rstrip():
        fail(f"{path}: header padded with something other than spaces")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    want = [name for name, _ in PATTERN_TENSORS] + ["__metadata__"]
    if keys != want:
        fail(f"{path}: header keys {keys}, expected {want}")
    header = dict(pairs)
    if dict(header["__metadata__"]) != PATTERN_METADATA:
        fail(f"{path}: metadata {header['__metadata__']}")
    data = blob[8 + n:]
    offset = 0
    for k, (name, shape) in enumerate(PATTERN_TENSORS):
        entry = dict(header[name])
        if entry["dtype"] != "F32" or entry["shape"] != shape:
            fail(f"{path}: tensor {name}: {entry}")
        begin, end = entry["data_offsets"]
        numel = int(np.prod(shape, dtype=np.int64))
        if begin != offset or end != begin + 4 * numel:
            fail(f"{path}: tensor {name}: offsets {begin, end}, expected {offset, offset + 4 * numel}")
        got = np.frombuffer(data[begin:end], dtype="<f4")
        expected = pattern(numel, k)
        if not np.array_equal(got.view(np.uint32), expected.view(np.uint32)):
            bad = int(np.nonzero(got.view(np.uint32) != expected.view(np.uint32))[0][0])
            fail(f"{path}: tensor {name}: element {bad} is {got[bad]!r}, expected {expected[bad]!r}")
        offset = end
    if offset != len(data):
        fail(f"{path}: data section has {len(data)} bytes, tensors cover {offset}")
    print(f"{path}: {len(PATTERN_TENSORS)} tensors match")


def to_bf16(values):
    """float32 -> bf16 bits, round to nearest even (nan kept quiet)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(values)
    rounded[nan] = (bits[nan] >> 16) | 0x40
    return rounded.astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, metadata=None, key_order=None):
    """tensors: list of (name, dtype, shape, raw numpy array in file dtype); data in list order,
    header keys in key_order (default: reversed, to test that readers sort by offsets)."""
    header, chunks, offset = {}, [], 0
    for name, dtype, shape, array in tensors:
        raw = np.ascontiguousarray(array).astype(DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    order = key_order or [t[0] for t in reversed(tensors)]
    ordered = {name: header[name] for name in order}
    if metadata:
        ordered["__metadata__"] = metadata
    text = json.dumps(ordered, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write(out):
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    os.makedirs(os.path.join(out, "sharded"), exist_ok=True)
    rng = np.random.default_rng(20240611)
    manifest = {"mixed": {}, "sharded": {}, "metadata": {"format": "pt", "source": "numpy"}}

    def tensor(group, name, dtype, shape, values):
        """values: float64 array; returns the raw array stored and records the F32 numpy gives."""
        values = np.asarray(values, dtype=np.float64).reshape(shape)
        if dtype == "F32":
            stored = values.astype(np.float32)
            as_f32 = stored
        elif dtype == "F16":
            stored = values.astype(np.float16)
            as_f32 = stored.astype(np.float32)
        elif dtype == "BF16":
            stored = to_bf16(values.astype(np.float32))
            as_f32 = bf16_to_f32(stored)
        else:
            stored = values
            with np.errstate(over="ignore"):  # 1e300 -> inf is the point
                as_f32 = values.astype(np.float32)
        as_f32.astype("<f4").tofile(os.path.join(out, "expected", name + ".f32"))
        manifest[group][name] = {"dtype": dtype, "shape": list(shape)}
        return (name, dtype, list(shape), stored)

    specials16 = [0.0, -0.0, 2.0 ** -24, 3 * 2.0 ** -24, 1023 * 2.0 ** -24, 2.0 ** -14, 65504.0,
                  -65504.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 1e-8, 0.1, 3.14159]
    specials64 = [0.1, 1.0 + 2.0 ** -24, 1.0 + 2.0 ** -24 + 2.0 ** -40, 1e300, -1e300, 1e-50,
                  -0.0, np.nan, 3.4028235677973366e38, 1.401298464324817e-45, 7e-46]
    mixed = [
        tensor("mixed", "mixed.f32", "F32", [4, 6], rng.standard_normal(24)),
        tensor("mixed", "mixed.bf16", "BF16", [3, 11], np.concatenate(
            [rng.standard_normal(29) * 1e3, [np.inf, -np.inf, np.nan, 1e-40]])),
        tensor("mixed", "mixed.f16", "F16", [len(specials16) + 20],
               np.concatenate([specials16, rng.standard_normal(20) * 100])),
        tensor("mixed", "mixed.f64", "F64", [len(specials64)], specials64),
        tensor("mixed", "mixed.scalar", "F32", [], [2.5]),
        tensor("mixed", "mixed.empty", "BF16", [0, 3], []),
    ]
    write_safetensors(os.path.join(out, "mixed.safetensors"), mixed, manifest["metadata"])

    shard1 = [tensor("sharded", "model.embed_tokens.weight", "BF16", [10, 4],
                     rng.standard_normal(40)),
              tensor("sharded", "model.layers.0.mlp.up_proj.weight", "F32", [6, 4],
                     rng.standard_normal(24))]
    shard2 = [tensor("sharded", "model.norm.weight", "F16", [4], rng.standard_normal(4)),
              tensor("sharded", "lm_head.weight", "F32", [10, 4], rng.standard_normal(40))]
    weight_map = {}
    for i, shard in enumerate([shard1, shard2], start=1):
        name = f"model-{i:05d}-of-00002.safetensors"
        write_safetensors(os.path.join(out, "sharded", name), shard, {"format": "pt"})
        weight_map.update({t[0]: name for t in shard})
    with open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"wrote {len(mixed)} + {len(weight_map)} tensors")


def file_entry(path):
    with open(path, "rb") as f:
        blob = f.read()
    return {"bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}


CHECKPOINT_MODEL = [("model.embed_tokens.weight", [16, 8]),
                    ("model.layers.0.mlp.down_proj.weight", [8, 12]),
                    ("model.norm.weight", [8])]
CHECKPOINT_OPTIMIZER = [("model.embed_tokens.weight.exp_avg", [16, 8]),
                        ("model.embed_tokens.weight.exp_avg_sq", [16, 8]),
                        ("model.layers.0.mlp.down_proj.weight.momentum", [8, 12]),
                        ("model.norm.weight.exp_avg", [8]),
                        ("model.norm.weight.exp_avg_sq", [8])]
PLAN_HASH = 0x1234abcd5678ef90


def checkpoint(out):
    os.makedirs(out, exist_ok=True)
    for name, tensors in (("model.safetensors", CHECKPOINT_MODEL),
                          ("optimizer.safetensors", CHECKPOINT_OPTIMIZER)):
        stored = [(t, "F32", shape, pattern(int(np.prod(shape)), k).reshape(shape))
                  for k, (t, shape) in enumerate(tensors)]
        write_safetensors(os.path.join(out, name), stored, {"step": "120"},
                          key_order=[t for t, _ in tensors])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3", "hidden_size": 8, "num_hidden_layers": 1}, f)
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump({"model": "tiny", "strategy": "lb-asc", "dp": 2, "tp": 2, "pp": 1,
                   "plan_hash": PLAN_HASH,
                   "balance": {"dp": {"flops": 1.0625, "memory": 1.25},
                               "tp": {"flops": 1.0, "memory": 1.5}}}, f)
    files = {name: file_entry(os.path.join(out, name))
             for name in ("model.safetensors", "optimizer.safetensors", "config.json", "plan.json")}
    trainer = {"format": "canzona-checkpoint", "version": 1, "step": 120, "strategy": "lb-asc",
               "dp": 2, "tp": 2, "optimizer": "muon", "plan_hash": f"{PLAN_HASH:016x}",
               "files": files, "seed": 1234, "data_position": [3, 4]}
    with open(os.path.join(out, "trainer.json"), "w") as f:
        json.dump(trainer, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write", "checkpoint"):
        sys.exit(__doc__)
    {"check": check, "write": write, "checkpoint": checkpoint}[sys.argv[1]](sys.argv[2])
