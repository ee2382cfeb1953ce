#!/usr/bin/env bash
# The training benchmark of docs/results.md: end-to-end step time of every
# strategy on the CPU training preset, broken down like the paper's Figure 4, on 2 and 4 ranks
# (DP = NP), and the optimizer-step ratio lb-asc : sc that `canzona compare` measures on
# synthetic gradients for the same model and grid, each launch repeated RUNS times, alternating,
# every run printed, then the medians.
# Usage: scripts/train-bench.sh [RUNS] [NP...]     (defaults: 3 runs, NP 2 and 4)
# Environment: CANZONA (default build/apps/canzona), STEPS (default 6), MODEL (qwen3-cpu).
set -euo pipefail
runs=${1:-3}
shift || true
nps=("$@")
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
canzona=${CANZONA:-build/apps/canzona}
steps=${STEPS:-6}
model=${MODEL:-qwen3-cpu}
python=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for np in "${nps[@]}"; do
  mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np")
  echo "== $np ranks: ${mpirun[*]} $canzona train --model $model --dp $np" \
    "--strategies sc,layerwise,asc,lb-asc --steps $steps --warmup 1 --eval-every 0 --json F"
  echo "   and: ${mpirun[*]} $canzona compare --model $model --dp $np --steps 5 --warmup 1 --json F"
  for ((i = 1; i <= runs; ++i)); do
    "${mpirun[@]}" "$canzona" train --model "$model" --dp "$np" \
      --strategies sc,layerwise,asc,lb-asc --steps "$steps" --warmup 1 --eval-every 0 \
      --json "$work/train-$np-$i.json" > "$work/train-$np-$i.log"
    "${mpirun[@]}" "$canzona" compare --model "$model" --dp "$np" --steps 5 --warmup 1 \
      --json "$work/compare-$np-$i.json" > "$work/compare-$np-$i.log"
  done
  "$python" - "$work" "$np" "$runs" <<'PY'
import json, statistics, sys
work, np, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = ["sc", "layerwise", "asc", "lb-asc"]
cols = ["step", "fwd_bwd", "grad_sync", "optimizer", "param_sync"]
table = {n: {c: [] for c in cols + ["tok_s", "mfu"]} for n in names}
train_ratio, synth_ratio, bitwise = [], [], []
print(f"{'run':>3} {'strategy':<9} " + " ".join(f"{c:>10}" for c in cols) + f" {'tok/s':>8} {'MFU':>6}")
for i in range(1, runs + 1):
    t = json.load(open(f"{work}/train-{np}-{i}.json"))
    c = json.load(open(f"{work}/compare-{np}-{i}.json"))
    bitwise.append(t["bitwise_identical"])
    med = {r["strategy"]: r for r in t["runs"]}
    for n in names:
        r = med[n]
        for col in cols:
            table[n][col].append(r["median_ms"][col])
        table[n]["tok_s"].append(r["median_tokens_per_s"])
        table[n]["mfu"].append(r["mfu"])
        print(f"{i:>3} {n:<9} " + " ".join(f"{r['median_ms'][col]:>10.1f}" for col in cols)
              + f" {r['median_tokens_per_s']:>8.0f} {100 * r['mfu']:>5.1f}%")
    train_ratio.append(med["sc"]["median_ms"]["optimizer"] / med["lb-asc"]["median_ms"]["optimizer"])
    s = c["strategies"]
    synth_ratio.append(s["sc"]["opt_ms"] / s["lb-asc"]["opt_ms"])
    print(f"    optimizer sc / lb-asc: train {train_ratio[-1]:.2f}x, compare (synthetic) "
          f"{synth_ratio[-1]:.2f}x; bitwise identical across strategies: {t['bitwise_identical']}")
m = statistics.median
print(f"median over {runs} runs, {np} ranks:")
for n in names:
    print(f"    {n:<9} " + " ".join(f"{m(table[n][c]):>10.1f}" for c in cols)
          + f" {m(table[n]['tok_s']):>8.0f} {100 * m(table[n]['mfu']):>5.1f}%")
print(f"    optimizer sc / lb-asc: train {m(train_ratio):.2f}x "
      f"({min(train_ratio):.2f}-{max(train_ratio):.2f}), compare {m(synth_ratio):.2f}x "
      f"({min(synth_ratio):.2f}-{max(synth_ratio):.2f}); bitwise in every run: {all(bitwise)}")
PY
done
