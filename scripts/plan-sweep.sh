#!/usr/bin/env bash
# Our default plan beside the peers at their strongest, over Qwen3 0.6B-32B and
# Llama/Mistral-style HF configs (data/models/), DP x TP grids and both bucket sizes (Megatron's
# default max(40M, 1M x DP) and 400M elements). Peers, each a plan of the same binary:
#   lw-dup   Megatron-LM's layer-wise optimizer as shipped, its default duplicated TP
#   lw-shard the same with one home TP rank per weight (--layerwise-tp layer-sharded)
#   mc       the authors' Megatron-Canzona code (--planner megatron-canzona)
#   ours     lb-asc with our planner, its defaults
# Each group is the max/mean of DP FLOPs, DP memory, TP FLOPs, grid FLOPs and grid memory
# (metrics 1-5); then the busiest rank's optimizer FLOPs and state bytes of ours over the best
# peer's (B, M: below 1 is ours lighter), our gap to the best lower bound (DP and grid,
# mem/FLOPs) and lw-dup's padding.
# `behind` marks where ours is more than 0.5% above a peer on a comparable metric: 1-5 against mc
# and lw-shard, 1 against lw-dup, B and M against all three (make_plan's never-behind selection,
# src/plan/variants/never_behind.cpp, compares the same). `dup` marks lw-dup's metrics 2-5 that are lower than
# ours; duplicated TP computes and stores every TP-split update on every TP rank, so its TP and
# grid ratios are 1 and its memory ratios are over a mean inflated tp x (docs/results.md).
# Usage: scripts/plan-sweep.sh [canzona binary]
# SWEEP_MODELS and SWEEP_GRIDS (space-separated; grids as dp:tp) narrow the sweep, e.g.
# SWEEP_MODELS="qwen3-8b llama-3.1-8b" SWEEP_GRIDS="32:8". Exit status 0 (the count is printed).
set -euo pipefail
canzona=${1:-build/apps/canzona}
data=$(dirname "$0")/../data/models  # Llama/Mistral-style HF configs (data/models/README.md)
models=()
for m in ${SWEEP_MODELS:-qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b qwen3-14b qwen3-32b llama-2-7b \
  mistral-7b llama-3.1-8b llama-3.1-70b}; do
  if [ -f "$data/$m.json" ]; then models+=("$data/$m.json"); else models+=("$m"); fi
done
read -r -a grids <<<"${SWEEP_GRIDS:-8:1 16:2 32:4 32:8 64:4 128:8}"
metrics=("DP FLOPs" "DP memory" "TP FLOPs" "grid FLOPs" "grid memory")
fmt='%-13s %-9s %-4s %-9s %-7s | %-29s | %-29s | %-29s | %-29s | %-11s | %-9s %-9s | %s\n'
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" model grid bkt behind dup "lw-dup dpF dpM tpF gF gM" "lw-shard" "mc" "ours" \
  "B / M" "gap dp" "gap grid" "lw-dup padding"
rows=0 worse=0
for model in "${models[@]}"; do
  for grid in "${grids[@]}"; do
    dp=${grid%:*} tp=${grid#*:}
    for buckets in 0 400000000; do
      rows=$((rows + 1))
      dup=$("$canzona" plan --model "$model" --dp "$dp" --tp "$tp" --bucket-size "$buckets")
      shard=$("$canzona" plan --model "$model" --dp "$dp" --tp "$tp" --bucket-size "$buckets" \
        --layerwise-tp layer-sharded)
      # Columns of `canzona plan`: asc, layerwise, lb-asc (paper), lb-asc (megatron-canzona), ours;
      # the label "lb-asc (megatron-canzona)" spans two fields, so count from the end.
      row() { awk -v m="$2" -v k="$3" 'index($0, m) == 1 { print $(NF - k) }' <<<"$1"; }
      group() {
        local line="" m
        for m in "${metrics[@]}"; do line+="$(row "$1" "$m " "$2") "; done
        echo "${line% }"
      }
      # "max rank GFLOP / GiB": three fields per column (X / Y), five columns.
      busy() { awk -v k="$2" 'index($0, "max rank GFLOP") == 1 { print $(NF - k), $(NF - k + 2) }' \
        <<<"$1"; }
      lw_dup=$(group "$dup" 3) lw_shard=$(group "$shard" 3) mc=$(group "$dup" 1)
      ours=$(group "$dup" 0)
      ratios=$(awk -v a="$(busy "$dup" 11)" -v b="$(busy "$shard" 11)" -v c="$(busy "$dup" 5)" \
        -v d="$(busy "$dup" 2)" 'BEGIN {
          split(a, x); split(b, y); split(c, z); split(d, w);
          f = x[1]; if (y[1] < f) f = y[1]; if (z[1] < f) f = z[1];
          m = x[2]; if (y[2] < m) m = y[2]; if (z[2] < m) m = z[2];
          printf "%.2f %.2f", w[1] / f, w[2] / m }')
      mark=$(awk -v a="$lw_dup" -v b="$lw_shard" -v c="$mc" -v d="$ours" -v r="$ratios" 'BEGIN {
        split(a, x); split(b, y); split(c, z); split(d, w); split(r, q); s = "";
        for (i = 1; i <= 5; i++)
          if (w[i] > 1.005 * y[i] || w[i] > 1.005 * z[i] || (i == 1 && w[i] > 1.005 * x[i]))
            s = s "*" i;
        if (q[1] > 1.005) s = s "*B";
        if (q[2] > 1.005) s = s "*M";
        print s }')
      dups=$(awk -v a="$lw_dup" -v d="$ours" 'BEGIN {
        split(a, x); split(d, w); s = "";
        for (i = 2; i <= 5; i++) if (w[i] > 1.005 * x[i]) s = s "*" i;
        print s }')
      [ -n "$mark" ] && worse=$((worse + 1))
      gap_dp=$(awk 'index($0, "  DP ratio/bound") == 1 { print $NF }' <<<"$dup")
      gap_grid=$(awk 'index($0, "  grid ratio/bound") == 1 { print $NF }' <<<"$dup")
      padding=$(awk 'index($0, "padding elements") == 1 { print $7, $8 }' <<<"$dup")
      # shellcheck disable=SC2059
      printf "$fmt" "$(basename "$model" .json)" "dp$dp.tp$tp" \
        "$([ "$buckets" = 0 ] && echo mega || echo 400M)" "${mark:--}" "${dups:--}" \
        "$lw_dup" "$lw_shard" "$mc" "$ours" "${ratios/ / \/ }" "$gap_dp" "$gap_grid" "$padding"
    done
  done
done
echo "rows where ours is behind a peer on a comparable metric (column behind): $worse of $rows"
