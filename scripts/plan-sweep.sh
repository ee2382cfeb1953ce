#!/usr/bin/env bash
# Our default plan beside the peers at their strongest (issue 13), over Qwen3 sizes, grids and
# both bucket sizes: Megatron-LM's layer-wise optimizer as shipped (layerwise), the authors'
# Megatron-Canzona code (lb-asc megatron-canzona) and ours (lb-asc canzona), each row the
# max/mean of DP FLOPs, DP memory, TP FLOPs, grid FLOPs and grid memory, and the last columns our
# gap to the best lower bound (DP and grid, mem/FLOPs), the busiest rank's optimizer FLOPs of
# layerwise and of megatron-canzona over ours, and layerwise's padding. "behind" lists the
# metrics (1-5 in that order) where ours is more than 0.5% above a peer's max/mean.
# Usage: scripts/plan-sweep.sh [canzona binary]
set -euo pipefail
canzona=${1:-build/apps/canzona}
metrics=("DP FLOPs" "DP memory" "TP FLOPs" "grid FLOPs" "grid memory")
printf '%-10s %-10s %-6s %-7s | %-34s | %-34s | %-34s | %-9s %-9s %-10s %s\n' model grid \
  buckets behind "layerwise dpF dpM tpF gF gM" "megatron-canzona dpF dpM tpF gF gM" \
  "ours dpF dpM tpF gF gM" "gap dp" "gap grid" "busiest/us" "layerwise padding"
worse=0
for model in qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b qwen3-14b qwen3-32b; do
  for grid in "8 1" "16 2" "32 4" "32 8" "64 4" "128 8"; do
    read -r dp tp <<<"$grid"
    for buckets in 0 400000000; do
      out=$("$canzona" plan --model "$model" --dp "$dp" --tp "$tp" --bucket-size "$buckets")
      # Columns of `canzona plan`: asc, layerwise, lb-asc (paper), lb-asc (megatron-canzona), ours;
      # the label "lb-asc (megatron-canzona)" spans two fields, so count from the end.
      row() { awk -v m="$1" -v k="$2" 'index($0, m) == 1 { print $(NF - k) }' <<<"$out"; }
      cells=()
      for who in 3 1 0; do
        line=""
        for m in "${metrics[@]}"; do line+="$(row "$m " "$who") "; done
        cells+=("$line")
      done
      gap_dp=$(awk 'index($0, "  DP ratio/bound") == 1 { print $NF }' <<<"$out")
      gap_grid=$(awk 'index($0, "  grid ratio/bound") == 1 { print $NF }' <<<"$out")
      # Busiest rank's optimizer FLOPs, peer over ours: what the step time follows. (A duplicated
      # TP mode has max/mean 1 on the TP axis because every TP rank does all the work.)
      busiest=$(awk 'index($0, "max rank GFLOP") == 1 {
        printf "%.2f %.2f", $(NF - 11) / $(NF - 2), $(NF - 5) / $(NF - 2) }' <<<"$out")
      padding=$(awk 'index($0, "padding elements") == 1 { print $7, $8 }' <<<"$out")
      # Where ours is behind a peer on any metric by more than 0.5%: mark the row.
      mark=$(awk -v a="${cells[0]}" -v b="${cells[1]}" -v c="${cells[2]}" 'BEGIN {
        split(a, x); split(b, y); split(c, z); s = "";
        for (i = 1; i <= 5; i++) if (z[i] > 1.005 * x[i] || z[i] > 1.005 * y[i]) s = s "*" i;
        print s }')
      [ -n "$mark" ] && worse=$((worse + 1))
      printf '%-10s %-10s %-6s %-7s | %-34s | %-34s | %-34s | %-9s %-9s %-10s %s\n' "$model" \
        "dp$dp.tp$tp" "$([ "$buckets" = 0 ] && echo mega || echo 400M)" "${mark:--}" \
        "${cells[0]}" "${cells[1]}" "${cells[2]}" "$gap_dp" "$gap_grid" "$busiest" "$padding"
    done
  done
done
echo "rows where ours is behind a peer's max/mean on some metric: $worse"
