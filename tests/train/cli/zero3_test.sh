#!/usr/bin/env bash
# `canzona train --zero-stage 3` under mpirun against the same run under ZeRO-1.
# Usage: zero3_test.sh <canzona> <mpirun> <canzona_check_output>
#
#   1. DP=2, asc, lb-asc and fsdp-a2a, 2 micro-batches per step, the same buckets (ZeRO-3's default
#      is one layer each, ZeRO-1's Megatron's): both stages print the same loss
#      curves and params hashes (read from --json); --json says zero_stage; every run reports its
#      memory (params, gradients, state, activations, peak RSS); under ZeRO-3 the params and
#      gradients a rank keeps are at most 3/4 of ZeRO-1's for the balanced and the equal cuts
#      (about half at DP 2), the optimizer state is ZeRO-1's where the plan is (asc, fsdp-a2a);
#      the optimizer step sends nothing over DP but under fsdp-a2a (its owner All-to-Alls), in
#      both stages; the summary names the stage and the peak per rank. The same again under
#      --precision bf16 (ZeRO-3 bitwise ZeRO-1 in bf16, main params included in the state hash),
#      whose ZeRO-1 params and gradients take half of fp32's bytes.
#   2. Bad input, one line `canzona: error: ...`, exit 2, before any training: a strategy that
#      cannot shard params (sc's All-Reduce, Megatron-LM's layer-wise; in train, plan and
#      simulate); a stage that is neither 1
#      nor 3; memory a ZeRO-3 run cannot have; a --resume the run cannot read (another model's
#      checkpoint).
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
export OPENBLAS_NUM_THREADS=1

quick=(--model qwen3-tiny --seq-len 32 --micro-batch 2 --warmup 1 --eval-every 2)
mpi() {
  local np=$1
  shift
  timeout 120 "$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" "$@"
}

# --- 1. Stage 3 against stage 1, in fp32 and in bf16 (--precision bf16: bf16 params and
# gradients, fp32 main params and state; the state hash covers the main params).
for precision in fp32 bf16; do
tag=${precision/fp32/}
for stage in 1 3; do
  expect_ok "stage$stage$tag" mpi 2 "$canzona" train "${quick[@]}" --dp 2 --grad-accum 2 --steps 4 \
    --strategies asc,lb-asc,fsdp-a2a --zero-stage "$stage" --bucket-size 100000 \
    --precision "$precision" --json "$work/stage$stage$tag.json"
done
if [ -f "$work/stage1$tag.json" ] && [ -f "$work/stage3$tag.json" ]; then
  check_file "$work/stage3$tag.json" json /zero_stage==3 /runs#==3 /bitwise_identical==true \
    /runs/*/memory/params_bytes:int>0 /runs/*/memory/grads_bytes:int>0 \
    /runs/*/memory/optimizer_state_bytes:int>0 /runs/*/memory/activations_bytes:int>0 \
    /runs/*/memory/peak_rss_bytes:int>0 /runs/*/state_hash:string
  check_file "$work/stage1$tag.json" json /zero_stage==1 /runs#==3
  if /usr/bin/python3 - "$work/stage1$tag.json" "$work/stage3$tag.json" >"$work/compare$tag.txt" 2>&1 <<'PY'
import json, sys
one, three = (json.load(open(p))["runs"] for p in sys.argv[1:3])
bad = []
for a, b in zip(one, three):
    s = a["strategy"]
    if s != b["strategy"]:
        bad.append(f"strategy order {s} vs {b['strategy']}")
        continue
    if [x["loss"] for x in a["steps"]] != [x["loss"] for x in b["steps"]]:
        bad.append(f"{s}: loss curves differ")
    if [x["loss"] for x in a["val"]] != [x["loss"] for x in b["val"]]:
        bad.append(f"{s}: validation losses differ")
    if a["params_hash"] != b["params_hash"]:
        bad.append(f"{s}: params hash {a['params_hash']} vs {b['params_hash']}")
    if s != "lb-asc" and a["plan_hash"] != b["plan_hash"]:
        bad.append(f"{s}: the plan changed with the stage")
    if a["plan_hash"] == b["plan_hash"] and a["state_hash"] != b["state_hash"]:
        bad.append(f"{s}: optimizer state differs on the same plan")
    m1, m3 = a["memory"], b["memory"]
    if s != "asc":
        for key in ("params_bytes", "grads_bytes"):
            if not m3[key] <= 0.75 * m1[key]:
                bad.append(f"{s}: ZeRO-3 {key} {m3[key]} not under 3/4 of ZeRO-1's {m1[key]}")
    for run, stage in ((a, 1), (b, 3)):
        dp = {x["optimizer_step_bytes"]["dp"] for x in run["steps"]}
        if (s == "fsdp-a2a") != (min(dp) > 0) or (s != "fsdp-a2a" and dp != {0}):
            bad.append(f"{s} stage {stage}: optimizer-step DP bytes {sorted(dp)}")
