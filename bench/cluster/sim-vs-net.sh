#!/usr/bin/env bash
# The simulator against a network: `canzona compare` at DP 4 on 2 hosts x 2 ranks
# (scripts/cluster.sh) under two link settings, and `canzona simulate` of the same cluster,
# described in a --cluster file from what was measured here (docs/simulator.md, "Against a
# network").
#
#   1. Per link setting (default 1gbit and 100mbit, 0.2 ms each): the link itself, measured over
#      TCP between the two hosts' namespaces (a 32 MiB transfer each way for one flow's bandwidth,
#      200 round trips of 8 bytes for the latency) and with MPI in the pattern the runtime uses
#      (canzona_exchange_bench: an MPI_Alltoall of 16 MiB per rank over the 4 ranks, the bytes
#      leaving a host over the time: the bandwidth MPI achieves, as the presets give achieved
#      bandwidths), then `compare --model M --dp 4 --strategies all` on the cluster, --repeats
#      times.
#   2. The sgemm rate of one rank (`canzona bench-kernels --kernels sgemm`), halved: 4 ranks
#      share the 2 cores.
#   3. A cluster file per setting: 2 "GPUs" per node, the MPI-achieved bandwidth and the TCP
#      latency as inter_node, the measured sgemm rate as the device; `canzona simulate --model M
#      --dp 4 --tp 1` on it twice: as shipped (ring collectives, bf16 params, a NIC per rank) and
#      as this runtime runs (--varsize-collectives direct, --param-dtype fp32, nics_per_node 1).
#   4. Per strategy: DP gradient sync (compare's grad_sync_ms against the simulator's
#      dp_comm_total_s less param_gather_total_s), param sync (param_sync_ms against
#      param_gather_total_s + param_sync_s) and the optimizer step with it (opt_ms +
#      param_sync_ms against optimizer_step_s + param_gather_total_s), medians over the repeats,
#      with their ratio (target within 25%).
#
# Usage: bench/cluster/sim-vs-net.sh [--repeats R] [--model M] [--steps S] [--rates 1gbit,100mbit]
#                                    [--delay D] [--canzona PATH] [--keep DIR] [--from DIR]
# --from DIR: no runs; simulates and compares the runs a --keep DIR holds.
# Needs root and network namespaces (scripts/cluster.sh).
set -euo pipefail
usage() { echo "usage: $0 [--repeats R] [--model M] [--steps S] [--rates R1,R2] [--delay D] [--canzona PATH] [--keep DIR] [--from DIR]" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
R=3 MODEL=qwen3-mini S=3 RATES=1gbit,100mbit DELAY=0.2ms KEEP="" FROM=""
CANZONA="$ROOT/build/apps/canzona"
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) [ $# -ge 2 ] || usage; R=$2; shift 2 ;;
    --model) [ $# -ge 2 ] || usage; MODEL=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; S=$2; shift 2 ;;
    --rates) [ $# -ge 2 ] || usage; RATES=$2; shift 2 ;;
    --delay) [ $# -ge 2 ] || usage; DELAY=$2; shift 2 ;;
    --canzona) [ $# -ge 2 ] || usage; CANZONA=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || usage; KEEP=$2; shift 2 ;;
    --from) [ $# -ge 2 ] || usage; FROM=$2; KEEP=$2; shift 2 ;;
    *) usage ;;
  esac
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export CANZONA_WIRE="${CANZONA_WIRE:-$(dirname "$CANZONA")/canzona-wire}"
CLUSTER="$ROOT/scripts/cluster.sh"
OUT=${KEEP:-$(mktemp -d)}
mkdir -p "$OUT"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(getconf _NPROCESSORS_ONLN) cores, BLAS core ${OPENBLAS_CORETYPE:-as detected}; $(date -u +%F)"

# The link between host 0 and host 1 of cluster $1: bandwidth (bytes/s, 32 MiB each way) and
# one-way latency (s, half the median round trip of 8 bytes), as JSON.
measure_link() {
  local id=$1
  ip netns exec "cz$id-h1" /usr/bin/python3 - "198.19.$id.2" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5601)); s.listen(1); s.settimeout(60)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(200):
    c.sendall(c.recv(8))
left = 32 << 20
while left > 0:
    left -= len(c.recv(1 << 20))
c.sendall(b"x")
c.sendall(bytes(32 << 20))
c.close()
PY
  sleep 0.5
  ip netns exec "cz$id-h0" /usr/bin/python3 - "198.19.$id.2" <<'PY'
import json, socket, statistics, sys, time
for attempt in range(100):  # the server may still be starting
    try:
        c = socket.create_connection((sys.argv[1], 5601), timeout=60)
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtt = []
for _ in range(200):
    t = time.perf_counter(); c.sendall(b"12345678"); c.recv(8); rtt.append(time.perf_counter() - t)
t = time.perf_counter(); c.sendall(bytes(32 << 20)); c.recv(1); up = time.perf_counter() - t
t = time.perf_counter(); left = 32 << 20
while left > 0:
    left -= len(c.recv(1 << 20))
down = time.perf_counter() - t
print(json.dumps({"bandwidth_Bps": (32 << 20) / max(up, down), "latency_s": statistics.median(rtt) / 2}))
PY
  wait
}

