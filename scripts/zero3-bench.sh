#!/usr/bin/env bash
# The ZeRO-3 benchmark of docs/results.md, on the CPU training preset:
#   time    DP=2, asc, lb-asc and the equal-shard baseline fsdp-a2a under --zero-stage 1 and 3,
#           RUNS launches of each stage, alternating; per launch the median step (max over ranks)
#           over steps 2..STEPS of each strategy; then the median over launches and the ratios
#           stage 3 / stage 1 and fsdp-a2a / lb-asc under stage 3, every launch printed;
#   memory  DP=4, lb-asc and fsdp-a2a, both stages, one launch each: what a rank keeps between
#           steps (params + gradients + optimizer state, max over ranks), accounted by the engine
#           (--json memory.kept_bytes) and measured after the last step (resident_kept_bytes: the
#           buffers' resident pages by mincore, with the state), and the peak resident size minus
#           the resident size when the run started minus activations (which also holds the
#           transient gathers, backward's temporaries and the allocator's caches), each against
#           the model's total
#           over the 4 ranks (memory.model_total_bytes / 4: one fp32 copy of every param and
#           gradient plus every rank's optimizer state), and the optimizer-step bytes over DP.
# Usage: scripts/zero3-bench.sh [RUNS]   (default 3)
# Environment: CANZONA (default build/apps/canzona), STEPS (default 6), MODEL (qwen3-cpu).
set -euo pipefail
runs=${1:-3}
canzona=${CANZONA:-build/apps/canzona}
steps=${STEPS:-6}
model=${MODEL:-qwen3-cpu}
python=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi() { mpirun --allow-run-as-root --oversubscribe --mca btl self,vader "$@"; }

echo "== time: mpirun -np 2 $canzona train --model $model --dp 2 --zero-stage Z" \
  "--strategies asc,lb-asc,fsdp-a2a --steps $steps --warmup 1 --eval-every 0 --json F"
for ((i = 1; i <= runs; ++i)); do
  for z in 1 3; do
    mpi -np 2 "$canzona" train --model "$model" --dp 2 --zero-stage "$z" \
      --strategies asc,lb-asc,fsdp-a2a --steps "$steps" --warmup 1 --eval-every 0 \
      --json "$work/time-$z-$i.json" >"$work/time-$z-$i.log"
  done
done
echo "== memory: mpirun -np 4 $canzona train --model $model --dp 4 --zero-stage Z" \
  "--strategy S --steps 3 --warmup 1 --eval-every 0 --json F (S = lb-asc, fsdp-a2a)"
for z in 1 3; do
  for s in lb-asc fsdp-a2a; do  # one strategy per launch: each its own peak resident size
    mpi -np 4 "$canzona" train --model "$model" --dp 4 --zero-stage "$z" --strategy "$s" \
      --steps 3 --warmup 1 --eval-every 0 --json "$work/mem-$z-$s.json" >"$work/mem-$z-$s.log"
  done
done
"$python" - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
names = ["asc", "lb-asc", "fsdp-a2a"]
step = {(z, n): [] for z in (1, 3) for n in names}
for i in range(1, runs + 1):
    for z in (1, 3):
        d = json.load(open(f"{work}/time-{z}-{i}.json"))
        assert d["bitwise_identical"], "strategies disagree"
        row = []
        for r in d["runs"]:
            ms = statistics.median(s["ms"]["step"] for s in r["steps"][1:])
            step[(z, r["strategy"])].append(ms)
            row.append(f"{r['strategy']} {ms:.1f}")
        print(f"launch {i} stage {z}: " + ", ".join(row) + " ms")
med = {k: statistics.median(v) for k, v in step.items()}
print("median step, ms (DP=2):")
for n in names:
    print(f"  {n:9s} stage 1 {med[(1, n)]:7.1f}  stage 3 {med[(3, n)]:7.1f}"
          f"  stage 3 / stage 1 {med[(3, n)] / med[(1, n)]:.3f}")
print(f"  stage 3: fsdp-a2a / lb-asc {med[(3, 'fsdp-a2a')] / med[(3, 'lb-asc')]:.3f},"
      f" fsdp-a2a / asc {med[(3, 'fsdp-a2a')] / med[(3, 'asc')]:.3f}")
print("memory per rank (DP=4, max over ranks), MiB:")
MiB = 1024.0 * 1024.0
for z in (1, 3):
    for name in ("lb-asc", "fsdp-a2a"):
        r = json.load(open(f"{work}/mem-{z}-{name}.json"))["runs"][0]
        m = r["memory"]
        peak = m["peak_rss_bytes"] - m["base_rss_bytes"] - m["activations_bytes"]
        dp_bytes = sorted({s["optimizer_step_bytes"]["dp"] for s in r["steps"]})
        share = m["model_total_bytes"] / 4
        print(f"  stage {z} {r['strategy']:9s} params {m['params_bytes'] / MiB:6.1f}"
              f" grads {m['grads_bytes'] / MiB:6.1f} state {m['optimizer_state_bytes'] / MiB:6.1f}"
              f" | kept: accounted {m['kept_bytes'] / MiB:6.1f} = {m['kept_bytes'] / share:.3f},"
              f" resident {m['resident_kept_bytes'] / MiB:6.1f} ="
              f" {m['resident_kept_bytes'] / share:.3f} x total/4 ({share / MiB:.1f})"
              f" | peak RSS {m['peak_rss_bytes'] / MiB:6.1f} - base {m['base_rss_bytes'] / MiB:6.1f}"
              f" - activations {m['activations_bytes'] / MiB:5.1f} = {peak / MiB:6.1f}"
              f" = {peak / share:.3f} x total/4 | optimizer-step DP bytes per step {dp_bytes}")
PY
