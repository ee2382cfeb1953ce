#!/usr/bin/env bash
# What `import canzona` adds over `import torch` (target: under 0.5 s, docs/python.md).
# Usage: bench/python/import-time.sh [REPEATS] [BUILD]   (default 7, build)
# Each repeat starts a fresh interpreter (the project's .venv, or CANZONA_PYTHON) for each of the three statements, interleaved, and
# times the import inside the process (time.perf_counter around the import statement); prints
# every run and the medians.
set -euo pipefail
repeats=${1:-7}
build=${2:-build}
export PYTHONPATH="$build/python"
py=${CANZONA_PYTHON:-$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/python}
stmt_torch="import torch"
stmt_both="import torch; import canzona; import canzona.torch"
stmt_alone="import canzona"
time_one() {
  "$py" -c "
import time
t = time.perf_counter()
$1
print(f'{time.perf_counter() - t:.4f}')"
}
declare -a torch_s both_s alone_s
for ((i = 0; i < repeats; i++)); do
  torch_s+=("$(time_one "$stmt_torch")")
  both_s+=("$(time_one "$stmt_both")")
  alone_s+=("$(time_one "$stmt_alone")")
  echo "run $((i + 1)): import torch ${torch_s[-1]} s; torch + canzona + canzona.torch ${both_s[-1]} s; canzona alone ${alone_s[-1]} s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mt=$(median "${torch_s[@]}")
mb=$(median "${both_s[@]}")
ma=$(median "${alone_s[@]}")
awk -v t="$mt" -v b="$mb" -v a="$ma" -v n="$repeats" 'BEGIN {
  printf "median of %s: import torch %.3f s; with canzona and canzona.torch %.3f s (adds %.3f s; target < 0.5 s); import canzona alone %.3f s\n", n, t, b, b - t, a }'
