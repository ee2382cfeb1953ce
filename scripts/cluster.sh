#!/bin/bash
# A cluster of hosts on one machine: one network namespace per host, MPI across them over TCP
# (docs/cluster.md).
#
#   scripts/cluster.sh up   [--hosts N] [--rate R] [--delay D] [--id I]   # prints the cluster's id
#   scripts/cluster.sh run  [--hosts N] --np P [--rate R] [--delay D] [--timeout S] [--id I]
#                           [--keep] -- COMMAND...
#   scripts/cluster.sh cut  --id I --host H        # sets host H's data link down (a cut cable)
#   scripts/cluster.sh kill --id I --host H        # kills every process of host H
#   scripts/cluster.sh down [--id I | --all]
#
# Each host is a namespace czI-hH with two links:
#   * control (198.18.I.H+1/24): a veth to a bridge in the switch namespace czI-sw, unshaped; it
#     carries mpirun's own traffic (launch, standard output), as a cluster's management network;
#   * data (198.19.I.H+1/24, device czd0, MTU 9000): MPI's traffic (btl tcp), through
#     canzona-wire at rate R (default 1gbit) and one-way delay D (default 0.2ms) per link.
# Both ranges lie in 198.18.0.0/15, which RFC 2544 reserves for benchmark networks, and exist only
# inside these namespaces: no address outside them is ever a target. Ranks of one host talk over
# shared memory (btl vader).
#
# `run` brings a cluster up, runs `mpirun -np P` from host 0 with P/N consecutive ranks per host
# (so a TP group of P/N ranks or fewer stays inside a host), and takes the cluster down whatever
# happened (a trap), then exits with mpirun's status. `--timeout S` ends mpirun after S seconds
# (exit 124). With --id of a cluster brought up by `up`, it runs there; --keep leaves the cluster
# up afterwards (for a look at what is left in it; take it down with `down --id I`). The variables OPENBLAS_*, OMP_NUM_THREADS and CANZONA_* reach every rank.
#
# Exit 77 (ctest's SKIP_RETURN_CODE for the cluster tests) when namespaces cannot be made here,
# with the reason on stderr; 2 on bad usage; otherwise the command's status.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
state_root="${CANZONA_CLUSTER_STATE:-/tmp/canzona-cluster}"

die() { echo "cluster.sh: error: $*" >&2; exit 2; }
skip() { echo "cluster.sh: skipped: $*" >&2; exit 77; }

wire_binary() {
  local candidate
  for candidate in "${CANZONA_WIRE:-}" "$root/build/apps/canzona-wire"; do
    [[ -n "$candidate" && -x "$candidate" ]] && { echo "$candidate"; return; }
  done
  die "canzona-wire not found (build it: make build, or set CANZONA_WIRE)"
}

# Rate as bits per second: 1gbit, 100mbit, 500kbit, or a plain number.
rate_bps() {
  local r="${1,,}"
  local number="${r%[gmk]bit}"
  [[ "$number" =~ ^[0-9]+$ && "$number" -ge 1 ]] ||
    die "--rate '$1': expected a whole number >= 1 with gbit, mbit or kbit, e.g. 1gbit, 100mbit"
  case "$r" in
    *gbit) echo "$((number * 1000000000))" ;;
    *mbit) echo "$((number * 1000000))" ;;
    *kbit) echo "$((number * 1000))" ;;
    *) echo "$number" ;;
  esac
}

# Delay as microseconds: 0.2ms, 20ms, 150us, 0.
delay_us() {
  local d="${1,,}"
  case "$d" in
    *ms) awk -v v="${d%ms}" 'BEGIN { if (v !~ /^[0-9.]+$/) exit 1; printf "%d\n", v * 1000 }' \
           || die "--delay '$1': expected e.g. 0.2ms, 20ms, 150us" ;;
    *us) [[ "${d%us}" =~ ^[0-9]+$ ]] || die "--delay '$1': expected e.g. 0.2ms, 20ms, 150us"
         echo "${d%us}" ;;
    0) echo 0 ;;
    *) die "--delay '$1': expected e.g. 0.2ms, 20ms, 150us" ;;
  esac
}

