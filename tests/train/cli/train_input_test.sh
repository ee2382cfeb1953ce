#!/usr/bin/env bash
# `canzona train` given careless input, as a new user would: every case ends as promised, one
# stderr line `canzona: error: ...` naming what and where with exit 2 before any rank trains (under
# mpirun: once, every rank exits 2, no MPI_ABORT banner; mpirun's own exit notice aside), never a
# silent fallback, an allocation failure, a stack dump or a hang.
#   1. learning rates: nan, inf, negative (these once trained on the default lr and exited 0);
#   2. memory a run cannot have (micro-batch, model, sequence): refused with the need and what is
#      available; a sequence past max_position_embeddings; the default warmup with --steps 1; a
#      mixture-of-experts model (planned, not trained);
#   3. --init-from a regular file (once ended in MPI_ABORT), a --save-dir another run holds;
#   4. after MPI starts: a world size that does not fit the grid, on 3 ranks;
#   5. SIGINT to a single process and SIGTERM to mpirun during training: every rank stops after
#      its step, a complete checkpoint of that step is published (none half-written), and
#      --resume continues from it.
# The error cases of 1-4 run with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE as the machine's
# environment sets them (Haswell / 512 where unset), and one of each kind again with both unset
# and with OPENBLAS_CORETYPE=SkylakeX.
# Usage: train_input_test.sh <canzona> <mpirun> <canzona_check_output>
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
quick=(--model qwen3-tiny --seq-len 32 --micro-batch 2 --eval-every 0)

# The error cases under one BLAS environment: `error_cases all|some ENV-ARGS...` (env's -u NAME
# first, then NAME=VALUE); "some" runs one case of each kind (single process, mpirun before MPI,
# mpirun after MPI starts).
error_cases() {
  local which=$1
  shift
  local -a env_args=("$@")
  local run=(env "${env_args[@]}" "$canzona" train)
  local mpirun2=(env "${env_args[@]}" "$mpirun_exe" --allow-run-as-root --oversubscribe
                 --mca btl self,vader -np 2 "$canzona" train)
  expect_usage_error "--lr = nan must be a finite number in [0, 1000]" \
    "${run[@]}" "${quick[@]}" --steps 2 --lr nan
  expect_mpi_usage_error "x 2 ranks on this node = " \
    "${mpirun2[@]}" --model qwen3-tiny --dp 2 --steps 1 --micro-batch 100000
  expect_mpi_usage_error "world size 3 != dp 2 x tp 1 x pp 1" \
    env "${env_args[@]}" "$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader \
    -np 3 "$canzona" train "${quick[@]}" --dp 2 --steps 1
  [ "$which" = all ] || return 0
  expect_usage_error "--lr = inf must be a finite number" "${run[@]}" "${quick[@]}" --lr inf
  expect_usage_error "--lr = -1 must be a finite number in [0, 1000]" \
    "${run[@]}" "${quick[@]}" --lr -1
  expect_usage_error "--adamw-lr = -0.5 must be a finite number" \
    "${run[@]}" "${quick[@]}" --adamw-lr -0.5
  expect_mpi_usage_error "--lr = nan must be a finite number" \
    "${mpirun2[@]}" "${quick[@]}" --dp 2 --lr nan
  # Memory: the need per rank and its parts, what is available and where that figure comes from.
  expect_usage_error "memory: this run needs about" \
    "${run[@]}" --model qwen3-tiny --steps 1 --micro-batch 100000
  expect_usage_error "activations " "${run[@]}" --model qwen3-tiny --steps 1 --micro-batch 100000
  expect_usage_error " is available (" "${run[@]}" --model qwen3-8b --steps 1
  expect_usage_error "for --seq-len 40960 x --micro-batch 4" \
    "${run[@]}" --model qwen3-tiny --steps 1 --seq-len 40960
  expect_usage_error \
    "--seq-len = 1000000 must lie in [1, 40960] (max_position_embeddings of --model qwen3-tiny)" \
    "${run[@]}" --model qwen3-tiny --steps 1 --seq-len 1000000
  expect_usage_error "--micro-batch = 0 must lie in" "${run[@]}" --model qwen3-tiny --micro-batch 0
  expect_usage_error "--ep 2 x --etp 1 = 2 does not divide --dp 1 x --tp 1 = 1 ranks" \
    "${run[@]}" --model qwen3-moe-cpu --steps 1 --ep 2
  expect_usage_error "--test-kill-rank = -1 must lie in [0, 1073741824]" \
    "${run[@]}" "${quick[@]}" --test-kill-rank -1
  # --init-from a regular file: refused before MPI (it once ended in the MPI_ABORT banner).
  expect_usage_error "--init-from $work/regular: not a directory" \
    "${run[@]}" "${quick[@]}" --init-from "$work/regular"
  expect_mpi_usage_error "--init-from $work/regular: not a directory" \
    "${mpirun2[@]}" "${quick[@]}" --dp 2 --init-from "$work/regular"
  # A --save-dir another run holds (flock on DIR/.lock, as a running canzona train does).
  expect_usage_error "--save-dir $work/held: another run is writing checkpoints there" \
    "${run[@]}" "${quick[@]}" --steps 1 --save-dir "$work/held"
  expect_mpi_usage_error "another run is writing checkpoints there" \
    "${mpirun2[@]}" "${quick[@]}" --dp 2 --steps 1 --save-dir "$work/held"
  expect_absent "$work/held/step-00000001"
}

