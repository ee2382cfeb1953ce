#!/usr/bin/env bash
# Repeats one `canzona compare` launch and reports every run plus the range and median of each
# figure docs/results.md quotes: optimizer step wall time (sc, lb-asc) and their ratio, busiest-rank
# optimizer CPU ratio, lb-asc's critical path against the plan, and DP/TP bytes per step.
# Usage: scripts/runtime-bench.sh RUNS NP [canzona compare flags...]
#   e.g. scripts/runtime-bench.sh 5 2 --model qwen3-mini --dp 2 --steps 7 --warmup 1
# Environment: CANZONA (default build/apps/canzona).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
runs=$1
np=$2
shift 2
canzona=${CANZONA:-build/apps/canzona}
export OPENBLAS_NUM_THREADS=1
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np")

echo "command: ${mpirun[*]} $canzona compare $*"
printf '%-4s %10s %10s %8s %8s %8s %12s %12s %10s %10s\n' run "sc opt ms" "lb opt ms" \
  "wall x" "CPU x" "lb crit" "sc DP MiB" "lb DP MiB" "sc TP MiB" "lb TP MiB"
rows=()
for ((i = 1; i <= runs; ++i)); do
  out=$("${mpirun[@]}" "$canzona" compare "$@")
  row=$(printf '%s\n' "$out" | awk -v run="$i" '
    # The phase table: strategy, step, fwd, bwd, grad-sync, opt, ..., DP grad, DP param, DP total, TP
    NF == 13 && ($1 == "sc" || $1 == "lb-asc") && $2 ~ /^[0-9.]+$/ {
      opt[$1] = $6; dp[$1] = $12; tp[$1] = $13 }
    # The busy lines: "<strategy> opt MAX / MEAN (xR) | ... | critical path C x predicted ..."
    $2 == "opt" && ($1 == "sc" || $1 == "lb-asc") {
      cpu[$1] = $3
      for (k = 1; k < NF; ++k) if ($k == "path") crit[$1] = $(k + 1) }
    END {
      if (!("sc" in opt) || !("lb-asc" in opt)) { print "parse-error"; exit 1 }
      printf "%-4s %10.2f %10.2f %8.2f %8.2f %8.3f %12.3f %12.3f %10.3f %10.3f\n", run,
        opt["sc"], opt["lb-asc"], opt["sc"] / opt["lb-asc"], cpu["sc"] / cpu["lb-asc"],
        crit["lb-asc"], dp["sc"], dp["lb-asc"], tp["sc"], tp["lb-asc"] }')
  printf '%s\n' "$row"
  rows+=("$row")
done
# Range and median of every column over the runs.
printf '%s\n' "${rows[@]}" | awk '
  { for (c = 2; c <= NF; ++c) v[c, NR] = $c; n = NR; cols = NF }
  END {
    for (c = 2; c <= cols; ++c) {
      m = 0
      for (i = 1; i <= n; ++i) s[i] = v[c, i]
      for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
      med[c] = n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
      lo[c] = s[1]; hi[c] = s[n]
    }
    printf "%-4s %10.2f %10.2f %8.2f %8.2f %8.3f %12.3f %12.3f %10.3f %10.3f\n", "med",
      med[2], med[3], med[4], med[5], med[6], med[7], med[8], med[9], med[10]
    printf "%-4s", "min"; for (c = 2; c <= cols; ++c) printf " %s", lo[c]; printf "\n"
    printf "%-4s", "max"; for (c = 2; c <= cols; ++c) printf " %s", hi[c]; printf "\n"
  }'
