#!/usr/bin/env bash
# Hashes of every strategy on a set of grids: the plan JSON of `canzona plan` (ZeRO-1 and 3,
# dense, MoE, PP), the simulator's JSON, and the params and plan hashes of `canzona compare` and
# `canzona train` on 1, 2 and 4 ranks. A refactor that must not change behaviour prints the same
# lines before and after: scripts/grid-hashes.sh > before.txt; ...; diff before.txt after.txt.
# Usage: scripts/grid-hashes.sh [build-dir] (default build). Runs about 5 minutes on 2 cores.
# GRID_HASHES_DROP="key ..." leaves keys a change adds on purpose out of the plan JSON's hash
# (e.g. GRID_HASHES_DROP="zero_stage precision grad_reduce_in_fp32" against a run from before
# the plan JSON recorded them).
set -euo pipefail
B=${1:-build}
C=$B/apps/canzona
MOE=tests/runtime/data/tiny-moe/config.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1
MPI="mpirun --allow-run-as-root --oversubscribe"
strategies="sc layerwise layerwise-paper asc lb-asc fsdp-a2a"

plan() {  # label, args...
  local label=$1
  shift
  if "$C" plan "$@" --json "$T/p.json" > "$T/out.txt" 2>&1; then
    echo "plan $label $(/usr/bin/python3 -c 'import hashlib,json,sys
def drop(x):  # the planner'"'"'s wall time differs between runs; GRID_HASHES_DROP names more
    if isinstance(x, dict): return {k: drop(v) for k, v in x.items() if k not in dropped}
    if isinstance(x, list): return [drop(v) for v in x]
    return x
dropped = {"plan_ms"} | set(sys.argv[2:])
print(hashlib.sha256(json.dumps(drop(json.load(open(sys.argv[1]))), sort_keys=True).encode()).hexdigest()[:16])' "$T/p.json" ${GRID_HASHES_DROP:-})"
  else
    echo "plan $label error: $(tail -1 "$T/out.txt")"
  fi
}
for s in $strategies; do
  for g in "--dp 1" "--dp 4" "--tp 2" "--dp 4 --tp 2" "--dp 2 --pp 2" "--dp 8 --tp 4 --pp 4"; do
    plan "qwen3-0.6b $s $g" --model qwen3-0.6b --strategy "$s" $g --split-fc1
    plan "qwen3-0.6b $s $g z3" --model qwen3-0.6b --strategy "$s" $g --zero-stage 3
  done
  for g in "--dp 2 --ep 2" "--dp 2 --tp 2 --ep 2" "--dp 4 --tp 2 --ep 4 --etp 2" "--dp 2 --pp 2 --ep 2"; do
    plan "tiny-moe $s $g" --model "$MOE" --strategy "$s" $g
  done
done
plan "qwen3-0.6b lb-asc paper" --model qwen3-0.6b --dp 8 --tp 2 --planner paper
plan "qwen3-0.6b lb-asc megatron-canzona" --model qwen3-0.6b --dp 8 --tp 2 --planner megatron-canzona
plan "qwen3-0.6b layerwise layer-sharded fixed" --model qwen3-0.6b --strategy layerwise --dp 4 \
  --tp 2 --layerwise-tp layer-sharded --layerwise-buckets fixed
plan "qwen3-0.6b shampoo" --model qwen3-0.6b --dp 4 --tp 2 --optimizer shampoo --cost memory
plan "bad zero stage 2" --model qwen3-0.6b --zero-stage 2

