#!/usr/bin/env bash
# Training throughput, Canzona vs PyTorch, on the same ranks and data.
#
#   ours:   mpirun -np N build/apps/canzona train --model qwen3-cpu --dp N --tp 1
#             --optimizer muon --strategy lb-asc ...
#   theirs: bench/train/torch_ddp_muon.py (DDP over gloo + distributed Muon / AdamW)
#
# The two sides run alternately, --repeats times each, one thread per rank. Every run is
# printed, then the median tokens/s of each side and the ratio ours / theirs.
#
# Usage: bench/train/vs-pytorch.sh [--ranks N] [--steps S] [--seq-len L] [--micro-batch B]
#                                  [--repeats R] [--only ours|torch|both] [--canzona PATH]
#                                  [--keep DIR]
# Run from anywhere; paths are taken relative to the repository root.
set -euo pipefail

usage() { echo "usage: $0 [--ranks N] [--steps S] [--seq-len L] [--micro-batch B] [--repeats R] [--only ours|torch|both] [--canzona PATH] [--keep DIR]" >&2; exit 2; }
die2() { echo "$0: $*" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=2 S=20 L=128 B=4 R=3 ONLY=both KEEP=""
CANZONA="$ROOT/build/apps/canzona"
PY=/usr/bin/python3  # Debian's python3-torch loads only in the system interpreter

while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) [ $# -ge 2 ] || usage; N=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; S=$2; shift 2 ;;
    --seq-len) [ $# -ge 2 ] || usage; L=$2; shift 2 ;;
    --micro-batch) [ $# -ge 2 ] || usage; B=$2; shift 2 ;;
    --repeats) [ $# -ge 2 ] || usage; R=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || usage; ONLY=$2; shift 2 ;;
    --canzona) [ $# -ge 2 ] || usage; CANZONA=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || usage; KEEP=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die2 "unknown argument '$1' (see --help)" ;;
  esac
done

for pair in "ranks:$N" "steps:$S" "seq-len:$L" "micro-batch:$B" "repeats:$R"; do
  v=${pair#*:}
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die2 "--${pair%%:*} must be a positive integer, got '$v'"
done
case "$ONLY" in ours|torch|both) ;; *) die2 "--only must be ours, torch or both, got '$ONLY'" ;; esac
[ "$S" -ge 3 ] || die2 "--steps must be >= 3 (the first 2 are timing warmup)"
if [ "$ONLY" != torch ]; then
  [ -x "$CANZONA" ] || die2 "$CANZONA not built (cmake --build build)"
  command -v mpirun >/dev/null || die2 "mpirun not found"
fi
[ "$ONLY" = ours ] || [ -x "$PY" ] || die2 "$PY not found (apt-get install python3-torch)"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"; OUT=$KEEP
else
  OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
fi

# json_get FILE EXPR: print EXPR evaluated on the loaded JSON object `d`.
json_get() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

run_ours() {  # $1 = repeat index; prints tokens/s
  local js="$OUT/ours-$1.json" log="$OUT/ours-$1.log"
  if ! mpirun --allow-run-as-root --oversubscribe -np "$N" "$CANZONA" train --model qwen3-cpu \
      --dp "$N" --tp 1 --optimizer muon --strategy lb-asc --steps "$S" --seq-len "$L" \
      --micro-batch "$B" --json "$js" >"$log" 2>&1; then
    echo "ours run $1 failed; last lines of $log:" >&2; tail -n 15 "$log" >&2; return 1
  fi
  json_get "$js" '"%.1f" % d["runs"][0]["median_tokens_per_s"]' 2>/dev/null || {
    echo "ours run $1: no runs[0].median_tokens_per_s in $js" >&2; return 1; }
}

run_torch() {  # $1 = repeat index; prints tokens/s
  local js="$OUT/torch-$1.json" log="$OUT/torch-$1.log"
  if ! "$PY" "$ROOT/bench/train/torch_ddp_muon.py" --ranks "$N" --steps "$S" \
      --warmup-steps-excluded 2 --seq-len "$L" --micro-batch "$B" --json "$js" >"$log" 2>&1; then
    echo "torch run $1 failed; last lines of $log:" >&2; tail -n 15 "$log" >&2; return 1
  fi
  json_get "$js" '"%.1f  (step %.1f ms: fwd+bwd %.1f, optimizer %.1f; loss %.3f -> %.3f)" % (d["tokens_per_s_median"], d["step_ms_median"], d["fwd_bwd_ms_median"], d["opt_ms_median"], d["loss"][0], d["loss"][-1])'
}

echo "qwen3-cpu, ranks $N, steps $S, seq-len $L, micro-batch $B, repeats $R, 1 thread per rank"
ours=() theirs=()
for ((i = 1; i <= R; i++)); do
  if [ "$ONLY" != torch ]; then
    line=$(run_ours "$i") || exit 1
    ours+=("${line%% *}"); printf 'run %d  canzona  tokens/s %s\n' "$i" "$line"
  fi
  if [ "$ONLY" != ours ]; then
    line=$(run_torch "$i") || exit 1
    theirs+=("${line%% *}"); printf 'run %d  pytorch  tokens/s %s\n' "$i" "$line"
  fi
done

"$PY" - "${#ours[@]}" "${ours[@]}" "${theirs[@]}" <<'EOF'
import statistics, sys
n = int(sys.argv[1]); vals = [float(x) for x in sys.argv[2:]]
ours, theirs = vals[:n], vals[n:]
mo = statistics.median(ours) if ours else None
mt = statistics.median(theirs) if theirs else None
print("median tokens/s:  canzona %s   pytorch %s" % (
    "%.1f" % mo if mo is not None else "-", "%.1f" % mt if mt is not None else "-"))
if mo is not None and mt is not None:
    print("ratio canzona / pytorch: %.2fx" % (mo / mt))
EOF
