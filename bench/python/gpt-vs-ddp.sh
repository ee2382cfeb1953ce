#!/usr/bin/env bash
# examples/gpt.py's GPT (or examples/vit.py's ViT: -- --model vit) at DP=2:
# canzona.torch.DistributedOptimizer against PyTorch DDP (gloo) + distributed Muon, launches
# alternated, one thread per rank (bench/python/gpt_vs_ddp.py).
# Usage: bench/python/gpt-vs-ddp.sh [REPEATS] [BUILD] [-- extra gpt_vs_ddp.py flags]
# Prints every launch's JSON line and the medians of tokens/s (images/s) with their ratio.
set -euo pipefail
repeats=${1:-5}
build=${2:-build}
shift $(( $# >= 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
py=${CANZONA_PYTHON:-$here/../../.venv/bin/python}  # the project's torch 2.x (scripts/install-deps.sh)
export PYTHONPATH="$build/python" OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2)
declare -a ours theirs
for ((i = 0; i < repeats; i++)); do
  for backend in canzona ddp; do
    line=$("${mpi[@]}" "$py" "$here/gpt_vs_ddp.py" --backend "$backend" \
      --port $((29500 + i)) "$@" | grep '^{')
    echo "run $((i + 1)) $line"
    rate=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["per_s"])' "$line")
    unit=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["unit"])' "$line")
    if [ "$backend" = canzona ]; then ours+=("$rate"); else theirs+=("$rate"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mo=$(median "${ours[@]}")
mt=$(median "${theirs[@]}")
awk -v o="$mo" -v t="$mt" -v n="$repeats" -v u="$unit" 'BEGIN {
  printf "median of %d launches: canzona %.1f %s/s, ddp+dist-muon %.1f %s/s, ratio %.3f\n", n, o, u, t, u, o / t }'
