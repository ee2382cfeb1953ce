#!/usr/bin/env bash
# The bf16 GEMM libraries Muon's ns_dtype bf16 could run on, side by side on this machine
# (docs/references.md, "The bf16 product library"): C (M x N, fp32) = A (M x K) B (K x N) with bf16
# operands and fp32 sums, one thread, median of --repeats runs after a warm-up, at 1024x1024x1024
# and 1024x4096x1024 (M x N x K; the products of a 1024 x 1024 and a 1024 x 4096 weight's
# iteration), each checked against an fp64 sum of the same bf16 products:
#
#   sgemm    OpenBLAS's fp32 sgemm on fp32 operands (the fp32 iteration's rate)
#   widened  the bf16 operands widened to fp32, then OpenBLAS's sgemm (Canzona's fallback)
#   dnnl     oneDNN 2.6.3's matmul, Debian's libdnnl-dev (Canzona's choice where it runs)
#   dnnl3    oneDNN 3.x's matmul, PyPI's onednn-devel (a SYCL build; needs its CPU device)
#   mkl      MKL's cblas_gemm_bf16bf16f32, PyPI's mkl-devel
#   torch    torch.mm on bf16 tensors, libtorch from .venv (its own oneDNN inside)
#
# Builds bench/optim/bf16_candidates.cpp with g++ once per library into build/bf16-candidates.
# PyPI's MKL and oneDNN come from scripts/install-deps.sh --bf16-candidates (.venv-bf16-candidates,
# about 2.7 GB, pinned in bench/optim/bf16-candidates-requirements.txt); a library that does not
# load or has no bf16 matmul here is reported as such, not skipped silently.
# Usage: bench/optim/bf16-candidates.sh [--repeats N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REPEATS=5
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) [ $# -ge 2 ] || { echo "usage: $0 [--repeats N]" >&2; exit 2; }; REPEATS=$2; shift 2 ;;
    *) echo "usage: $0 [--repeats N]" >&2; exit 2 ;;
  esac
done
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --repeats must be a positive integer" >&2; exit 2; }
"$ROOT/scripts/install-deps.sh" --bf16-candidates
CV=$ROOT/.venv-bf16-candidates
OUT=$ROOT/build/bf16-candidates
mkdir -p "$OUT"
SRC=$ROOT/bench/optim/bf16_candidates.cpp
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
g++ -O2 -std=c++20 "$SRC" -o "$OUT/base" -lopenblas
g++ -O2 -std=c++20 -DUSE_DNNL "$SRC" -o "$OUT/dnnl" -lopenblas -ldnnl
g++ -O2 -std=c++20 -DUSE_DNNL -I"$CV/include" "$SRC" -o "$OUT/dnnl3" -lopenblas -L"$CV/lib" -ldnnl \
  -Wl,-rpath,"$CV/lib"
g++ -O2 -std=c++20 -DUSE_MKL -I"$CV/include" "$SRC" -o "$OUT/mkl" -L"$CV/lib" -l:libmkl_rt.so.3 \
  -Wl,-rpath,"$CV/lib"
flags=$(grep -m1 -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), bf16 flags: ${flags:-none of avx512f avx512_bf16 amx_bf16 amx_tile}"
echo "one thread, median of $REPEATS; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for shape in "1024 1024 1024" "1024 4096 1024"; do
  "$OUT/base" sgemm $shape "$REPEATS"
  "$OUT/base" widen $shape "$REPEATS"
  "$OUT/dnnl" dnnl $shape "$REPEATS" 2>&1 | tail -1 || true
  OCL_ICD_FILENAMES=$CV/lib/libintelocl.so LD_LIBRARY_PATH=$CV/lib ONEDNN_VERBOSE=0 \
    "$OUT/dnnl3" dnnl $shape "$REPEATS" 2>&1 | tail -1 | sed 's/^dnnl /dnnl3/' || true
  "$OUT/mkl" mkl $shape "$REPEATS"
  "$ROOT/.venv/bin/python" - $shape "$REPEATS" <<'PY'
import sys, time, torch
torch.set_num_threads(1)
m, n, k, reps = map(int, sys.argv[1:])
a = torch.randn(m, k).bfloat16(); b = torch.randn(k, n).bfloat16()
torch.mm(a, b); ts = []
for _ in range(reps):
    t = time.perf_counter(); torch.mm(a, b); ts.append(time.perf_counter() - t)
t = sorted(ts)[len(ts) // 2]
print(f"torch  {m:5d}x{n:5d}x{k:5d}  {t * 1e3:8.2f} ms  {2 * m * n * k / t / 1e9:7.1f} GFLOP/s  "
      f"(torch {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()})")
PY
done
