#!/usr/bin/env bash
# Training throughput, Canzona vs PyTorch, on the same ranks, model, data and steps.
#
#   ours:   mpirun -np N build/apps/canzona train --model qwen3-cpu --dp N --tp 1
#             --optimizer muon --strategy lb-asc --seq-len L --micro-batch B ...
#   theirs: bench/train/torch_ddp_muon.py (DDP over gloo + distributed Muon / AdamW, the same
#           matrices, Muon scaling, learning rates, schedule and block-causal attention), once
#           with glibc malloc and once with tcmalloc (Debian's libtcmalloc.so.4, LD_PRELOAD), the
#           allocator PyTorch's CPU tuning guides recommend; the faster of the two is the baseline.
#
# Shapes (qwen3-cpu, 22M params):
#   preset     seq 256,  micro-batch 8  (the CPU training preset's shape)
#   attention  seq 1024, micro-batch 2  (attention's share of fwd-bwd is largest)
#   optimizer  seq 64,   micro-batch 1  (the Muon step is most of the step)
#
# Both sides run one thread per rank, with the same OpenBLAS core (--coretype, default: the
# environment's; torch 2.x's own products run in MKL and oneDNN, which it does not set), and are
# timed the same way: the median over steps --warmup+1 .. --steps of the
# step's wall time (max over ranks; forward, backward, gradient sync, both optimizers, param
# sync). The sides run alternately, --repeats times each. Every run is printed, then per shape
# the medians and the ratio ours / the faster PyTorch.
#
# --precision bf16 runs ours with --precision bf16 (bf16 params, gradients and collectives, fp32
# main params and state) and theirs under CPU autocast to bf16 (torch_ddp_muon.py --autocast bf16:
# bf16 products, fp32 params, gradients and all-reduce), PyTorch's own mixed precision.
#
# --ns-dtype bf16 (the default) runs both sides' Newton-Schulz products in bf16, as the peers'
# users run them: ours with --ns-dtype bf16 (operands rounded to bf16, fp32 sums; bf16_products.h
# says on which library), torch_ddp_muon.py with --ns-dtype bf16 (Keller Jordan's bf16 loop);
# --ns-dtype fp32 runs both in fp32. muon-fsdp2 (--peer fsdp2) runs its own bf16 loop either way.
# --ns-algorithm gram runs ours with the Gram iteration (the peers have none).
#
# --peer fsdp2 compares the ZeRO-3 sides instead: ours with --zero-stage 3, theirs
# bench/train/torch_fsdp2_muon.py (FSDP2's fully_shard over gloo + muon-fsdp2's distributed Muon).
#
# Usage: bench/train/vs-pytorch.sh [--ranks N] [--steps S] [--warmup W] [--repeats R]
#                                  [--shapes preset,attention,optimizer] [--coretype CORE]
#                                  [--canzona PATH] [--keep DIR] [--peer ddp|fsdp2]
#                                  [--precision fp32|bf16] [--ns-dtype fp32|bf16]
#                                  [--ns-algorithm standard|gram]
set -euo pipefail