can_make_namespaces() {
  [[ $(id -u) -eq 0 ]] || skip "namespaces need root (running as uid $(id -u))"
  command -v ip >/dev/null || skip "ip (Debian's iproute2) is not installed"
  command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
  [[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing (no TUN support)"
  local probe="czprobe-$$" why=""
  ip netns add "$probe" 2>/dev/null || skip "ip netns add fails here (no CAP_SYS_ADMIN or no netns)"
  ip netns exec "$probe" unshare --uts true 2>/dev/null || why="ip netns exec / unshare --uts fails here"
  [[ -n "$why" ]] || ip -n "$probe" tuntap add dev czp0 mode tun 2>/dev/null ||
    why="a TUN device cannot be made in a namespace here"
  ip netns del "$probe"
  [[ -z "$why" ]] || skip "$why"
}

# Claims the lowest free cluster id (an atomic mkdir), unless --id gave one.
claim_id() {
  mkdir -p "$state_root"
  local id
  for id in $(seq 1 250); do
    if mkdir "$state_root/$id" 2>/dev/null; then echo "$id"; return; fi
  done
  die "no free cluster id under $state_root (run: scripts/cluster.sh down --all)"
}

# Prints the error and fails (up() runs on the left of ||, where set -e does not act: each step
# checks its own status).
fail_up() { echo "cluster.sh: error: $*" >&2; return 1; }

up() {
  local id="$1" hosts="$2" rate="$3" delay="$4"
  local dir="$state_root/$id" sw="cz$id-sw" h ns wire
  wire="$(wire_binary)" || return 1
  mkdir -p "$dir" && echo "$hosts" >"$dir/hosts" || return 1
  ip netns add "$sw" && ip -n "$sw" link add czbr type bridge && ip -n "$sw" link set czbr up ||
    fail_up "cannot make the switch namespace $sw" || return 1
  local names=() data_addrs=()
  for ((h = 0; h < hosts; h++)); do
    ns="cz$id-h$h"
    { ip netns add "$ns" &&
      ip -n "$ns" link set lo up &&
      ip link add "czc$id-$h" type veth peer name czc0 netns "$ns" &&
      ip link set "czc$id-$h" netns "$sw" &&
      ip -n "$sw" link set "czc$id-$h" master czbr up &&
      ip -n "$ns" addr add "198.18.$id.$((h + 1))/24" dev czc0 &&
      ip -n "$ns" link set czc0 up &&
      ip -n "$ns" tuntap add dev czd0 mode tun &&
      ip -n "$ns" addr add "198.19.$id.$((h + 1))/24" dev czd0 &&
      ip -n "$ns" link set czd0 mtu 9000 up; } || fail_up "cannot make host $ns" || return 1
    names+=("$ns")
    data_addrs+=("198.19.$id.$((h + 1))")
  done
  rm -f "$dir/wire.pid"
  (IFS=,; exec "$wire" --netns "${names[*]}" --addrs "${data_addrs[*]}" --dev czd0 \
     --rate-bps "$(rate_bps "$rate")" --delay-us "$(delay_us "$delay")" \
     --ready "$dir/wire.pid") </dev/null >/dev/null 2>"$dir/wire.log" &
  echo $! >"$dir/wire.spawned"  # down finds the wire even before it is ready
  local i
  for i in $(seq 1 100); do
    [[ -s "$dir/wire.pid" ]] && break
    kill -0 "$(cat "$dir/wire.spawned")" 2>/dev/null ||
      fail_up "canzona-wire did not start: $(cat "$dir/wire.log")" || return 1
    sleep 0.05
  done
  [[ -s "$dir/wire.pid" ]] || fail_up "canzona-wire did not start within 5 s" || return 1
  # mpirun's rsh agent: enters the host's namespace (and a UTS namespace named after it, so
  # ranks print their host) and runs what mpirun asks there.
  cat >"$dir/agent" <<'AGENT' || return 1
#!/bin/bash
host="$1"; shift
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0"; exec /bin/sh -c "$*"' "$host" "$@"
AGENT
  chmod +x "$dir/agent" && echo "$rate $delay" >"$dir/link"
}

# Kills every process in the cluster's namespaces and removes them.
down() {
  local id="$1" dir="$state_root/$1" ns pids wire_pid=""
  [[ -s "$dir/wire.spawned" ]] && wire_pid="$(cat "$dir/wire.spawned")"
  [[ -n "$wire_pid" ]] && { kill "$wire_pid" 2>/dev/null || true; }
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^cz$id-(h[0-9]+|sw)$" || true); do
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^cz$id-(h[0-9]+|sw)$" || true); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids="$(ip netns pids "$ns" 2>/dev/null || true)"
      [[ -z "$pids" ]] && break
      kill -9 $pids 2>/dev/null || true
      sleep 0.1
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  if [[ -n "$wire_pid" ]]; then
    for _ in $(seq 1 50); do kill -0 "$wire_pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$wire_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

is_up() {
  [[ -s "$state_root/$1/wire.pid" ]] && ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "cz$1-h0"
}

# Exits 2 unless host H of cluster I exists.
require_host() {
  ip netns list | awk '{print $1}' | grep -qx "cz$1-h$2" || die "no host $2 in cluster $1"
}

command="${1:-}"
[[ -n "$command" ]] || die "usage: cluster.sh up|run|cut|kill|down [options] (scripts/cluster.sh --help)"
if [[ "$command" == "--help" || "$command" == "-h" || "$command" == "help" ]]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
shift
hosts=2 np="" rate=1gbit delay=0.2ms id="" host="" all=0 timeout=0 keep=0 link_given=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --rate) rate="$2"; link_given=1; shift 2 ;;
    --delay) delay="$2"; link_given=1; shift 2 ;;
    --id) id="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --all) all=1; shift ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ "$hosts" =~ ^[0-9]+$ && "$hosts" -ge 1 && "$hosts" -le 16 ]] || die "--hosts must be 1..16"