# Whatever fails, no cluster is left up.
up_ids=()
trap 'for i in "${up_ids[@]}"; do "$CLUSTER" down --id "$i"; done' EXIT
IFS=, read -r -a rates <<<"$RATES"
[ -n "$FROM" ] && rates=()
for rate in "${rates[@]}"; do
  for r in $(seq 1 "$R"); do
    id=$("$CLUSTER" up --hosts 2 --rate "$rate" --delay "$DELAY")
    up_ids+=("$id")
    measure_link "$id" >"$OUT/link_${rate}_$r.json"
    "$CLUSTER" run --id "$id" --hosts 2 --np 4 --keep --timeout 300 -- \
      "$(dirname "$CANZONA")/../bench/cluster/canzona_exchange_bench" 16777216 2 5 \
      | tail -1 >"$OUT/mpi_${rate}_$r.json"
    "$CLUSTER" run --id "$id" --hosts 2 --np 4 --timeout 600 -- "$CANZONA" compare --model "$MODEL" \
      --dp 4 --strategies all --steps "$S" --warmup 1 --json "$OUT/cmp_${rate}_$r.json" \
      >"$OUT/cmp_${rate}_$r.out" 2>&1
  done
done
[ -n "$FROM" ] || "$CANZONA" bench-kernels --kernels sgemm --shapes 1024x1024,2048x2048 \
  --json "$OUT/sgemm.json" >/dev/null

/usr/bin/python3 - "$OUT" "$R" "$MODEL" "$CANZONA" "$RATES" <<'PY'
import json, statistics, subprocess, sys
out, repeats, model, canzona, rates = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split(",")
med = statistics.median
sg = json.load(open(f"{out}/sgemm.json"))
gflops = med([k["gflops"] for k in sg["results"] if k["kernel"] == "sgemm"])
rank_tflops = gflops / 2 / 1000.0  # 4 ranks on 2 cores
print(f"sgemm {gflops:.1f} GFLOP/s per core; {rank_tflops * 1000:.1f} per rank (4 ranks on 2 cores)")
# The simulator as shipped (rings, bf16 params, a NIC per rank) and as this runtime runs
# (one exchange per collective, fp32 params, the host's one NIC shared by its two ranks).
models = {"as shipped": (["--varsize-collectives", "grouped", "--param-dtype", "bf16"], 2),
          "runtime": (["--varsize-collectives", "direct", "--param-dtype", "fp32"], 1)}
def simulate(rate, bw, lat, which):
    flags, nics = models[which]
    cluster = {"name": f"namespaces-{rate}", "gpus_per_node": 2, "nics_per_node": nics,
               "intra_node": {"bandwidth_GBps": 5.0, "latency_us": 5.0},
               "inter_node": {"bandwidth_GBps": bw / 1e9, "latency_us": lat * 1e6},
               "device": {"name": "one rank: half a core", "bf16_tflops": rank_tflops,
                          "tf32_tflops": rank_tflops, "fp32_tflops": rank_tflops,
                          "hbm_GBps": 5.0, "matmul_efficiency": 1.0, "optimizer_efficiency": 1.0,
                          "optimizer_precision": "fp32", "optimizer_task_overhead_us": 0.0,
                          "factorization_tflops": rank_tflops}}
    path = f"{out}/cluster_{rate}_{nics}.json"
    json.dump(cluster, open(path, "w"), indent=1)
    js = f"{out}/sim_{rate}_{nics}.json"
    subprocess.run([canzona, "simulate", "--model", model, "--dp", "4", "--tp", "1", "--strategy", "all",
                    "--cluster", path, "--tokens", "4096", "--seq-len", "128", "--json", js, *flags],
                   check=True, capture_output=True)
    out_s = {}
    for name, v in json.load(open(js))["strategies"].items():
        gather = v["param_gather_total_s"] + v["param_sync_s"]
        out_s[name] = {"sync": (v["dp_comm_total_s"] - v["param_gather_total_s"]) * 1e3,
                       "gather": gather * 1e3,
                       "step": (v["optimizer_step_s"] + v["param_gather_total_s"]) * 1e3}
    return out_s
for rate in rates:
    links = [json.load(open(f"{out}/link_{rate}_{r}.json")) for r in range(1, repeats + 1)]
    tcp = med([l["bandwidth_Bps"] for l in links])
    lat = med([l["latency_s"] for l in links])
    bw = med([json.load(open(f"{out}/mpi_{rate}_{r}.json"))["bandwidth_Bps"] for r in range(1, repeats + 1)])
    sims = {which: simulate(rate, bw, lat, which) for which in models}
    runs = [json.load(open(f"{out}/cmp_{rate}_{r}.json"))["strategies"] for r in range(1, repeats + 1)]
    print(f"\nlink {rate}: one TCP flow {tcp * 8 / 1e6:.0f} Mbit/s, one-way {lat * 1e3:.3f} ms; "
          f"MPI's exchange {bw * 8 / 1e6:.0f} Mbit/s per host (medians of {repeats})")
    print("ms, medians of the runs; simulated: runtime model (as shipped); ratio = runtime model / measured")
    print(f"{'strategy':16s} | {'DP grad sync':>28s} | {'param sync':>28s} | {'optimizer step':>28s}")
    for name in runs[0]:
        if name not in sims["runtime"]:
            continue
        meas = {"sync": med([x[name]["grad_sync_ms"] for x in runs]),
                "gather": med([x[name]["param_sync_ms"] for x in runs]),
                "step": med([x[name]["opt_ms"] + x[name]["param_sync_ms"] for x in runs])}
        cells = []
        for k in ("sync", "gather", "step"):
            sim, old = sims["runtime"][name][k], sims["as shipped"][name][k]
            ratio = f"{sim / meas[k]:.2f}" if meas[k] > 0 else "  - "
            cells.append(f"{meas[k]:7.1f} / {sim:7.1f} ({old:6.1f}) {ratio:>4s}")
        print(f"{name:16s} | " + " | ".join(cells))
    for r, x in enumerate(runs, 1):
        print(f"  run {r}: " + "; ".join(f"{n} {v['grad_sync_ms']:.0f}/{v['param_sync_ms']:.0f}/{v['opt_ms']:.0f}" for n, v in x.items()))
PY
