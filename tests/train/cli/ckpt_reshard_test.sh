#!/usr/bin/env bash
# Resharding a checkpoint across DP, TP and strategy (issue 12, item 4).
# Usage: ckpt_reshard_test.sh <canzona> <mpirun> <canzona_check_output>
#
# A checkpoint is in model space, so loading it in any shape and saving it again at once must
# reproduce its model.safetensors and optimizer.safetensors byte for byte: that proves every rank
# of the new shape read exactly the params and optimizer state the new plan gives it (a wrong
# range, a missed slice or a mis-mapped TP shard changes bytes).
#   1. DP=2 x TP=2 lb-asc (q/k/v and gate/up split) trains 4 steps, saving at 2 and 4 (A).
#   2. A/step-2 -> DP=2 x TP=1 sc -> DP=1 x TP=1 asc -> DP=1 x TP=2 lb-asc, each resumed at step 2
#      and saved at once: all four copies of step 2 are byte-identical (TP 2 -> 1 -> 2).
#   3. The last copy, resumed under DP=2 x TP=2 sc (another strategy) for steps 3..4, gives A's
#      losses bit for bit and A's step-4 files byte for byte: the state survived three reshapes.
#   4. The run "started in the new shape from that state": A/step-2 resumed directly under
#      DP=1 x TP=1 for steps 3..4 equals the same run resumed from the DP=1 x TP=1 copy.
#   5. DP 4 -> 2: a DP=4 checkpoint loads under DP=2 and saves byte-identically.
#   6. An unsplit fc1 (task rows in TP 2's [gate_t; up_t] order) cannot move to TP 1: exit 2,
#      the tensor and the remedy named.
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
set +f

run() { train_quick "$1" --eval-every 0 "${@:2}"; }
split=(--split-qkv qkv --split-fc1)
same_state() {  # same_state DIR_A DIR_B WHAT
  if cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
    cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"; then
    pass
  else
    fail "$3: $1 and $2 differ"
  fi
}
losses() { step_losses "$1" "$2" | grep -v -e "^val" -e "^params_hash"; }

a=$work/a
expect_ok a run 4 "${split[@]}" --dp 2 --tp 2 --steps 4 --save-every 2 --save-dir "$a" \
  --json "$work/a.json" || { cli_finish; exit; }
s2=step-00000002

# --- 2. TP 2 -> 1 -> 2 through three strategies, each saved at once.
prev=$a/$s2
for shape in "2 2 1 sc" "1 1 1 asc" "2 1 2 lb-asc"; do
  read -r np dp tp strategy <<<"$shape"
  out=$work/dp${dp}tp${tp}
  if expect_ok "dp${dp}tp${tp}" run "$np" "${split[@]}" --dp "$dp" --tp "$tp" --strategy "$strategy" \
    --steps 2 --resume "$prev" --save-dir "$out"; then
    same_state "$a/$s2" "$out/$s2" "step 2 reloaded under DP=$dp TP=$tp $strategy and saved"
    if grep -q "no steps run" "$work/dp${dp}tp${tp}.out"; then pass; else
      fail "a run resumed at its last step must not train: $(tail -3 "$work/dp${dp}tp${tp}.out")"
    fi
  fi
  prev=$out/$s2
done

# --- 3. Back to DP=2 x TP=2 under sc: A's steps 3..4 bit for bit.
if expect_ok back run 4 "${split[@]}" --dp 2 --tp 2 --strategy sc --steps 4 --resume "$prev" \
  --save-dir "$work/back" --json "$work/back.json"; then
  if diff <(losses "$work/a.json" 3) <(losses "$work/back.json" 3) >"$work/d1" &&
    [ "$(losses "$work/back.json" 3 | wc -l)" -eq 2 ]; then
    pass
  else
    fail "losses after three reshapes differ from the run that never stopped: $(cat "$work/d1")"
  fi
  same_state "$a/step-00000004" "$work/back/step-00000004" "step 4 after three reshapes"
fi

# --- 4. Resumed directly in the new shape = resumed from that shape's own save.
expect_ok direct run 1 "${split[@]}" --steps 4 --resume "$a/$s2" --save-dir "$work/direct"
expect_ok own run 1 "${split[@]}" --steps 4 --resume "$work/dp1tp1/$s2" --save-dir "$work/own"
same_state "$work/direct/step-00000004" "$work/own/step-00000004" \
  "DP=1 x TP=1 from A's step 2 vs from its DP=1 x TP=1 copy"

# --- 5. DP 4 -> 2.
if expect_ok dp4 run 4 --dp 4 --steps 2 --save-dir "$work/dp4"; then
  expect_ok dp4to2 run 2 --dp 2 --steps 2 --resume "$work/dp4" --save-dir "$work/dp4to2"
  same_state "$work/dp4/$s2" "$work/dp4to2/$s2" "DP=4 checkpoint reloaded under DP=2"
fi

# --- 6. Unsplit fc1 under TP 2 cannot move to TP 1.
if expect_ok fused run 2 --tp 2 --steps 1 --save-dir "$work/fused"; then
  run 1 --steps 2 --resume "$work/fused" >"$work/fused1.out" 2>"$work/fused1.err"
  rc=$?
  n=$(grep -c "gate_up_proj.weight.momentum_buffer' holds an unsplit fc1 in TP 2.*--split-fc1" \
    "$work/fused1.err")
  if [ "$rc" -eq 2 ] && [ "$n" -eq 1 ]; then pass; else
    fail "unsplit fc1 TP 2 -> 1: exit $rc, message lines $n: $(head -3 "$work/fused1.err")"
  fi
fi
cli_finish