usage() { echo "usage: $0 [--ranks N] [--steps S] [--warmup W] [--repeats R] [--shapes LIST] [--coretype CORE] [--canzona PATH] [--keep DIR] [--peer ddp|fsdp2] [--precision fp32|bf16] [--ns-dtype fp32|bf16] [--ns-algorithm standard|gram]" >&2; exit 2; }
die2() { echo "$0: $*" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=2 S=8 W=3 R=3 SHAPES=preset,attention,optimizer CORE="" KEEP="" PEER=ddp PRECISION=fp32
NS_DTYPE=bf16 NS_ALGORITHM=standard
CANZONA="$ROOT/build/apps/canzona"
PY=${CANZONA_PYTHON:-$ROOT/.venv/bin/python}  # the project's torch 2.x (scripts/install-deps.sh)
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4

while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) [ $# -ge 2 ] || usage; N=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; S=$2; shift 2 ;;
    --warmup) [ $# -ge 2 ] || usage; W=$2; shift 2 ;;
    --repeats) [ $# -ge 2 ] || usage; R=$2; shift 2 ;;
    --shapes) [ $# -ge 2 ] || usage; SHAPES=$2; shift 2 ;;
    --coretype) [ $# -ge 2 ] || usage; CORE=$2; shift 2 ;;
    --canzona) [ $# -ge 2 ] || usage; CANZONA=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || usage; KEEP=$2; shift 2 ;;
    --peer) [ $# -ge 2 ] || usage; PEER=$2; shift 2 ;;
    --precision) [ $# -ge 2 ] || usage; PRECISION=$2; shift 2 ;;
    --ns-dtype) [ $# -ge 2 ] || usage; NS_DTYPE=$2; shift 2 ;;
    --ns-algorithm) [ $# -ge 2 ] || usage; NS_ALGORITHM=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die2 "unknown argument '$1' (see --help)" ;;
  esac
done

for pair in "ranks:$N" "steps:$S" "repeats:$R"; do
  v=${pair#*:}
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die2 "--${pair%%:*} must be a positive integer, got '$v'"
done
[[ "$W" =~ ^[0-9]+$ ]] || die2 "--warmup must be a non-negative integer, got '$W'"
case "$PEER" in
  ddp) PEER_SCRIPT=torch_ddp_muon.py; OURS_ZERO=1 ;;
  fsdp2) PEER_SCRIPT=torch_fsdp2_muon.py; OURS_ZERO=3 ;;
  *) die2 "--peer must be ddp or fsdp2, got '$PEER'" ;;
esac
case "$PRECISION" in
  fp32) AUTOCAST=off PEER_ARGS="" ;;
  bf16) AUTOCAST=bf16 PEER_ARGS="--autocast bf16"; [ "$PEER" = ddp ] || die2 "--precision bf16 compares with --peer ddp only" ;;
  *) die2 "--precision must be fp32 or bf16, got '$PRECISION'" ;;
esac
case "$NS_DTYPE" in
  fp32|bf16) [ "$PEER" = ddp ] && PEER_ARGS="$PEER_ARGS --ns-dtype $NS_DTYPE" ;;
  *) die2 "--ns-dtype must be fp32 or bf16, got '$NS_DTYPE'" ;;
esac
case "$NS_ALGORITHM" in
  standard|gram) ;;
  *) die2 "--ns-algorithm must be standard or gram, got '$NS_ALGORITHM'" ;;
esac
[ "$S" -gt "$W" ] || die2 "--steps ($S) must exceed --warmup ($W)"
shape_args() {  # $1 = shape; prints "seq micro-batch"
  case "$1" in
    preset) echo "256 8" ;;
    attention) echo "1024 2" ;;
    optimizer) echo "64 1" ;;
    *) return 1 ;;
  esac
}
IFS=, read -r -a shapes <<<"$SHAPES"
for shape in "${shapes[@]}"; do
  shape_args "$shape" >/dev/null || die2 "--shapes: unknown shape '$shape' (preset, attention, optimizer)"
done
[ -x "$CANZONA" ] || die2 "$CANZONA not built (make build)"
command -v mpirun >/dev/null || die2 "mpirun not found"
[ -x "$PY" ] || die2 "$PY not found (scripts/install-deps.sh)"
[ -r "$TCMALLOC" ] || die2 "$TCMALLOC not found (scripts/install-deps.sh installs libgoogle-perftools4)"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ -n "$CORE" ]; then  # another core for this benchmark alone, the same for every side
  unset OPENBLAS_L2_SIZE
  export OPENBLAS_CORETYPE=$CORE
fi

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"; OUT=$KEEP
else
  OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
fi

# Median over steps W+1..S of a JSON's per-step records; prints tokens/s and a breakdown.
summarise_ours() {
  "$PY" - "$1" "$W" <<'EOF'
import json, statistics, sys
d = json.load(open(sys.argv[1])); w = int(sys.argv[2])
steps = d["runs"][0]["steps"][w:]
med = lambda k: statistics.median(s["ms"][k] for s in steps)
step = med("step")
print("%.1f  (step %.1f ms: fwd-bwd %.1f, grad-sync %.1f, optimizer %.1f, param-sync %.1f; "
      "core %s; loss %.3f -> %.3f)" % (d["tokens_per_step"] / (step / 1e3), step, med("fwd_bwd"),
      med("grad_sync"), med("optimizer"), med("param_sync"), d["blas_core"],
      d["runs"][0]["steps"][0]["loss"], d["runs"][0]["steps"][-1]["loss"]))
EOF
}

