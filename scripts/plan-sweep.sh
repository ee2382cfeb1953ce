#!/usr/bin/env bash
# Balance of our planner over Qwen3 sizes and grids (the README's sweep table): the last column of
# `canzona plan`'s table (ours) for DP and grid memory/FLOPs and their lower bounds.
# Usage: scripts/plan-sweep.sh [canzona binary]
set -euo pipefail
canzona=${1:-build/apps/canzona}
printf '%-11s %-13s %-14s %-12s %-14s %-12s\n' model grid "DP mem/FLOPs" "DP bound" \
  "grid mem/FLOPs" "grid bound"
for model in qwen3-1.7b qwen3-4b qwen3-8b qwen3-14b qwen3-32b; do
  for grid in "16 2" "32 4" "32 8" "64 4" "128 8"; do
    read -r dp tp <<<"$grid"
    "$canzona" plan --model "$model" --dp "$dp" --tp "$tp" | awk -v m="$model" -v g="dp=$dp tp=$tp" '
      /^DP memory/ { dpm = $NF } /^DP FLOPs/ { dpf = $NF } /DP lower bound/ { dpb = $NF }
      /^grid memory/ { gm = $NF } /^grid FLOPs/ { gf = $NF } /grid lower bound/ { gb = $NF }
      END { printf "%-11s %-13s %-14s %-12s %-14s %-12s\n", m, g, dpm "/" dpf, dpb, gm "/" gf, gb }'
  done
done
