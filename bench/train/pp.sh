#!/usr/bin/env bash
# Pipeline stages on this machine: `canzona train --pp 2` against `--pp 1`, and the simulator's
# per-stage prediction against the measured run.
#
#   1. qwen3-cpu (6 layers), lb-asc, Muon, --grad-accum 8 (m = 8 micro-batches of --micro-batch x
#      --seq-len tokens), DP 1: PP 1 on one rank and PP 2 on two, alternately, --repeats times.
#      Reports the optimizer step and the step of PP 2 over PP 1 (target: optimizer <= 0.6x), each
#      stage's wait for its neighbour over its fwd-bwd wall, and the pipeline's bubble: the
#      fwd-bwd wall of the last stage to finish less m x the slowest stage's compute per
#      micro-batch, over that wall, against (p - 1) / (m + p - 1) (target: within 25%).
#   2. DP 2 x PP 1 on two ranks and DP 2 x PP 2 on four (two cores: four ranks share them).
#   3. The simulator on a cluster file fitted to the PP 1 runs (cpu.json, written under --keep):
#      the forward-backward rate from run 1's PP 1 fwd-bwd, AdamW's bytes per second from an
#      --optimizer adamw PP 1 run, the matrix optimizer's rate from run 1's PP 1 optimizer step;
#      the four-rank run's device is half of it (two ranks per core). Then `canzona simulate`
#      of each PP 2 run, and each stage's predicted optimizer step and bubble beside the measured
#      (target: the optimizer steps within 25%).
#
# Usage: bench/train/pp.sh [--repeats R] [--steps S] [--seq-len L] [--micro-batch B]
#                          [--coretype CORE] [--canzona PATH] [--keep DIR]
set -euo pipefail
usage() { echo "usage: $0 [--repeats R] [--steps S] [--seq-len L] [--micro-batch B] [--coretype CORE] [--canzona PATH] [--keep DIR]" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
R=3 S=6 L=128 B=2 CORE="" KEEP=""
CANZONA="$ROOT/build/apps/canzona"
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) [ $# -ge 2 ] || usage; R=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; S=$2; shift 2 ;;
    --seq-len) [ $# -ge 2 ] || usage; L=$2; shift 2 ;;
    --micro-batch) [ $# -ge 2 ] || usage; B=$2; shift 2 ;;
    --coretype) [ $# -ge 2 ] || usage; CORE=$2; shift 2 ;;
    --canzona) [ $# -ge 2 ] || usage; CANZONA=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || usage; KEEP=$2; shift 2 ;;
    *) usage ;;
  esac
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [ -n "$CORE" ]; then unset OPENBLAS_L2_SIZE; export OPENBLAS_CORETYPE=$CORE; fi
OUT=${KEEP:-$(mktemp -d)}
mkdir -p "$OUT"
M=8
train() {  # NP NAME ARGS...: one run, its --json kept as NAME.json
  local np=$1 name=$2
  shift 2
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" "$CANZONA" train \
    --model qwen3-cpu --strategy lb-asc --seq-len "$L" --micro-batch "$B" --grad-accum $M \
    --steps "$S" --warmup 1 --eval-every 0 --json "$OUT/$name.json" "$@" >"$OUT/$name.out" 2>&1
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(getconf _NPROCESSORS_ONLN) cores; $(date -u +%F)"
for r in $(seq 1 "$R"); do
  train 1 "pp1_$r"
  train 2 "pp2_$r" --pp 2
  train 2 "dp2pp1_$r" --dp 2
  train 4 "dp2pp2_$r" --dp 2 --pp 2
done
train 1 adamw --optimizer adamw
/usr/bin/python3 - "$OUT" "$R" "$M" "$L" "$B" "$CANZONA" <<'PY'
import json, statistics, subprocess, sys
out, repeats, m, seq, mb, canzona = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
med = statistics.median
def run(name):
    return json.load(open(f"{out}/{name}.json"))["runs"][0]
def stages(r):
    return [s["median_ms"] for s in r["stages"]]
print(f"\nqwen3-cpu, lb-asc, Muon, m = {m} micro-batches of {mb} x {seq} tokens; medians over steps 2.. of each run (ms)")
print("run     repeat    step  fwd-bwd optimizer | per stage: fwd-bwd, wait, optimizer")
rows = {}
for name in ["pp1", "pp2", "dp2pp1", "dp2pp2"]:
    rows[name] = []
    for k in range(1, repeats + 1):
        r = run(f"{name}_{k}")
        mm = r["median_ms"]
        rows[name].append(r)
        extra = "" if "stages" not in r else " | " + "; ".join(
            f"s{i}: {s['fwd_bwd']:.0f}, {s['pipeline_wait']:.0f}, {s['optimizer']:.0f}" for i, s in enumerate(stages(r)))
        print(f"{name:8s} {k:5d} {mm['step']:8.0f} {mm['fwd_bwd']:8.0f} {mm['optimizer']:9.0f}{extra}")
def m_of(name, key):
    return med([r["median_ms"][key] for r in rows[name]])
p = 2
ideal = (p - 1) / (m + p - 1)
print()
for base, pp in [("pp1", "pp2"), ("dp2pp1", "dp2pp2")]:
    print(f"{pp} / {base}: optimizer {m_of(pp,'optimizer')/m_of(base,'optimizer'):.3f}x (target <= 0.6), step {m_of(pp,'step')/m_of(base,'step'):.3f}x")
for pp in ["pp2", "dp2pp2"]:
    waits, bubbles = [], []
    for r in rows[pp]:
        st = stages(r)
        walls = [s["fwd_bwd"] + s["pipeline_wait"] for s in st]
        waits.append([s["pipeline_wait"] / w for s, w in zip(st, walls)])
        bubbles.append((max(walls) - max(s["fwd_bwd"] for s in st)) / max(walls))
    w = [med([x[i] for x in waits]) for i in range(p)]
    b = med(bubbles)
    print(f"{pp}: wait / fwd-bwd wall per stage " + ", ".join(f"s{i} {v:.3f}" for i, v in enumerate(w)) +
          f"; pipeline bubble {b:.3f} vs (p-1)/(m+p-1) = {ideal:.3f} ({b/ideal:.2f}x, target within 25%)")
# --- the simulator, fitted to the PP 1 runs.
def simulate(cluster, dp, pp, extra=()):
    cmd = [canzona, "simulate", "--model", "qwen3-cpu", "--strategy", "lb-asc", "--dp", str(dp), "--tp", "1",
           "--pp", str(pp), "--tokens", str(dp * m * mb * seq), "--seq-len", str(seq), "--micro-batch", str(mb),
           "--cluster", cluster, "--json", f"{out}/sim.json", *extra]
    subprocess.run(cmd, check=True, capture_output=True)
    return json.load(open(f"{out}/sim.json"))["strategies"]["lb-asc"]
def cluster(path, fb_tflops, opt_tflops, hbm):
    json.dump({"name": "cpu", "gpus_per_node": 4,
               "intra_node": {"bandwidth_GBps": 5.0, "latency_us": 5.0},
               "inter_node": {"bandwidth_GBps": 5.0, "latency_us": 5.0},
               "device": {"name": "one CPU core", "bf16_tflops": fb_tflops, "tf32_tflops": opt_tflops,
                          "fp32_tflops": opt_tflops, "hbm_GBps": hbm, "matmul_efficiency": 1.0,
                          "optimizer_efficiency": 1.0, "optimizer_precision": "fp32",
                          "optimizer_task_overhead_us": 0.0, "factorization_tflops": 1.0}},
              open(path, "w"), indent=1)
    return path
adamw = run("adamw")["median_ms"]["optimizer"] / 1000.0
probe = cluster(f"{out}/probe.json", 1.0, 1e6, 1.0)
s0 = simulate(probe, 1, 1)
fb_tflops = s0["fwd_bwd_s"] / (m_of("pp1", "fwd_bwd") / 1000.0)
# AdamW: the sim charges adamw_bytes_per_element (30) per element at hbm; the adamw run moves
# every element through AdamW.
import re
hdr = open(f"{out}/adamw.out").read()
n_params = int(re.search(r"model qwen3-cpu: (\d+) params", hdr).group(1))
hbm = n_params * 30.0 / adamw / 1e9
s1 = simulate(cluster(f"{out}/probe.json", fb_tflops, 1e6, hbm), 1, 1)
adamw_part = s1["optimizer_s"]  # the matrix tasks at an unbounded rate: AdamW alone
s2 = simulate(cluster(f"{out}/probe.json", fb_tflops, 1.0, hbm), 1, 1)
task_s_at_1 = s2["optimizer_s"] - adamw_part
opt_tflops = task_s_at_1 / (m_of("pp1", "optimizer") / 1000.0 - adamw_part)
cpu = cluster(f"{out}/cpu.json", fb_tflops, opt_tflops, hbm)
half = cluster(f"{out}/cpu-half.json", fb_tflops / 2, opt_tflops / 2, hbm / 2)
print(f"\nsimulator fitted to the PP 1 runs: fwd-bwd {fb_tflops*1e3:.1f} GFLOP/s, matrix optimizer {opt_tflops*1e3:.1f} GFLOP/s, AdamW {hbm:.2f} GB/s ({out}/cpu.json; cpu-half.json for 4 ranks on 2 cores)")
for name, path, dp in [("pp2", cpu, 1), ("dp2pp2", half, 2)]:
    sim = simulate(path, dp, 2)
    meas = [med([stages(r)[i][k] for r in rows[name]]) for i in range(p) for k in ("optimizer", "pipeline_wait", "fwd_bwd")]
    print(f"{name}: stage | optimizer step measured, predicted, ratio | bubble measured, predicted")
    for i, st in enumerate(sim["stages"]):
        mo, mw, mf = meas[3 * i], meas[3 * i + 1], meas[3 * i + 2]
        po = st["optimizer_step_s"] * 1000.0
        print(f"  stage {i} | {mo:8.0f} {po:8.0f} {po/mo:6.2f}x | {mw:7.0f} {st['bubble_s']*1000:7.0f} ms")
PY
