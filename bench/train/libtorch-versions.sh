#!/usr/bin/env bash
# The C++ trainer on two libtorch builds, side by side: fwd-bwd (canzona_model_profile, one rank)
# and the whole training step (canzona train at DP=N, the median step of its --json), on the
# qwen3-cpu preset's shape and the three shapes of vs-pytorch.sh, the two builds alternated
# --repeats times. Every run is printed, then per shape the medians and the ratio A / B.
#
#   A: a build dir (default build/: libtorch of .venv's torch wheel)
#   B: a build dir configured against another libtorch, e.g. Debian's 1.13:
#        apt-get install libtorch-dev python3-torch
#        cmake -S . -B build-113 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCANZONA_PYTHON=/usr/bin/python3
#        cmake --build build-113 --target canzona canzona-train canzona_model_profile
#
# Usage: bench/train/libtorch-versions.sh --b DIR [--a DIR] [--ranks N] [--steps S] [--warmup W]
#                                          [--repeats R] [--shapes preset,attention,optimizer]
set -euo pipefail

usage() { echo "usage: $0 --b DIR [--a DIR] [--ranks N] [--steps S] [--warmup W] [--repeats R] [--shapes LIST]" >&2; exit 2; }
die2() { echo "$0: $*" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
A="$ROOT/build" B="" N=2 S=8 W=3 R=3 SHAPES=preset,attention,optimizer
while [ $# -gt 0 ]; do
  case "$1" in
    --a) [ $# -ge 2 ] || usage; A=$2; shift 2 ;;
    --b) [ $# -ge 2 ] || usage; B=$2; shift 2 ;;
    --ranks) [ $# -ge 2 ] || usage; N=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; S=$2; shift 2 ;;
    --warmup) [ $# -ge 2 ] || usage; W=$2; shift 2 ;;
    --repeats) [ $# -ge 2 ] || usage; R=$2; shift 2 ;;
    --shapes) [ $# -ge 2 ] || usage; SHAPES=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die2 "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$B" ] || die2 "--b DIR is required (a build against the other libtorch)"
for pair in "ranks:$N" "steps:$S" "repeats:$R"; do
  v=${pair#*:}
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die2 "--${pair%%:*} must be a positive integer, got '$v'"
done
[[ "$W" =~ ^[0-9]+$ ]] && [ "$S" -gt "$W" ] || die2 "--warmup must be in [0, --steps)"
profile=train/canzona_model_profile
for d in "$A" "$B"; do  # each build's canzona, canzona-train and canzona_model_profile
  for f in apps/{canzona,canzona-train} "bench/$profile"; do
    [ -x "$d/$f" ] || die2 "$d/$f not built"
  done
done
shape_args() {
  case "$1" in
    preset) echo "256 8" ;; attention) echo "1024 2" ;; optimizer) echo "64 1" ;; *) return 1 ;;
  esac
}
IFS=, read -r -a shapes <<<"$SHAPES"
for shape in "${shapes[@]}"; do shape_args "$shape" >/dev/null || die2 "unknown shape '$shape'"; done

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
PY=/usr/bin/python3

libtorch_of() {  # the libtorch_cpu.so a build's canzona-train loads
  ldd "$1/apps/canzona-train" | awk '/libtorch_cpu/ {print $3}'
}
fwd_bwd() {  # $1 = build dir, $2 = seq, $3 = micro-batch; prints the median fwd-bwd ms
  "$1/bench/train/canzona_model_profile" --model qwen3-cpu --seq-len "$2" --micro-batch "$3" |
    sed -n 's/.*fwd-bwd median \([0-9.]*\) ms.*/\1/p'
}
step() {  # $1 = build dir, $2 = seq, $3 = micro-batch, $4 = tag; prints the median step ms
  local js="$OUT/$4.json"
  mpirun --allow-run-as-root --oversubscribe -np "$N" "$1/apps/canzona" train --model qwen3-cpu \
    --dp "$N" --optimizer muon --strategy lb-asc --steps "$S" --seq-len "$2" --micro-batch "$3" \
    --json "$js" >"$OUT/$4.log" 2>&1 || { tail -n 15 "$OUT/$4.log" >&2; return 1; }
  "$PY" -c 'import json,statistics,sys; d=json.load(open(sys.argv[1])); w=int(sys.argv[2]); print("%.1f" % statistics.median(s["ms"]["step"] for s in d["runs"][0]["steps"][w:]))' "$js" "$W"
}

echo "A: $A ($(libtorch_of "$A"))"
echo "B: $B ($(libtorch_of "$B"))"
echo "qwen3-cpu, fwd-bwd of one rank, step at DP=$N (median over steps $((W + 1))..$S), repeats $R, 1 thread, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for shape in "${shapes[@]}"; do
  read -r seq mb <<<"$(shape_args "$shape")"
  echo "== shape $shape: seq $seq, micro-batch $mb"
  fa=() fb=() sa=() sb=()
  for ((i = 1; i <= R; i++)); do
    x=$(fwd_bwd "$A" "$seq" "$mb"); fa+=("$x"); y=$(fwd_bwd "$B" "$seq" "$mb"); fb+=("$y")
    u=$(step "$A" "$seq" "$mb" "a-$shape-$i"); sa+=("$u"); v=$(step "$B" "$seq" "$mb" "b-$shape-$i"); sb+=("$v")
    printf 'run %d  fwd-bwd ms  A %s  B %s   step ms  A %s  B %s\n' "$i" "$x" "$y" "$u" "$v"
  done
  "$PY" - "$R" "${fa[@]}" "${fb[@]}" "${sa[@]}" "${sb[@]}" <<'EOF'
import statistics, sys
r = int(sys.argv[1]); v = [float(x) for x in sys.argv[2:]]
fa, fb, sa, sb = (statistics.median(v[k * r:(k + 1) * r]) for k in range(4))
print("median fwd-bwd  A %.1f ms  B %.1f ms  A/B %.3f" % (fa, fb, fa / fb))
print("median step     A %.1f ms  B %.1f ms  A/B %.3f" % (sa, sb, sa / sb))
EOF
done
