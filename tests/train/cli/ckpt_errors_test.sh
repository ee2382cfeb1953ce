#!/usr/bin/env bash
# `canzona train` checkpoint errors, end to end under mpirun: from one valid checkpoint
# (np 2, DP 2, 2 steps), each corrupt or unfitting --resume exits 2 with its message (naming the
# file and, where there is one, the tensor or key) printed exactly once, and writes no checkpoint
# into the fresh --save-dir of the failing run (no rank went on to train or save). Flag
# conflicts are refused before MPI starts (single process: exit 2, exactly one stderr line). A
# full disk (`ulimit -f`; canzona-train ignores SIGXFSZ) during a save exits 1 naming the step and
# the failed write, leaves the older checkpoint intact (`canzona ckpt inspect` verifies it) and no
# `.step-*.tmp` behind, single process and under np 2.
# Usage: ckpt_errors_test.sh <canzona> <mpirun> <canzona_check_output>
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
python=/usr/bin/python3
ref=$here/hf_reference.py
quick=(--model qwen3-tiny --seq-len 32 --micro-batch 2 --warmup 1 --eval-every 0)

# expect_rank_error NAME NP MESSAGE TRAIN-ARGS...: `mpirun -np NP canzona train TRAIN-ARGS
# --save-dir $work/out_NAME` fails as expect_agreed_error (ckpt_lib.sh) says.
expect_rank_error() {
  local name=$1 np=$2 message=$3
  shift 3
  expect_agreed_error "$name" "$message" "$work/out_$name" \
    mpi "$np" "$canzona" train "$@" --save-dir "$work/out_$name"
}

# A copy of the valid checkpoint, changed by a shell snippet run inside it.
variant() {
  local name=$1 snippet=$2
  rm -rf "${work:?}/$name"
  cp -r "$good" "$work/$name"
  (cd "$work/$name" && eval "$snippet")
  echo "$work/$name"
}

# --- The valid checkpoint.
save=$work/save
if ! expect_ok setup mpi 2 "$canzona" train "${quick[@]}" --dp 2 --steps 2 --save-dir "$save"; then
  cli_finish
  exit 1
fi
good=$save/step-00000002
if [ -f "$good/trainer.json" ]; then pass; else fail "no $good/trainer.json after the setup run"; fi
resume=("${quick[@]}" --dp 2 --steps 3 --resume)

# --- Corrupt files: the checksums of trainer.json catch them.
bytes=$(stat -c %s "$good/model.safetensors")
d=$(variant truncated 'truncate -s -100 model.safetensors')
expect_rank_error truncated 2 \
  "$d/model.safetensors: $((bytes - 100)) bytes, trainer.json says $bytes (truncated or replaced)" \
  "${resume[@]}" "$d"
d=$(variant flipped "$python -c 'f = open(\"optimizer.safetensors\", \"r+b\"); f.seek(4000); b = f.read(1); f.seek(4000); f.write(bytes([b[0] ^ 0x10]))'")
expect_rank_error flipped 2 "$d/optimizer.safetensors: checksum mismatch: trainer.json says " \
  "${resume[@]}" "$d"

# --- Checksums updated to match (hf_reference.py rewrites trainer.json): the safetensors header
# checks catch them, naming the file and the tensor.
d=$work/garbled
"$python" "$ref" mutate "$good" "$d" garble || fail "hf_reference.py mutate garble failed"
expect_rank_error garbled 2 "$d/model.safetensors: garbled header: not JSON" "${resume[@]}" "$d"
d=$work/no_tensor
t=model.layers.1.self_attn.k_norm.weight
"$python" "$ref" mutate "$good" "$d" drop "$t" || fail "hf_reference.py mutate drop failed"
expect_rank_error no_tensor 2 "$d/model.safetensors: missing tensor '$t'" "${resume[@]}" "$d"
# ... also when the resuming grid differs from the saving one (TP 2).
expect_rank_error no_tensor_tp2 2 "$d/model.safetensors: missing tensor '$t'" \
  "${quick[@]}" --tp 2 --steps 3 --resume "$d"
d=$work/bad_shape
t=model.layers.0.mlp.down_proj.weight
"$python" "$ref" mutate "$good" "$d" reshape "$t" || fail "hf_reference.py mutate reshape failed"
expect_rank_error bad_shape 2 \
  "$d/model.safetensors: tensor '$t' has shape [64, 768], this model needs [128, 384]" \
  "${quick[@]}" --tp 2 --steps 3 --resume "$d"
d=$work/f16
t=model.norm.weight
"$python" "$ref" mutate "$good" "$d" f16 "$t" || fail "hf_reference.py mutate f16 failed"
expect_rank_error f16 2 "$d/model.safetensors: tensor '$t' has dtype F16, expected F32" \
  "${resume[@]}" "$d"

# --- A checkpoint that does not fit this run.
expect_rank_error config 2 \
  "$good/config.json: does not match the model being trained (saved vs this run: hidden_size 128 vs 512)" \
  --model qwen3-cpu --seq-len 32 --micro-batch 2 --warmup 1 --eval-every 0 --dp 2 --steps 3 \
  --resume "$good"
