# shellcheck shell=bash disable=SC2154 # canzona, mpirun_exe, work: set by the sourcing script
# Helpers shared by the checkpoint CLI tests (ckpt_*_test.sh); source it after
# tests/tools/cli_test_lib.sh and cli_init, with $canzona and $mpirun_exe set.
#
#   mpi NP CMD...              CMD under `mpirun -np NP` (as root, oversubscribed, shared memory)
#   train_quick NP ARGS...     `canzona train` of qwen3-tiny with short windows under mpi NP;
#                              buckets of 100,000 elements, so lb-asc at DP 2 divides element-wise
#                              params between DP ranks (each rank holds a slice of their state)
#   expect_agreed_error NAME MESSAGE OUT CMD...
#                              CMD (an MPI run) exits 2, MESSAGE appears exactly once on stderr
#                              and exactly one line starts with "canzona:", no MPI_ABORT banner
#                              (the ranks agree and end in order), and directory OUT (the failing run's
#                              --save-dir) holds nothing but its .lock: no rank went on to train or save
#   step_losses JSON FIRST     "step loss" lines (repr: the exact double) of every step >= FIRST
#                              of a `canzona train --json` file, its validation losses from FIRST
#                              on, and the params hash
#   train_losses JSON FIRST    the "step loss" lines alone (no validation, no hash)
#   same_state DIR_A DIR_B WHAT
#                              passes when the two checkpoints' model and optimizer files are
#                              byte-identical, else fails naming WHAT
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

mpi() {
  local np=$1
  shift
  "$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" "$@"
}

train_quick() {
  local np=$1
  shift
  timeout 120 "$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" \
    "$canzona" train --model qwen3-tiny --seq-len 32 --micro-batch 2 --warmup 1 \
    --bucket-size 100000 "$@"
}

expect_agreed_error() {
  local name=$1 message=$2 out=$3
  shift 3
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  local found ours
  found=$(grep -cF -- "$message" "$work/$name.err")
  ours=$(grep -c '^canzona:' "$work/$name.err")
  if [ "$rc" -ne 2 ]; then
    fail "$name: exited $rc, expected 2 (stderr: $(grep -v '^[-A-Z ]*$' "$work/$name.err" | head -c 600))"
  elif grep -q "MPI_ABORT" "$work/$name.err"; then
    fail "$name: Open MPI's MPI_ABORT banner: $(cat "$work/$name.err")"
  elif [ "$found" -ne 1 ] || [ "$ours" -ne 1 ]; then
    fail "$name: expected '$message' once and one 'canzona:' line, got $found and $ours: $(cat "$work/$name.err")"
  else
    pass
  fi
  # .lock: the run's lock on its --save-dir (train refuses a second run into it), not a write
  if [ -n "$(ls -A "$out" 2>/dev/null | grep -vx '.lock')" ]; then
    fail "$name: the failing run wrote into its --save-dir: $(ls -A "$out")"
  else
    pass
  fi
}

step_losses() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
first = int(sys.argv[2])
for s in run["steps"]:
    if s["step"] >= first:
        print(s["step"], repr(s["loss"]))
for v in run["val"]:
    if v["step"] >= first:
        print("val", v["step"], repr(v["loss"]))
print("params_hash", run["params_hash"])
PY
}

train_losses() { step_losses "$1" "$2" | grep -v -e "^val" -e "^params_hash"; }

same_state() {
  if cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
    cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"; then
    pass
  else
    fail "$3: $1 and $2 differ"
  fi
}
