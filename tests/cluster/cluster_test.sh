#!/usr/bin/env bash
# Multi-host runs on a cluster of network namespaces (scripts/cluster.sh, docs/cluster.md).
# Usage: cluster_test.sh MODE <canzona> <canzona-wire> <canzona_check_output>
#
#   bitwise  Every strategy trains qwen3-tiny across 2 hosts bitwise as on one host: DP 2 (one
#            rank per host) on a slow link (100 Mbit/s, 20 ms, with --collective-timeout 20: the
#            timeout does not fire on a slow but live link), DP 2 x TP 2 (TP inside each host) on
#            the default link, `compare --verify` at DP 2 x TP 2; a checkpoint saved across hosts
#            resumes on one host bitwise (losses, params hash, final checkpoint byte for byte).
#   cut      Host 1's data link is cut mid-run (ip link set czd0 down): every rank has ended
#            within --collective-timeout + 30 s, with exit status 2 and the timeout's line naming
#            the operation, and no process is left in any namespace.
#   kill     Host 1's ranks are killed mid-run (DP 4, 2 ranks per host, a checkpoint every step,
#            a 100 Mbit/s, 20 ms link so that the kill after step 3 lands before step 12):
#            the job ends, no process is left; the run resumes on host 0 alone (DP 2, twice the
#            accumulation, the same global batch) and its losses stay within 1e-5 relative of the
#            run that never stopped.
# Exits 77 (skipped, with the reason) where network namespaces cannot be made.
# shellcheck disable=SC1091
mode=$1
canzona=$2
export CANZONA_WIRE=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$root/scripts/cluster.sh
source "$here/../tools/cli_test_lib.sh"
cli_init "$4"
set +f
export OPENBLAS_NUM_THREADS=1

# Skip (77) when this machine cannot make namespaces; cluster.sh says why.
probe=$("$cluster" up --hosts 1 2>&1)
rc=$?
if [ "$rc" -eq 77 ]; then
  echo "$probe"
  exit 77
fi
[ "$rc" -eq 0 ] || { echo "FAIL: cluster.sh up: $probe"; exit 1; }
"$cluster" down --id "$probe"

quick=(train --model qwen3-tiny --seq-len 32 --micro-batch 2 --warmup 1 --bucket-size 100000)
one_host() {
  local np=$1
  shift
  timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" "$@"
}
# Per run: strategy, each step's loss (repr: the exact double) and the params hash.
curves() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
for run in json.load(open(sys.argv[1]))["runs"]:
    print(run["strategy"], [repr(s["loss"]) for s in run["steps"]], run["params_hash"])