expect_rank_error optimizer 2 \
  "$good/trainer.json: saved with optimizer 'muon', this run uses 'shampoo' (optimizer state cannot change kind)" \
  "${resume[@]}" "$good" --optimizer shampoo
expect_rank_error past_steps 2 "--resume: $good is at step 2, past --steps 1" \
  "${quick[@]}" --dp 2 --steps 1 --resume "$good"
expect_rank_error seed 2 "--seed 7 differs from the seed 1 of $good" \
  "${resume[@]}" "$good" --seed 7

# --- Nothing to resume, or a broken trainer.json.
expect_rank_error missing_dir 2 "$work/nowhere: not a checkpoint directory (missing)" \
  "${resume[@]}" "$work/nowhere"
mkdir -p "$work/empty"
expect_rank_error no_trainer 2 \
  "$work/empty: no trainer.json and no complete step-<N> checkpoint in it" \
  "${resume[@]}" "$work/empty"
d=$(variant garbled_trainer 'printf "{\"format\": " > trainer.json')
expect_rank_error garbled_trainer 2 "$d/trainer.json: malformed JSON" "${resume[@]}" "$d"
d=$(variant no_key "$python -c 'import json; t = json.load(open(\"trainer.json\")); del t[\"plan_hash\"]; json.dump(t, open(\"trainer.json\", \"w\"))'")
expect_rank_error no_key 2 "$d/trainer.json: missing key 'plan_hash'" "${resume[@]}" "$d"
d=$(variant bad_seed "$python -c 'import json; t = json.load(open(\"trainer.json\")); t[\"run\"][\"seed\"] = \"x\"; json.dump(t, open(\"trainer.json\", \"w\"))'")
expect_rank_error bad_seed 2 "$d/trainer.json: key 'run.seed' must be a non-negative integer" \
  "${resume[@]}" "$d"

# --- Flag conflicts, refused before MPI starts (one process, one stderr line, exit 2).
expect_usage_error "--save-every needs --save-dir" \
  "$canzona" train "${quick[@]}" --steps 2 --save-every 1
expect_usage_error "--resume and --init-from exclude each other" \
  "$canzona" train "${quick[@]}" --steps 3 --resume "$good" --init-from "$good"
expect_usage_error "--save-dir needs a single strategy (--strategies names 6)" \
  "$canzona" train "${quick[@]}" --steps 2 --strategies all --save-dir "$work/all"
expect_absent "$work/all"
expect_usage_error "--keep = -1 must lie in [0, 1048576]" \
  "$canzona" train "${quick[@]}" --steps 2 --save-dir "$work/keep" --keep -1
expect_absent "$work/keep"
expect_usage_error "--keep needs --save-dir" "$canzona" train "${quick[@]}" --steps 2 --keep 2
expect_usage_error "--verify replays the run from its init; it cannot follow --resume or --init-from" \
  "$canzona" train "${quick[@]}" --steps 3 --resume "$good" --verify

# --- A full disk during the save of step 3: exit 1, the older checkpoint untouched and valid, no
# temporary directory left. ulimit -f counts 1024-byte blocks: 256 KiB, well below the 1.8 MB
# model file, so reserving the files' size fails. The limit binds OpenMPI too, whose shared-memory
# files would then fail to start MPI: PMIx keeps its data in process memory (gds hash) and the
# ranks talk over TCP instead of the shared-memory BTL.
# expect_disk_full NAME NP: resumes a copy of the save directory into itself (NP 1: no mpirun).
expect_disk_full() {
  local name=$1 np=$2
  local dir=$work/$name
  rm -rf "$dir"
  cp -r "$save" "$dir"
  local launcher=()
  [ "$np" -gt 1 ] && launcher=("$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl "self,tcp" -np "$np")
  (
    ulimit -f 256
    export PMIX_MCA_gds=hash
    exec "${launcher[@]}" "$canzona" train "${quick[@]}" --dp "$np" --steps 3 --resume "$dir" \
      --save-dir "$dir"
  ) >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  local lines
  lines=$(grep -c "checkpoint save at step 3 failed: .*write failed" "$work/$name.err")
  if [ "$rc" -ne 1 ]; then
    fail "$name: exited $rc, expected 1 (stderr: $(head -c 600 "$work/$name.err"))"
  elif [ "$lines" -ne 1 ]; then
    fail "$name: expected one 'checkpoint save at step 3 failed: ... write failed' line, got $lines: $(cat "$work/$name.err")"
  else
    pass
  fi
  if "$canzona" ckpt inspect "$dir/step-00000002" >"$work/$name.inspect" 2>&1; then
    pass
  else
    fail "$name: the older checkpoint no longer verifies: $(cat "$work/$name.inspect")"
  fi
  local left
  left=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name step-00000002 ! -name .lock -printf '%f ')
  if [ -n "$left" ]; then fail "$name: left behind in $dir: $left"; else pass; fi
}
expect_disk_full disk_full 1
expect_disk_full disk_full_np2 2

cli_finish