echo "not a directory" >"$work/regular"
mkdir -p "$work/held"
exec {held}>"$work/held/.lock"  # this shell holds the lock a running canzona train would hold
flock -n "$held" || fail "could not take the lock on $work/held/.lock"

error_cases all OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" \
  OPENBLAS_L2_SIZE="${OPENBLAS_L2_SIZE:-512}"
error_cases some -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
error_cases some -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX
exec {held}>&-

# The default warmup (10) fits --steps 1; the header names the BLAS core and its source.
if expect_ok steps1 "$canzona" train "${quick[@]}" --steps 1; then
  if grep -q "warmup 1 |" "$work/steps1.out"; then pass; else fail "steps1: warmup not 1"; fi
  if grep -qE "^BLAS core [A-Za-z]+ \(.*\) \| memory per rank: about [0-9.]+ [KMG]iB estimated" \
    "$work/steps1.out"; then pass; else fail "steps1: no BLAS core / memory line"; fi
fi

# --- 5. Signals. wait_for FILE REGEX: until a line of FILE matches (at most 60 s).
wait_for() {
  for _ in $(seq 600); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# check_stopped NAME DIR RC EXPECTED_RC: the run ended with EXPECTED_RC after "stopped by"; the
# checkpoint of the step it names is complete (ckpt inspect verifies every checksum), nothing
# half-written is published, and a --resume of DIR runs two more steps.
check_stopped() {
  local name=$1 dir=$2 rc=$3 expected=$4 signal=$5
  shift 5
  local ours step
  strip_mpirun_notice "$work/$name.err" >"$work/$name.ours"
  if [ "$rc" -ne "$expected" ]; then
    fail "$name: exited $rc, expected $expected: $(cat "$work/$name.err")"
    return
  fi
  pass
  ours=$(cat "$work/$name.ours")
  if [ "$(wc -l <"$work/$name.ours")" -eq 1 ] &&
    [[ "$ours" =~ ^canzona:\ stopped\ by\ $signal\ after\ step\ ([0-9]+)\ of\ lb-asc\;\ checkpoint\ step\ [0-9]+\ saved\ in ]]; then
    pass
    step=${BASH_REMATCH[1]}
  else
    fail "$name: stderr is not the one 'stopped by $signal' line: $ours"
    return
  fi
  local published
  published=$(printf '%s/step-%08d' "$dir" "$step")
  if [ -d "$published" ] && "$canzona" ckpt inspect "$published" >"$work/$name.inspect" 2>&1; then
    pass
  else
    fail "$name: $published missing or not valid: $(head -c 400 "$work/$name.inspect")"
  fi
  if [ -z "$(find "$dir" -maxdepth 1 -name 'step-*' ! -name "$(basename "$published")")" ]; then
    pass
  else
    fail "$name: other step directories published: $(ls -A "$dir")"
  fi
  local next=$((step + 2))
  if "$@" --steps "$next" --resume "$dir" >"$work/$name.resume.out" 2>"$work/$name.resume.err" &&
    grep -qE "lb-asc +step +$next/$next " "$work/$name.resume.out"; then
    pass
  else
    fail "$name: --resume $dir did not continue to step $next: $(tail -c 400 "$work/$name.resume.err")"
  fi
}

# SIGINT to one process: it saves the step it is in and exits 130.
"$canzona" train "${quick[@]}" --steps 100000 --log-interval 1 --save-dir "$work/int" >"$work/int.out" \
  2>"$work/int.err" &
pid=$!
if wait_for "$work/int.out" "step +3/100000"; then kill -INT "$pid"; else kill -KILL "$pid"; fi
wait "$pid"
check_stopped int "$work/int" $? 130 SIGINT "$canzona" train "${quick[@]}"

# SIGTERM to mpirun: it forwards the signal to both ranks; they agree, save, and end the job.
"$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 \
  "$canzona" train "${quick[@]}" --dp 2 --steps 100000 --log-interval 1 --save-dir "$work/term" \
  >"$work/term.out" 2>"$work/term.err" &
pid=$!
if wait_for "$work/term.out" "step +3/100000"; then kill -TERM "$pid"; else kill -KILL "$pid"; fi
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] && rc=1  # mpirun reports a job its ranks left with 143 as 1
check_stopped term "$work/term" "$rc" 1 SIGTERM mpi 2 "$canzona" train "${quick[@]}" --dp 2

cli_finish