print("\n".join(bad) if bad else "stage 1 and stage 3 agree")
sys.exit(1 if bad else 0)
PY
  then pass; else fail "$precision stage 3 vs stage 1: $(cat "$work/compare$tag.txt")"; fi
  if grep -q "ZeRO-3, peak resident size per rank" "$work/stage3$tag.out" &&
    grep -qE "^lb-asc +step +4/4 .*\| peak [0-9.]+ [KMG]iB" "$work/stage3$tag.out"; then
    pass
  else
    fail "stage 3 summary or step line without the stage or the peak: $(tail -5 "$work/stage3$tag.out")"
  fi
fi
done
if [ -f "$work/stage1.json" ] && [ -f "$work/stage1bf16.json" ]; then
  if /usr/bin/python3 - "$work/stage1.json" "$work/stage1bf16.json" >"$work/halves.txt" 2>&1 <<'PY'
import json, sys
f32, b16 = (json.load(open(p)) for p in sys.argv[1:3])
bad = [f"{a['strategy']} {k}: bf16 {b['memory'][k]} is not half of fp32's {a['memory'][k]}"
       for a, b in zip(f32["runs"], b16["runs"]) for k in ("params_bytes", "grads_bytes")
       if 2 * b["memory"][k] != a["memory"][k]]
if f32["precision"] != "fp32" or b16["precision"] != "bf16":
    bad.append(f"precision keys {f32['precision']}, {b16['precision']}")
print("\n".join(bad) if bad else "bf16 halves params and gradients")
sys.exit(1 if bad else 0)
PY
  then pass; else fail "bf16 memory: $(cat "$work/halves.txt")"; fi
fi

# --- 2. Bad input.
mpirun2=("$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np 2
         "$canzona" train)
expect_mpi_usage_error \
  "--zero-stage 3: strategy sc All-Reduces gradients, so every rank keeps every param" \
  "${mpirun2[@]}" "${quick[@]}" --dp 2 --steps 1 --zero-stage 3 --strategy sc
expect_usage_error "--zero-stage 3: strategy layerwise is Megatron-LM's layer-wise optimizer" \
  "$canzona" train "${quick[@]}" --steps 1 --zero-stage 3 --strategy layerwise
expect_usage_error "--zero-stage 3: strategy sc All-Reduces gradients" \
  "$canzona" plan --model qwen3-tiny --zero-stage 3 --strategy sc
expect_usage_error "--zero-stage 3: strategy layerwise is Megatron-LM's layer-wise optimizer" \
  "$canzona" simulate --model qwen3-tiny --zero-stage 3 --strategy lb-asc,layerwise
expect_usage_error "--zero-stage 2: must be 1 (ZeRO-1) or 3 (ZeRO-3)" \
  "$canzona" train "${quick[@]}" --steps 1 --zero-stage 2
expect_mpi_usage_error "memory: this run needs about" \
  "${mpirun2[@]}" --model qwen3-8b --dp 2 --steps 1 --zero-stage 3
# A checkpoint of another model (qwen3-tiny with 4 layers against its preset's) is refused by
# name under ZeRO-3 as under ZeRO-1, before a step.
if expect_ok other mpi 2 "$canzona" train "${quick[@]}" --dp 2 --steps 1 --zero-stage 3 \
  --save-dir "$work/other"; then
  expect_mpi_usage_error "does not match the model being trained" \
    "${mpirun2[@]}" --model qwen3-cpu --seq-len 32 --micro-batch 2 --dp 2 --steps 2 \
    --zero-stage 3 --resume "$work/other"
fi
cli_finish
