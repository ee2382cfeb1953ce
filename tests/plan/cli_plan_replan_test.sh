#!/usr/bin/env bash
# End-to-end checks of `canzona plan --from-plan OLD.json` (minimum-movement re-planning).
# Usage: cli_plan_replan_test.sh <canzona binary> <canzona_check_output binary>
#
# * Round trip: a plan re-planned from its own JSON on the same grid moves 0 bytes and keeps
#   every task; DP 4 -> 3 re-plans and moves no more than the from-scratch plan; a min-movement
#   plan's JSON is re-made through its recorded recipe (4 -> 3 -> 3 moves nothing, 4 -> 3 -> 4
#   works); an OLD.json made with other split flags is re-made from its recorded flags.
# * Bad OLD.json files (hash mismatch, another model, a missing key, a key of the wrong type, not
#   JSON, absent) and a bad --move-tolerance exit 2 with one stderr line and write no --json file.
# Prints "N passed, M failed" at the end.
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$2"

m=(--model qwen3-tiny --tp 2)
expect_ok old "$canzona" plan "${m[@]}" --dp 4 --json "$work/a.json"

# Same grid: nothing moves, every task kept.
if expect_ok same "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/a.json" --json "$work/b.json"; then
  check_file "$work/b.json" json /dp==4 /replan/min_movement/moved_state_bytes==0 \
    /replan/min_movement/moved_tasks==0 /replan/min_movement/kept_tasks">0" \
    /replan/from_scratch/moved_state_bytes==0 /replan/move_tolerance==0.05 \
    /replan/from_plan_hash:int /plan_hash==@/replan/min_movement/plan_hash
  if grep -q "state moved (GiB)" "$work/same.out"; then pass; else fail "no movement report"; fi
fi

# DP 4 -> 3: a plan for 3 ranks that moves no more than planning from scratch.
if expect_ok down "$canzona" plan "${m[@]}" --dp 3 --from-plan "$work/a.json" \
  --move-tolerance 0.1 --json "$work/c.json"; then
  check_file "$work/c.json" json /dp==3 /stages/0/loads#==3 /replan/move_tolerance==0.1 \
    /replan/min_movement/moved_state_bytes">=0" \
    /replan/min_movement/moved_state_bytes"<=@/replan/from_scratch/moved_state_bytes" \
    /replan/min_movement/balance/dp/flops">=1"
fi

# A min-movement plan is re-made from its recipe (replan.from): re-planning from it on its own grid
# moves nothing, and a chain 4 -> 3 -> 4 works.
if expect_ok chain "$canzona" plan "${m[@]}" --dp 3 --from-plan "$work/c.json" --json "$work/d.json"; then
  check_file "$work/d.json" json /replan/min_movement/moved_state_bytes==0 /replan/from/dp==3 \
    /replan/from/replan/from/dp==4 /replan/from/replan/move_tolerance==0.1
fi
expect_ok back "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/c.json"

# Recorded split flags re-make the old plan even when the new run uses others.
expect_ok split "$canzona" plan "${m[@]}" --dp 2 --split-fc1 --split-qkv qkv --json "$work/s.json"
expect_ok resplit "$canzona" plan "${m[@]}" --dp 3 --from-plan "$work/s.json"

# Bad OLD.json files.
sed 's/^  "plan_hash": [0-9]*/  "plan_hash": 12345/' "$work/a.json" >"$work/hash.json"
expect_usage_error "does not match the plan its recorded options give" \
  "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/hash.json" --json "$work/x.json"
expect_absent "$work/x.json"
expect_usage_error "key 'model'" "$canzona" plan --model qwen3-mini --tp 2 --from-plan "$work/a.json"
sed '/^  "bucket_size"/d' "$work/a.json" >"$work/nokey.json"
expect_usage_error "nokey.json: missing key 'bucket_size'" \
  "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/nokey.json" --json "$work/x.json"
expect_absent "$work/x.json"
sed 's/^  "dp": 4/  "dp": "four"/' "$work/a.json" >"$work/type.json"
expect_usage_error "key 'dp' has the wrong type" \
  "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/type.json"
echo "not json {" >"$work/bad.json"
expect_usage_error "malformed JSON" "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/bad.json"
expect_usage_error "cannot read file" "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/absent.json"
expect_usage_error "--move-tolerance must be finite" \
  "$canzona" plan "${m[@]}" --dp 4 --from-plan "$work/a.json" --move-tolerance -1

cli_finish
