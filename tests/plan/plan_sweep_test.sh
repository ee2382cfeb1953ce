#!/usr/bin/env bash
# scripts/plan-sweep.sh narrowed to two models (a Qwen3 preset and a Llama HF config from
# data/models/) on two grids: a header, one row per (model, grid, bucket size) with five max/mean
# values for each of lw-dup, lw-shard, mc and ours, and the count line, which must say that ours is
# behind no peer on these rows (each was behind or close before the never-behind selection:
# qwen3-0.6b dp16.tp2 mega had DP FLOPs 1.227 against layer-wise's 1.160).
# Usage: plan_sweep_test.sh <repo root> <canzona binary>
set -uo pipefail
root=$1 canzona=$2
failed=0 passed=0
check() {
  if eval "$2"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
out=$(SWEEP_MODELS="qwen3-0.6b llama-2-7b" SWEEP_GRIDS="8:1 16:2" \
  bash "$root/scripts/plan-sweep.sh" "$canzona" 2>&1)
status=$?
check "sweep exits 0 (got $status)" '[ "$status" -eq 0 ]'
rows=$(grep -cE '^(qwen3-0.6b|llama-2-7b) ' <<<"$out")
check "8 rows (got $rows)" '[ "$rows" -eq 8 ]'
# Every row: four groups of five numbers between the bars.
bad=$(grep -E '^(qwen3-0.6b|llama-2-7b) ' <<<"$out" | awk -F'|' '{
  for (g = 2; g <= 5; g++) { n = split($g, v, " "); if (n != 5) { print; next }
    for (i = 1; i <= 5; i++) if (v[i] !~ /^[0-9]+\.[0-9]+$/ || v[i] < 1) { print; next } } }')
check "every row has 4 x 5 max/mean values >= 1 (bad rows: $bad)" '[ -z "$bad" ]'
check "the llama config was read (dp16.tp2 row)" 'grep -qE "^llama-2-7b +dp16.tp2 +mega" <<<"$out"'
check "count line says 0 of 8" \
  'grep -qx "rows where ours is behind a peer on a comparable metric (column behind): 0 of 8" <<<"$out"'
if [ "$failed" -ne 0 ]; then echo "$out"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