PY
}
same_curves() {
  if [ "$(curves "$1" | wc -l)" -lt 1 ]; then
    fail "$3: no run read from $1"
  elif diff <(curves "$1") <(curves "$2") >"$work/curves.diff"; then pass; else
    fail "$3: loss curves or params differ from one host: $(head -c 600 "$work/curves.diff")"
  fi
}
# No live process left in namespace $1 (a host of a cluster that is still up). A process that
# has exited but not yet been reaped by its parent (state Z, <defunct>) is not a live one; the
# parent is given up to 10 s to reap it, and live ones the same time to exit.
no_orphans() {
  local pids live pid
  for _ in $(seq 1 20); do
    pids=$(ip netns pids "$1" 2>/dev/null)
    live=
    for pid in $pids; do
      case "$(ps -o stat= -p "$pid" 2>/dev/null)" in
        "" | Z*) ;;  # gone, or exited and waiting to be reaped
        *) live="$live $pid" ;;
      esac
    done
    live=${live# }
    [ -z "$live" ] && break
    sleep 0.5
  done
  if [ -z "$live" ]; then pass; else
    fail "processes left in $1: $(ps -o pid,stat,args -p "${live// /,}" | tail -n +2)"
  fi
}

case "$mode" in
bitwise)
  # DP 2, one rank per host, on a slow link.
  expect_ok dp2_one one_host 2 "$canzona" "${quick[@]}" --dp 2 --strategies all --steps 3 \
    --json "$work/dp2_one.json"
  expect_ok dp2_two "$cluster" run --hosts 2 --np 2 --rate 100mbit --delay 20ms --timeout 150 -- \
    "$canzona" "${quick[@]}" --dp 2 --strategies all --steps 3 --collective-timeout 20 \
    --json "$work/dp2_two.json" && same_curves "$work/dp2_one.json" "$work/dp2_two.json" "DP 2 on a slow link"
  # DP 2 x TP 2, TP inside each host.
  expect_ok tp_one one_host 4 "$canzona" "${quick[@]}" --dp 2 --tp 2 --strategies all --steps 3 \
    --json "$work/tp_one.json"
  expect_ok tp_two "$cluster" run --hosts 2 --np 4 --timeout 150 -- \
    "$canzona" "${quick[@]}" --dp 2 --tp 2 --strategies all --steps 3 \
    --json "$work/tp_two.json" && same_curves "$work/tp_one.json" "$work/tp_two.json" "DP 2 x TP 2"
  # compare --verify on synthetic gradients.
  if expect_ok verify "$cluster" run --hosts 2 --np 4 --timeout 120 -- \
    "$canzona" compare --model qwen3-mini --dp 2 --tp 2 --steps 2 --warmup 0 --verify; then
    if grep -q "^verify: bitwise identical to the single-process reference and across the 6 strategies" "$work/verify.out" &&
      ! grep -qi "differ\|FAIL" "$work/verify.out"; then pass; else
      fail "compare --verify across hosts: $(tail -5 "$work/verify.out")"
    fi
  fi
  # A checkpoint saved across hosts, resumed on one host.
  expect_ok save "$cluster" run --hosts 2 --np 4 --timeout 120 -- \
    "$canzona" "${quick[@]}" --dp 2 --tp 2 --steps 4 --save-dir "$work/ck" --save-every 2 \
    --json "$work/save.json"
  if expect_ok resume one_host 4 "$canzona" "${quick[@]}" --dp 2 --tp 2 --steps 4 \
    --save-dir "$work/ck2" --save-every 2 --resume "$work/ck/step-00000002" \
    --json "$work/resume.json"; then
    want=$(curves "$work/save.json" | /usr/bin/python3 -c "
import ast, sys
name, rest = sys.stdin.read().split(' ', 1)
losses, h = rest.rsplit(' ', 1)
print(name, ast.literal_eval(losses)[2:], h.strip())")
    got=$(curves "$work/resume.json" | /usr/bin/python3 -c "
import ast, sys
name, rest = sys.stdin.read().split(' ', 1)
losses, h = rest.rsplit(' ', 1)
print(name, ast.literal_eval(losses), h.strip())")
    if [ "$want" = "$got" ]; then pass; else
      fail "resume on one host: '$got' differs from the cross-host run's '$want'"
    fi
    if cmp -s "$work/ck/step-00000004/model.safetensors" "$work/ck2/step-00000004/model.safetensors" &&
      cmp -s "$work/ck/step-00000004/optimizer.safetensors" \
        "$work/ck2/step-00000004/optimizer.safetensors"; then pass; else
      fail "step 4's checkpoint after the one-host resume differs from the cross-host run's"
    fi
  fi
  ;;
cut)
  id=$("$cluster" up --hosts 2) || { fail "cluster.sh up"; cli_finish; exit; }
  trap '"$cluster" down --id "$id"; rm -rf "$work"' EXIT
  timeout_s=8
  start=$(date +%s)
  "$cluster" run --id "$id" --hosts 2 --np 4 --keep --timeout 120 -- \
    "$canzona" "${quick[@]}" --dp 2 --tp 2 --steps 100000 --log-interval 1 \
    --collective-timeout "$timeout_s" \
    >"$work/cut.out" 2>"$work/cut.err" &
  runner=$!
  for _ in $(seq 1 600); do grep -q "step  *2/" "$work/cut.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "step  *2/" "$work/cut.out" || fail "the run did not reach step 2: $(tail -3 "$work/cut.err")"
  cut_at=$(date +%s)
  "$cluster" cut --id "$id" --host 1
  wait "$runner"
  rc=$?
  took=$(($(date +%s) - cut_at))
  if [ "$rc" -eq 2 ]; then pass; else fail "after the cut the job exited $rc, expected 2: $(tail -5 "$work/cut.err")"; fi
  if [ "$took" -le $((timeout_s + 30)) ]; then pass; else
    fail "the job ended $took s after the cut, more than the timeout $timeout_s s + 30 s"
  fi
  lines=$(grep -c "^canzona: error: rank [0-9]* (host cz$id-h[01]): collective timeout: .*MPI_[A-Za-z]*.* on the [A-Za-z ]* group did not complete within $timeout_s s; waiting for world ranks* [0-9]" "$work/cut.err")
  if [ "$lines" -ge 1 ]; then pass; else fail "no rank printed the timeout line: $(cat "$work/cut.err")"; fi
  if grep "^canzona:" "$work/cut.err" | grep -qv "collective timeout"; then
    fail "a rank printed another line: $(grep "^canzona:" "$work/cut.err" | grep -v "collective timeout")"
  else pass; fi
  echo "cut after $((cut_at - start)) s; the job ended $took s later; $lines rank(s) printed the timeout line"
  no_orphans "cz$id-h0"
  no_orphans "cz$id-h1"
  ;;
kill)
  tol=1e-5
  args=("${quick[@]}" --steps 12 --eval-every 0)
  expect_ok ref one_host 4 "$canzona" "${args[@]}" --dp 4 --json "$work/ref.json"
  # A slow link, so steps 4..12 take seconds and the kill lands mid-run.
  id=$("$cluster" up --hosts 2 --rate 100mbit --delay 20ms) || { fail "cluster.sh up"; cli_finish; exit; }
  trap '"$cluster" down --id "$id"; rm -rf "$work"' EXIT
  "$cluster" run --id "$id" --hosts 2 --np 4 --keep --timeout 120 -- \
    "$canzona" "${args[@]}" --dp 4 --save-dir "$work/ck" --save-every 1 \
    >"$work/kill.out" 2>"$work/kill.err" &
  runner=$!
  for _ in $(seq 1 600); do [ -d "$work/ck/step-00000003" ] && break; sleep 0.05; done
  [ -d "$work/ck/step-00000003" ] || fail "no checkpoint of step 3 appeared: $(tail -3 "$work/kill.err")"
  killed_at=$(date +%s)
  "$cluster" kill --id "$id" --host 1
  wait "$runner"
  rc=$?
  took=$(($(date +%s) - killed_at))
  if [ "$rc" -ne 0 ]; then pass; else fail "the job exited 0 after host 1's ranks were killed"; fi
  if [ "$took" -le 60 ]; then pass; else fail "the job ended $took s after the kill"; fi
  no_orphans "cz$id-h0"
  no_orphans "cz$id-h1"
  last=$(find "$work/ck" -mindepth 1 -maxdepth 1 -type d -name 'step-????????' | sort | tail -1)
  step=$((10#${last##*step-}))
  echo "host 1 killed after step $step's checkpoint; the job ended $took s later"
  # Resume on host 0 alone: half the ranks, twice the accumulation.
  if expect_ok resumed one_host 2 "$canzona" "${args[@]}" --dp 2 --grad-accum 2 \
    --resume "$last" --json "$work/resumed.json"; then
    /usr/bin/python3 - "$work/ref.json" "$work/resumed.json" "$step" "$tol" >"$work/cmp.txt" <<'PY'
import json, sys
ref = {s["step"]: s["loss"] for s in json.load(open(sys.argv[1]))["runs"][0]["steps"]}
got = {s["step"]: s["loss"] for s in json.load(open(sys.argv[2]))["runs"][0]["steps"]}
first, tol = int(sys.argv[3]) + 1, float(sys.argv[4])
worst = max(abs(got[k] - ref[k]) / abs(ref[k]) for k in range(first, max(ref) + 1))
print(f"steps {first}..{max(ref)}: largest relative loss difference {worst:.3g}")
sys.exit(0 if sorted(got) == list(range(first, max(ref) + 1)) and worst <= tol else 1)
PY
    if [ $? -eq 0 ]; then pass; else fail "resumed on one host: $(cat "$work/cmp.txt")"; fi
    cat "$work/cmp.txt"
  fi
  ;;
*)
  echo "unknown mode $mode"
  exit 2
  ;;
esac
cli_finish
