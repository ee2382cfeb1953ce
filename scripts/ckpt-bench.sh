#!/usr/bin/env bash
# Checkpoint save and load time of the CPU training preset against the disk's sequential
# bandwidth measured by dd in the same run. Each repeat: dd writes 512 MiB
# (conv=fdatasync: the time includes reaching the disk, as our save's fsync does) and reads it
# back (page cache warm, as our load after a save is); then `canzona train` saves a checkpoint
# after step 1 (DP = NP ranks write in parallel) and a second launch resumes from it, loads and,
# resumed at its last step, saves it again. Every run is printed, then the medians.
# Usage: scripts/ckpt-bench.sh [RUNS] [NP]   (defaults: 3 runs, 2 ranks)
# Environment: CANZONA (default build/apps/canzona), MODEL (qwen3-cpu), DIR (default: a fresh
# directory under /tmp, i.e. the disk under test).
set -euo pipefail
runs=${1:-3}
np=${2:-2}
canzona=${CANZONA:-build/apps/canzona}
model=${MODEL:-qwen3-cpu}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d "${DIR:-/tmp}/ckpt-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np")
train=("${mpirun[@]}" "$canzona" train --model "$model" --dp "$np" --warmup 0 --eval-every 0
  --seq-len 64 --micro-batch 1 --steps 1)
echo "== ${train[*]} --save-dir D; then --resume D --save-dir D2 (disk: $(df -h "$work" | tail -1))"
for ((i = 1; i <= runs; ++i)); do
  dd if=/dev/zero of="$work/dd.bin" bs=1M count=512 conv=fdatasync 2>"$work/ddw.txt"
  dd if="$work/dd.bin" of=/dev/null bs=1M 2>"$work/ddr.txt"
  rm -f "$work/dd.bin"
  rm -rf "$work/a" "$work/b"
  "${train[@]}" --save-dir "$work/a" >"$work/save.log"
  "${train[@]}" --resume "$work/a" --save-dir "$work/b" >"$work/load.log"
  bytes=$(du -cb "$work/a"/step-*/*.safetensors | tail -1 | cut -f1)
  save_ms=$(sed -n 's/^checkpoint saved: .* (\([0-9]*\) ms)$/\1/p' "$work/save.log")
  load_ms=$(sed -n 's/^checkpoint loaded: .* (\([0-9]*\) ms)$/\1/p' "$work/load.log")
  resave_ms=$(sed -n 's/^checkpoint saved: .* (\([0-9]*\) ms)$/\1/p' "$work/load.log")
  ddw=$(tail -1 "$work/ddw.txt" | awk '{print $(NF-1), $NF}')
  ddr=$(tail -1 "$work/ddr.txt" | awk '{print $(NF-1), $NF}')
  echo "run $i: safetensors $bytes bytes | save $save_ms ms, load $load_ms ms, re-save $resave_ms ms | dd write $ddw, dd read $ddr"
  echo "$bytes $save_ms $load_ms $resave_ms $ddw $ddr" >>"$work/runs.txt"
done
/usr/bin/python3 - "$work/runs.txt" <<'PY'
import statistics, sys
unit = {"kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}
rows = [line.split() for line in open(sys.argv[1])]
size = int(rows[0][0])
med = lambda k: statistics.median(float(r[k]) for r in rows)
save, load, resave = med(1), med(2), med(3)
ddw = statistics.median(float(r[4]) * unit[r[5]] for r in rows)
ddr = statistics.median(float(r[6]) * unit[r[7]] for r in rows)
print(f"median of {len(rows)}: {size / 1e6:.1f} MB of safetensors")
print(f"  save    {save:7.0f} ms = {size / save / 1e3:7.0f} MB/s  ({size / save * 1e3 / ddw:.2f}x dd write {ddw / 1e6:.0f} MB/s)")
print(f"  re-save {resave:7.0f} ms = {size / resave / 1e3:7.0f} MB/s  ({size / resave * 1e3 / ddw:.2f}x dd write)")
print(f"  load    {load:7.0f} ms = {size / load / 1e3:7.0f} MB/s  ({size / load * 1e3 / ddr:.2f}x dd read {ddr / 1e6:.0f} MB/s)")
PY