[[ -z "$id" || ( "$id" =~ ^[0-9]+$ && "$id" -ge 1 && "$id" -le 250 ) ]] || die "--id must be 1..250"
rate_bps "$rate" >/dev/null
delay_us "$delay" >/dev/null

case "$command" in
  up)
    can_make_namespaces
    if [[ -n "$id" ]]; then
      is_up "$id" && die "cluster $id is up already"
      mkdir -p "$state_root/$id"
    else
      id="$(claim_id)"
    fi
    up "$id" "$hosts" "$rate" "$delay" || { down "$id"; die "bringing cluster $id up failed"; }
    echo "$id"
    ;;
  down)
    if [[ "$all" -eq 1 ]]; then
      ids="$( (ls "$state_root" 2>/dev/null || true; ip netns list 2>/dev/null | awk '{print $1}' |
               sed -nE 's/^cz([0-9]+)-(h[0-9]+|sw)$/\1/p') | sort -u)"
      for i in $ids; do down "$i"; done
    else
      [[ -n "$id" ]] || die "down needs --id I or --all"
      down "$id"
    fi
    ;;
  cut)
    [[ -n "$id" && -n "$host" ]] || die "cut needs --id I --host H"
    require_host "$id" "$host"
    ip -n "cz$id-h$host" link set czd0 down
    ;;
  kill)
    [[ -n "$id" && -n "$host" ]] || die "kill needs --id I --host H"
    require_host "$id" "$host"
    pids="$(ip netns pids "cz$id-h$host")"
    [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
    ;;
  run)
    [[ $# -gt 0 ]] || die "run needs -- COMMAND..."
    [[ "$np" =~ ^[0-9]+$ && "$np" -ge 1 ]] || die "run needs --np P"
    (( np % hosts == 0 )) || die "--np $np is not a multiple of --hosts $hosts"
    [[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds"
    can_make_namespaces
    # With --id of a cluster that is up (from `up`), run on it; either way take it down after.
    if [[ -n "$id" ]] && is_up "$id"; then
      [[ "$(cat "$state_root/$id/hosts")" == "$hosts" ]] ||
        die "cluster $id has $(cat "$state_root/$id/hosts") hosts, not --hosts $hosts"
      [[ "$link_given" -eq 0 || "$(cat "$state_root/$id/link")" == "$rate $delay" ]] ||
        die "cluster $id is up with the link '$(cat "$state_root/$id/link")'; --rate and --delay belong to up"
      [[ "$keep" -eq 1 ]] || trap 'down "$id"' EXIT
      trap 'exit 130' INT TERM
    else
      if [[ -n "$id" ]]; then mkdir -p "$state_root/$id"; else id="$(claim_id)"; fi
      [[ "$keep" -eq 1 ]] || trap 'down "$id"' EXIT
      trap 'exit 130' INT TERM
      up "$id" "$hosts" "$rate" "$delay" || die "bringing cluster $id up failed"
    fi
    dir="$state_root/$id"
    for ((h = 0; h < hosts; h++)); do echo "cz$id-h$h slots=$((np / hosts))"; done >"$dir/hostfile"
    forward=()
    for v in $(compgen -e | grep -E '^(OPENBLAS_|OMP_NUM_THREADS$|CANZONA_)' || true); do
      forward+=(-x "$v")
    done
    limit=()
    [[ "$timeout" -gt 0 ]] && limit=(timeout --kill-after=5 "$timeout")
    set +e
    "${limit[@]}" ip netns exec "cz$id-h0" mpirun --allow-run-as-root --oversubscribe -np "$np" \
      --hostfile "$dir/hostfile" --map-by slot --bind-to none --mca plm_rsh_agent "$dir/agent" \
      --mca btl self,vader,tcp --mca btl_tcp_if_include "198.19.$id.0/24" \
      --mca oob_tcp_if_include "198.18.$id.0/24" ${CANZONA_CLUSTER_MCA:-} "${forward[@]}" "$@" </dev/null
    status=$?
    set -e
    exit "$status"
    ;;
  *) die "unknown command '$command' (up, run, cut, kill, down)" ;;
esac
