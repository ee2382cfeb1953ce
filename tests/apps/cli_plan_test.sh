#!/usr/bin/env bash
# CLI checks for `canzona plan`. Usage: cli_plan_test.sh <canzona binary> <data dir>
# Every failure case must exit with code 2 and print exactly one line on stderr that contains the
# expected words; success cases check the files written. Prints "N passed, M failed" at the end.
set -u
canzona=$1
data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_usage_error "<expected substring>" args...
expect_usage_error() {
  local expected=$1
  shift
  "$canzona" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$rc" -ne 2 ]; then
    fail "canzona $* exited $rc, expected 2 (stderr: $(cat "$work/err"))"
  elif [ "$lines" -ne 1 ]; then
    fail "canzona $* printed $lines stderr lines, expected 1: $(cat "$work/err")"
  elif ! grep -qF -- "$expected" "$work/err"; then
    fail "canzona $*: stderr '$(cat "$work/err")' lacks '$expected'"
  else
    pass
  fi
}

expect_usage_error "unknown model 'qwen9-1t'" plan --model qwen9-1t
expect_usage_error "not an existing file" plan --model "$work/absent.json"
expect_usage_error "malformed JSON" plan --model "$data/malformed.json"
expect_usage_error "hidden_size" plan --model "$data/missing_hidden_config.json"
expect_usage_error "zero" plan --model "$data/zero_size_params.json"
expect_usage_error "--dp must be positive" plan --model qwen3-tiny --dp 0
expect_usage_error "--tp must be positive" plan --model qwen3-tiny --tp 0
expect_usage_error "--pp must be positive" plan --model qwen3-tiny --pp -1
expect_usage_error "--alpha must be in [0, 1]" plan --model qwen3-tiny --alpha 1.5
expect_usage_error "--cmax-mb must be positive" plan --model qwen3-tiny --cmax-mb 0
expect_usage_error "--cmax-mb must be between" plan --model qwen3-tiny --tp 2 --cmax-mb 1e-9
expect_usage_error "--cmax-mb must be between" plan --model qwen3-tiny --tp 2 --cmax-mb 1e30
expect_usage_error "--bucket-size must be >= 0" plan --model qwen3-tiny --bucket-size -5
expect_usage_error "ranks is more than" plan --model qwen3-tiny --dp 2000000
expect_usage_error "tp" plan --model qwen3-tiny --tp 3
expect_usage_error "pp=3" plan --model qwen3-tiny --pp 3
expect_usage_error "unknown strategy" plan --model qwen3-tiny --strategy fast
expect_usage_error "unknown optimizer" plan --model qwen3-tiny --optimizer lion
expect_usage_error "--calibration" plan --model qwen3-tiny --cost calibrated
expect_usage_error "no fit for optimizer 'soap'" plan --model qwen3-tiny --optimizer soap \
  --cost calibrated --calibration "$data/calibration.json"
expect_usage_error "--split-qkv" plan --model qwen3-tiny --split-qkv rows
expect_usage_error "--bogus" plan --model qwen3-tiny --bogus
expect_usage_error "--model" plan

# The calibrated cost model plans with a bench-kernels calibration file.
if "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --cost calibrated \
     --calibration "$data/calibration.json" >"$work/out" 2>"$work/err" &&
   grep -q "cost calibrated" "$work/out"; then pass; else fail "calibrated plan: $(cat "$work/err")"; fi

# More ranks than tasks is legal: the plan says so and exits 0.
if "$canzona" plan --model qwen3-tiny --dp 64 --planner paper >"$work/out" 2>"$work/err" &&
   grep -q "own no optimizer work" "$work/out"; then pass; else fail "idle ranks not reported"; fi

# JSON with the stable keys, SVG chart, and a param dump that plans identically.
if "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/plan.json" --svg "$work/plan.svg" \
     --dump-params "$work/params.json" >/dev/null 2>"$work/err"; then
  for key in '"plan_ms"' '"strategy"' '"dp"' '"tp"' '"pp"' '"balance"' '"lower_bound"' \
             '"tp.groups"' '"split_tensors"' '"buckets"' '"cuts"' '"owner"' '"micro_groups"' \
             '"tasks"' '"host"' '"plan_hash"'; do
    if grep -q "$key" "$work/plan.json"; then pass; else fail "plan.json lacks $key"; fi
  done
  if grep -q "<svg" "$work/plan.svg" && grep -q "lower bound" "$work/plan.svg"; then pass
  else fail "plan.svg is not a chart"; fi
  "$canzona" plan --model "$work/params.json" --dp 4 --tp 2 --json "$work/again.json" >/dev/null
  if [ "$(grep '"plan_hash"' "$work/plan.json")" = "$(grep '"plan_hash"' "$work/again.json")" ]; then
    pass
  else
    fail "a dumped param list plans differently from its preset"
  fi
else
  fail "plan with --json/--svg/--dump-params failed: $(cat "$work/err")"
fi

# The same command twice writes identical plans (deterministic to the byte, timing aside).
"$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/a.json" >/dev/null
"$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/b.json" >/dev/null
if diff <(grep -v plan_ms "$work/a.json") <(grep -v plan_ms "$work/b.json") >/dev/null; then pass
else fail "two runs wrote different plans"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