run_ours() {  # $1 = shape, $2 = repeat; prints tokens/s and details
  local seq mb js="$OUT/ours-$1-$2.json" log="$OUT/ours-$1-$2.log"
  read -r seq mb <<<"$(shape_args "$1")"
  if ! mpirun --allow-run-as-root --oversubscribe -np "$N" "$CANZONA" train --model qwen3-cpu \
      --dp "$N" --tp 1 --optimizer muon --strategy lb-asc --zero-stage "$OURS_ZERO" --precision "$PRECISION" --ns-dtype "$NS_DTYPE" \
      --ns-algorithm "$NS_ALGORITHM" --steps "$S" --seq-len "$seq" \
      --micro-batch "$mb" --json "$js" >"$log" 2>&1; then
    echo "ours run $2 ($1) failed; last lines of $log:" >&2; tail -n 15 "$log" >&2; return 1
  fi
  summarise_ours "$js"
}

run_torch() {  # $1 = shape, $2 = repeat, $3 = glibc | tcmalloc; prints tokens/s and details
  local seq mb js="$OUT/torch-$3-$1-$2.json" log="$OUT/torch-$3-$1-$2.log" preload=""
  read -r seq mb <<<"$(shape_args "$1")"
  [ "$3" = tcmalloc ] && preload=$TCMALLOC
  if ! LD_PRELOAD=$preload "$PY" "$ROOT/bench/train/$PEER_SCRIPT" --ranks "$N" \
      --steps "$S" --warmup-steps-excluded "$W" --seq-len "$seq" --micro-batch "$mb" \
      $PEER_ARGS --json "$js" >"$log" 2>&1; then
    echo "torch run $2 ($1, $3) failed; last lines of $log:" >&2; tail -n 15 "$log" >&2; return 1
  fi
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f  (step %.1f ms: fwd+bwd %.1f, optimizer %.1f of which Muon compute %.1f; loss %.3f -> %.3f)" % (d["tokens_per_s_median"], d["step_ms_median"], d["fwd_bwd_ms_median"], d["opt_ms_median"], d["muon_compute_ms_median"], d["loss"][0], d["loss"][-1]))' "$js"
}

echo "peer $PEER ($PEER_SCRIPT; ours --zero-stage $OURS_ZERO), torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
echo "Newton-Schulz: ours --ns-dtype $NS_DTYPE --ns-algorithm $NS_ALGORITHM, the peer's $([ "$PEER" = ddp ] && echo "$NS_DTYPE" || echo "bf16 (muon-fsdp2's own)")"
echo "qwen3-cpu, precision $PRECISION (pytorch autocast $AUTOCAST), ranks $N, steps $S (median over steps $((W + 1))..$S), repeats $R, 1 thread per rank, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for shape in "${shapes[@]}"; do
  read -r seq mb <<<"$(shape_args "$shape")"
  echo "== shape $shape: seq $seq, micro-batch $mb"
  ours=() glibc=() tcm=()
  for ((i = 1; i <= R; i++)); do
    line=$(run_ours "$shape" "$i") || exit 1
    ours+=("${line%% *}"); printf 'run %d  canzona          tokens/s %s\n' "$i" "$line"
    line=$(run_torch "$shape" "$i" glibc) || exit 1
    glibc+=("${line%% *}"); printf 'run %d  pytorch glibc    tokens/s %s\n' "$i" "$line"
    line=$(run_torch "$shape" "$i" tcmalloc) || exit 1
    tcm+=("${line%% *}"); printf 'run %d  pytorch tcmalloc tokens/s %s\n' "$i" "$line"
  done
  "$PY" - "$R" "${ours[@]}" "${glibc[@]}" "${tcm[@]}" <<'EOF'
import statistics, sys
r = int(sys.argv[1]); v = [float(x) for x in sys.argv[2:]]
ours, glibc, tcm = (statistics.median(v[k * r:(k + 1) * r]) for k in range(3))
best, name = max((glibc, "glibc"), (tcm, "tcmalloc"))
print("median tokens/s:  canzona %.1f   pytorch glibc %.1f   pytorch tcmalloc %.1f" % (ours, glibc, tcm))
print("ratio canzona / pytorch (%s, the faster): %.2fx" % (name, ours / best))
EOF
done
