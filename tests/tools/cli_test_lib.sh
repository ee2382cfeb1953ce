# shellcheck shell=bash
# Shared helpers of the CLI test scripts (tests/apps/*.sh, tests/sim/*.sh); source it, then call
# cli_init. Every helper counts one pass or one failure; cli_finish prints "N passed, M failed"
# and returns non-zero when anything failed or nothing ran (a test that checks nothing fails).
# Pathname expansion is off (set -f), so unquoted check lists with "*" stay as written.
#
#   cli_init CHECKER             CHECKER = the canzona_check_output binary; makes $work (removed
#                                on exit) and zeroes the counters
#   expect_usage_error WORDS CMD...
#                                CMD exits with exactly 2, prints exactly one line on stderr that
#                                contains WORDS, and nothing on stdout
#   expect_mpi_usage_error WORDS CMD...
#                                CMD (an mpirun launch) exits with exactly 2, prints no MPI_ABORT
#                                banner, and its stderr less Open MPI's own exit notice
#                                (strip_mpirun_notice) is exactly one line containing WORDS
#   strip_mpirun_notice FILE     FILE without the blocks mpirun prints between dashed lines when a
#                                rank exits non-zero ("Primary job terminated normally, but ...")
#   expect_ok NAME CMD...        CMD exits with exactly 0; stdout in $work/NAME.out, stderr in
#                                $work/NAME.err; returns 1 (after counting a failure) otherwise
#   check_file FILE KIND CHECK...
#                                canzona_check_output FILE KIND CHECK... passes
#   expect_absent FILE           FILE does not exist (a failed command wrote nothing)
#   table_cell FILE ROW COLUMN   prints field COLUMN (awk numbering) of the line of FILE whose
#                                first field is ROW ("-1" = last field)
set -u
set -f  # checks hold '*' (JSON wildcards) and are word lists: never expand them as file globs

cli_init() {
  checker=$1
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  passed=0
  failed=0
}

pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $*"
}

expect_usage_error() {
  local expected=$1
  shift
  "$@" >"$work/usage.out" 2>"$work/usage.err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/usage.err")
  if [ "$rc" -ne 2 ]; then
    fail "$* exited $rc, expected 2 (stderr: $(cat "$work/usage.err"))"
  elif [ "$lines" -ne 1 ]; then
    fail "$* printed $lines stderr lines, expected 1: $(cat "$work/usage.err")"
  elif ! grep -qF -- "$expected" "$work/usage.err"; then
    fail "$*: stderr '$(cat "$work/usage.err")' lacks '$expected'"
  elif [ -s "$work/usage.out" ]; then
    fail "$*: a usage error also printed on stdout: $(head -c 200 "$work/usage.out")"
  else
    pass
  fi
}

strip_mpirun_notice() {
  awk '/^--------------------/ { inside = !inside; next } !inside' "$1"
}

expect_mpi_usage_error() {
  local expected=$1
  shift
  "$@" >"$work/usage.out" 2>"$work/usage.err"
  local rc=$?
  strip_mpirun_notice "$work/usage.err" >"$work/usage.ours"
  local lines
  lines=$(wc -l <"$work/usage.ours")
  if [ "$rc" -ne 2 ]; then
    fail "$* exited $rc, expected 2 (stderr: $(cat "$work/usage.err"))"
  elif grep -q "MPI_ABORT" "$work/usage.err"; then
    fail "$*: Open MPI's MPI_ABORT banner: $(cat "$work/usage.err")"
  elif [ "$lines" -ne 1 ]; then
    fail "$* printed $lines stderr lines besides mpirun's notice, expected 1: $(cat "$work/usage.ours")"
  elif ! grep -qF -- "$expected" "$work/usage.ours"; then
    fail "$*: stderr '$(cat "$work/usage.ours")' lacks '$expected'"
  else
    pass
  fi
}

expect_ok() {
  local name=$1
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$* exited $rc, expected 0 (stderr: $(head -c 500 "$work/$name.err"))"
    return 1
  fi
  pass
}

check_file() {
  local message
  if message=$("$checker" "$@" 2>&1 >/dev/null); then
    pass
  else
    fail "${message:-canzona_check_output $* failed}"
  fi
}

expect_absent() {
  if [ -e "$1" ]; then fail "$1 was written by a failed command"; else pass; fi
}

table_cell() {
  awk -v row="$2" -v col="$3" '$1 == row { print (col == -1 ? $NF : $col); exit }' "$1"
}

cli_finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}

# Caps this (sub)shell's memory at 4 GB: `ulimit -v` in a normal build; an ASan build
# (CANZONA_SANITIZE=1, make test-sanitize) reserves terabytes of shadow address space at start, so
# there the cap is ASan's own resident-memory limit instead.
bound_memory_4gb() {
  if [ -n "${CANZONA_SANITIZE:-}" ]; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:hard_rss_limit_mb=4000"
  else
    ulimit -v 4000000
  fi
}

# run_bounded CMD...: runs CMD with at most 20 s and 4 GB (bound_memory_4gb), in a subshell. In
# an ASan + UBSan build (CANZONA_SANITIZE=1) the bound is tripled, as cmake/CanzonaTesting.cmake
# triples test timeouts: such binaries run several times slower (the 16,384-head plan of
# cli_plan_limits takes 12-21 s there beside a parallel build, 4-5 s in Release).
run_bounded() {
  local seconds=20
  [ -n "${CANZONA_SANITIZE:-}" ] && seconds=60
  (
    bound_memory_4gb
    exec timeout "$seconds" "$@"
  )
}
