#!/usr/bin/env bash
# Exact resume after SIGKILL, atomic saves and --keep.
# Usage: ckpt_resume_test.sh <canzona> <mpirun> <canzona_check_output>
#
#   1. An uninterrupted DP=2 run of 6 steps saves every 2 steps (reference).
#   2. The same run saving every step with --keep 2 is killed (SIGKILL, raised by world rank 1 on
#      itself) right after a random step K in [1, 5]. The newest checkpoint must be step K and at
#      most 2 must be left. Resumed with --resume <save dir>, it runs steps K+1..6: their losses
#      must equal the reference's bit for bit (JSON doubles round-trip), so must the final params
#      hash, and the final checkpoint directory must equal the reference's byte for byte (model,
#      optimizer state, config, plan and trainer.json).
#   3. Killed inside the save of step K2 (data written, directory not yet published): the newest
#      complete checkpoint is K2 - 1, the half-written `.step-<K2>.tmp` is never taken for a
#      checkpoint, and resuming from the save directory again ends bitwise at the reference;
#      its first save removes the leftover.
#   4. --precision bf16: a run saving at step 3, resumed there under another strategy (asc) and
#      ZeRO-3, ends bitwise as the run that never stopped (losses, params hash, and the step-6
#      weights and state, fp32 main params included, byte for byte); without the main params the
#      resumed run would differ. Across precisions (docs/checkpoints.md's rule), checked at lr 0
#      by an independent reader (hf_reference.py check-cast): a bf16 checkpoint resumed under
#      --precision fp32 holds its weights widened, an fp32 one under bf16 its weights rounded.
# K and K2 are printed; rerun with CANZONA_KILL_STEP=K CANZONA_KILL_IN_SAVE_STEP=K2 (>= 2) to
# reproduce a failure.
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
set +f

run() { train_quick "$1" --eval-every 3 --steps 6 --dp 2 "${@:2}"; }
losses() { step_losses "$@"; }

# Complete checkpoints of save directory $1, oldest first (names sort by step).
checkpoints() { find "$1" -mindepth 1 -maxdepth 1 -type d -name 'step-????????' -printf '%f\n' | sort; }
newest() { checkpoints "$1" | tail -1; }

ref=$work/ref
expect_ok ref run 2 --save-every 2 --save-dir "$ref" --json "$work/ref.json" || { cli_finish; exit; }

# --- 2. SIGKILL after step K.
k=${CANZONA_KILL_STEP:-$((1 + RANDOM % 5))}
echo "kill after step $k"
killed=$work/killed
run 2 --save-every 1 --keep 2 --save-dir "$killed" --test-kill-step "$k" --test-kill-rank 1 \
  >"$work/kill.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then pass; else fail "the killed run exited 0"; fi
want=$(printf 'step-%08d' "$k")
if [ "$(newest "$killed")" = "$want" ]; then pass; else
  fail "newest checkpoint after a kill at step $k is '$(newest "$killed")', expected $want"
fi
count=$(checkpoints "$killed" | wc -l)
if [ "$count" -le 2 ]; then pass; else fail "--keep 2 left $count checkpoints"; fi
if expect_ok resumed run 2 --save-every 2 --save-dir "$killed" --resume "$killed" \
  --json "$work/resumed.json"; then
  if grep -q "checkpoint loaded: .*$want" "$work/resumed.out"; then pass; else
    fail "resume did not load $want: $(head -5 "$work/resumed.out")"
  fi
  if diff <(losses "$work/ref.json" $((k + 1))) <(losses "$work/resumed.json" 1) >"$work/d1"; then
    pass
  else
    fail "losses after resuming at step $k differ from the uninterrupted run: $(cat "$work/d1")"
  fi
  if diff -r "$ref/step-00000006" "$killed/step-00000006" >"$work/d2"; then pass; else
    fail "final checkpoint differs from the uninterrupted run's: $(head -5 "$work/d2")"
  fi
fi

# --- 3. SIGKILL inside the save of step K2, before the directory is published.
k2=${CANZONA_KILL_IN_SAVE_STEP:-$((2 + RANDOM % 4))}
echo "kill inside the save of step $k2"
torn=$work/torn
run 2 --save-every 1 --save-dir "$torn" --test-kill-step "$k2" --test-kill-rank 0 \
  --test-kill-in-save >"$work/torn.out" 2>&1
want=$(printf 'step-%08d' $((k2 - 1)))
if [ "$(newest "$torn")" = "$want" ]; then pass; else
  fail "newest complete checkpoint after a kill in save $k2 is '$(newest "$torn")', expected $want"
fi
if [ -d "$torn/.step-$(printf '%08d' "$k2").tmp" ]; then pass; else
  fail "the torn save left no temporary directory (was the kill inside the save?)"
fi
if expect_ok torn_resumed run 2 --save-every 2 --save-dir "$torn" --resume "$torn" \
  --json "$work/torn.json"; then
  if diff <(losses "$work/ref.json" "$k2") <(losses "$work/torn.json" 1) >"$work/d3"; then pass; else
    fail "losses after a torn save at step $k2 differ: $(cat "$work/d3")"
  fi
  if diff -r "$ref/step-00000006" "$torn/step-00000006" >"$work/d4"; then pass; else
    fail "final checkpoint after a torn save differs: $(head -5 "$work/d4")"
  fi
  leftovers=$(find "$torn" -mindepth 1 -maxdepth 1 -name '.step-*' | wc -l)
  if [ "$leftovers" -eq 0 ]; then pass; else
    fail "the next save left the torn save's temporary directory behind"
  fi
fi

# --- 4. bf16.
bref=$work/bref
if expect_ok bf16_ref run 2 --precision bf16 --save-every 3 --save-dir "$bref" \
  --json "$work/bref.json"; then
  bres=$work/bres
  if expect_ok bf16_resumed run 2 --precision bf16 --strategy asc --zero-stage 3 \
    --save-dir "$bres" --resume "$bref/step-00000003" --json "$work/bres.json"; then
    if diff <(losses "$work/bref.json" 4) <(losses "$work/bres.json" 1) >"$work/d5"; then pass; else
      fail "bf16 losses after resuming at step 3 differ from the uninterrupted run: $(cat "$work/d5")"
    fi
    same_state "$bref/step-00000006" "$bres/step-00000006" "bf16 resumed at step 3 (asc, ZeRO-3)"
  fi
  # expect_cast NAME SOURCE PRECISION: resumed from SOURCE at lr 0 under PRECISION, the saved
  # weights are SOURCE's cast.
  expect_cast() {
    local name=$1 source=$2 precision=$3
    if expect_ok "$name" run 2 --precision "$precision" --resume "$source" --lr 0 --adamw-lr 0 \
      --save-dir "$work/$name"; then
      if /usr/bin/python3 "$here/hf_reference.py" check-cast "$source" \
        "$work/$name/step-00000006" >"$work/$name.cast" 2>&1; then
        pass
      else
        fail "$name: $(cat "$work/$name.cast")"
      fi
    fi
  }
  expect_cast bf16_to_fp32 "$bref/step-00000003" fp32
  expect_cast fp32_to_bf16 "$ref/step-00000004" bf16
fi
cli_finish