sim() {
  local label=$1
  shift
  if "$C" simulate "$@" --json "$T/s.json" > "$T/out.txt" 2>&1; then
    echo "simulate $label $(sha256sum < "$T/s.json" | cut -c1-16)"
  else
    echo "simulate $label error: $(tail -1 "$T/out.txt")"
  fi
}
sim "qwen3-1.7b dp16 tp2" --model qwen3-1.7b --dp 16 --tp 2
sim "qwen3-1.7b dp8 tp2 pp2" --model qwen3-1.7b --dp 8 --tp 2 --pp 2
sim "qwen3-1.7b z3" --model qwen3-1.7b --dp 16 --tp 2 --zero-stage 3 --strategy asc,lb-asc,fsdp-a2a
sim "qwen3-1.7b sweep tp" --model qwen3-1.7b --gpus 32 --sweep tp
sim "tiny-moe" --model "$MOE" --dp 4 --tp 2 --ep 4 --seq-len 64 --tokens 4096
sim "bad zero stage 2" --model qwen3-1.7b --zero-stage 2

compare() {  # label, np, args...
  local label=$1 np=$2
  shift 2
  if $MPI -np "$np" "$C" compare "$@" --json "$T/c.json" > "$T/out.txt" 2>&1; then
    echo "compare $label $(/usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(" ".join(k + ":" + r["params_hash"] + "/" + r["plan_hash"] + "/" + str(r["bytes"])
               for k, r in sorted(d["strategies"].items())), "verify:", d["verify"])' "$T/c.json")"
  else
    echo "compare $label error: $(grep 'error' "$T/out.txt" | head -1)"
  fi
}
compare "qwen3-tiny np1" 1 --model qwen3-tiny --steps 2
compare "qwen3-tiny dp2" 2 --model qwen3-tiny --dp 2 --steps 2 --verify
compare "qwen3-tiny tp2" 2 --model qwen3-tiny --tp 2 --steps 2 --split-fc1
compare "qwen3-tiny dp2 tp2" 4 --model qwen3-tiny --dp 2 --tp 2 --steps 2 --verify
compare "qwen3-tiny dp2 shampoo" 2 --model qwen3-tiny --dp 2 --steps 2 --optimizer shampoo
for o in shampoo soap; do
  compare "qwen3-tiny dp2 tp2 $o" 4 --model qwen3-tiny --dp 2 --tp 2 --steps 2 --optimizer $o
done
compare "tiny-moe dp2 tp2 ep2" 4 --model "$MOE" --dp 2 --tp 2 --ep 2 --split-fc1 --steps 2 --verify
compare "qwen3-tiny pp2" 2 --model qwen3-tiny --pp 2 --steps 2 --verify
compare "qwen3-tiny dp2 pp2" 4 --model qwen3-tiny --dp 2 --pp 2 --steps 2 --verify
compare "bad pp 4" 4 --model qwen3-tiny --pp 4 --steps 2

train() {  # label, np, args...
  local label=$1 np=$2
  shift 2
  if $MPI -np "$np" "$C" train "$@" --seq-len 32 --micro-batch 2 --steps 3 --json "$T/t.json" \
    > "$T/out.txt" 2>&1; then
    echo "train $label $(/usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(" ".join(r["strategy"] + ":" + r["params_hash"] + "/" + r["state_hash"] + ":"
               + ",".join(repr(s["loss"]) for s in r["steps"]) for r in d["runs"]))' "$T/t.json")"
  else
    echo "train $label error: $(grep 'error' "$T/out.txt" | head -1)"
  fi
}
train "qwen3-tiny dp2" 2 --model qwen3-tiny --dp 2 --strategies sc,lb-asc
train "qwen3-tiny tp2" 2 --model qwen3-tiny --tp 2 --strategies layerwise,asc
train "qwen3-tiny dp2 z3" 2 --model qwen3-tiny --dp 2 --strategies asc,fsdp-a2a --zero-stage 3
train "qwen3-tiny dp2 tp2" 4 --model qwen3-tiny --dp 2 --tp 2
train "qwen3-tiny dp2 soap" 2 --model qwen3-tiny --dp 2 --optimizer soap --strategies lb-asc,sc
train "tiny-moe dp2 ep2" 2 --model "$MOE" --dp 2 --ep 2 --strategies sc,lb-asc
