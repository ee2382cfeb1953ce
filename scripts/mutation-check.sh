#!/usr/bin/env bash
# Mutation check: does the test suite catch small, realistic bugs?
#
# Copies the current work tree (uncommitted changes included, build*/ excluded) to a scratch
# directory, configures and builds it once (CMake + Ninja, Release, as the Makefile does) and runs
# the whole suite unmutated (the baseline must pass). Then, for each mutation of
# scripts/mutations.txt, one at a time: applies it (a literal search/replace on one file of the
# scratch copy), rebuilds incrementally, runs the suite and records KILLED (a test failed, the
# first one is named), SURVIVED (everything passed), NOBUILD (the mutant does not compile: a broken
# list entry, never counted as killed) or ERROR (ctest failed without a failed test); then restores
# the file from its pristine copy. Your work tree is never written to. Prints a table; exits 0
# only when every mutation was killed.
#
# The suite runs in two ctest passes with --stop-on-failure: the tests without the `mpi` label
# first, then the `mpi` ones. Together they are the whole suite (what `make test` runs) less
# mutations_apply, which fails on any mutant by design; the split only makes most mutations die
# in seconds instead of behind the slow multi-rank runs.
#
# Slow (a full build plus one incremental build and suite run per mutation), so it is not part of
# `make test`.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/mutation-check.sh [--list] [--check] [--diff] [--only ID[,ID...]] [--jobs N]
                                 [--scratch DIR] [--keep] [--skip-baseline] [--mutations FILE]

  --list            print the mutations (id, layer, file, description) and exit
  --check           only verify that every selected mutation applies (its search text occurs
                    exactly once) to the current work tree; no copy, no build
  --diff            like --check, and print each mutation as a unified diff
  --only ID[,ID]    run only these mutations (e.g. --only O1,R1)
  --jobs N          parallel build jobs and ctest -j (default 2)
  --scratch DIR     scratch directory (default: a new mktemp -d, removed at the end unless --keep);
                    an existing DIR from an earlier run is reused: only changed files are copied,
                    so its build stays incremental. A DIR you name is never removed.
  --keep            keep the scratch directory (build, per-mutation logs) after the run
  --skip-baseline   do not run the unmutated suite first (only when you know it passes)
  --mutations FILE  mutation list (default: scripts/mutations.txt next to this script)
  -h, --help        this help

Exit status: 0 every mutation killed; 1 a mutation survived, did not build, did not apply, or
the baseline failed; 2 bad command line.
EOF
}

die() {
  echo "mutation-check: $*" >&2
  exit 1
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$script_dir/.." && pwd)
mutations_file="$script_dir/mutations.txt"
jobs=2
scratch=""
keep=0
list=0
check_only=0
show_diff=0
skip_baseline=0
only=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) list=1 ;;
    --check) check_only=1 ;;
    --diff) show_diff=1 ;;
    --only)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      only=$2
      shift ;;
    --jobs)
      [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
      jobs=$2
      shift ;;
    --scratch)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      scratch=$2
      shift ;;
    --keep) keep=1 ;;
    --skip-baseline) skip_baseline=1 ;;
    --mutations)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      mutations_file=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
      shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "mutation-check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ -f $mutations_file ]] || die "no mutation list at $mutations_file"

# --- the mutation list ------------------------------------------------------------------------
ids=() layers=() files=() descs=() searches=() replaces=()

trim() {
  local s=$1
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf '%s' "$s"
}

# Lines joined by newlines (no trailing newline).
join_lines() {
  local IFS=$'\n'
  printf '%s' "$*"
}

parse_mutations() {
  local line state=idle lineno=0 id="" rest f1 f2 f3 f4
  local -a search=() replace=()
  local -A seen=()
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    case $state in
      idle)
        if [[ $line == "@ "* ]]; then
          rest=${line#@ }
          IFS='|' read -r f1 f2 f3 f4 <<<"$rest"
          id=$(trim "$f1")
          [[ $id =~ ^[A-Za-z0-9_-]+$ && -n $(trim "${f3:-}") && -n $(trim "${f4:-}") ]] ||
            die "$mutations_file:$lineno: expected '@ ID | layer | file | description'"
          [[ -z ${seen[$id]:-} ]] || die "$mutations_file:$lineno: duplicate mutation id $id"
          seen[$id]=1
          ids+=("$id")
          layers+=("$(trim "$f2")")
          files+=("$(trim "$f3")")
          descs+=("$(trim "$f4")")
          state=header
        elif [[ -n ${line//[[:space:]]/} && $line != \#* ]]; then
          die "$mutations_file:$lineno: unexpected line outside a mutation: $line"
        fi ;;
      header)
        [[ $line == "<<<" ]] || die "$mutations_file:$lineno: expected '<<<' after mutation $id"
        search=() replace=() state=search ;;
      search)
        if [[ $line == "===" ]]; then state=replace; else search+=("$line"); fi ;;
      replace)
        if [[ $line == ">>>" ]]; then
          searches+=("$(join_lines "${search[@]}")")
          replaces+=("$(join_lines "${replace[@]}")")
          [[ -n ${searches[-1]//[[:space:]]/} ]] || die "mutation $id: empty search text"
          [[ ${searches[-1]} != "${replaces[-1]}" ]] || die "mutation $id: replacement equals search text"
          state=idle
        else
          replace+=("$line")
        fi ;;
    esac
  done <"$mutations_file"
  [[ $state == idle ]] || die "$mutations_file: mutation $id is not closed with '>>>'"
  [[ ${#ids[@]} -gt 0 ]] || die "$mutations_file: no mutations"
}
parse_mutations

selected=()
if [[ -n $only ]]; then
  IFS=',' read -r -a only_ids <<<"$only"
  for w in "${only_ids[@]}"; do
    found=0
    for i in "${!ids[@]}"; do
      if [[ ${ids[$i]} == "$w" ]]; then
        selected+=("$i")
        found=1
      fi
    done
    [[ $found == 1 ]] || { echo "mutation-check: unknown mutation id '$w' (see --list)" >&2; exit 2; }
  done
else
  selected=("${!ids[@]}")
fi

if [[ $list == 1 ]]; then
  printf '%-4s %-8s %-36s %s\n' id layer file description
  for i in "${selected[@]}"; do
    printf '%-4s %-8s %-36s %s\n' "${ids[$i]}" "${layers[$i]}" "${files[$i]}" "${descs[$i]}"
  done
  exit 0
fi

# Occurrences of $2 in $1 (non-overlapping).
# count_occurrences <file> <text>: non-overlapping literal occurrences of text in the file. In
# Python: bash's own pattern removal is quadratic in the file's length, which took 80 s for the
# whole list on a 2-core machine.
count_occurrences() {
  /usr/bin/python3 -c 'import sys; print(open(sys.argv[1], encoding="utf-8").read().count(sys.argv[2]))' "$1" "$2"
}

# check_applies <index> <tree>: the search text occurs exactly once in the target file.
check_applies() {
  local i=$1 path="$2/${files[$1]}" n
  [[ -f $path ]] || die "mutation ${ids[$i]} does not apply: no file ${files[$i]}"
  n=$(count_occurrences "$path" "${searches[$i]}")
  [[ $n == 1 ]] || die "mutation ${ids[$i]} does not apply: its search text occurs $n times" \
    "in ${files[$i]} (expected exactly once); update $mutations_file"
}

# apply_mutation <index> <tree>: literal search/replace in the scratch copy.
apply_mutation() {
  local i=$1 path="$2/${files[$1]}" content
  check_applies "$i" "$2"
  content=$(cat -- "$path" && printf x)  # the x keeps trailing newlines
  content=${content%x}
  printf '%s' "${content%%"${searches[$i]}"*}${replaces[$i]}${content#*"${searches[$i]}"}" >"$path"
}

if [[ $check_only == 1 || $show_diff == 1 ]]; then
  for i in "${selected[@]}"; do check_applies "$i" "$repo"; done
  if [[ $show_diff == 1 ]]; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/canzona-mutation-diff.XXXXXX")
    trap 'rm -rf -- "$tmp"' EXIT
    for i in "${selected[@]}"; do
      mkdir -p -- "$(dirname -- "$tmp/${files[$i]}")"
      cp -- "$repo/${files[$i]}" "$tmp/${files[$i]}"
      apply_mutation "$i" "$tmp"
      echo "=== ${ids[$i]} (${layers[$i]}): ${descs[$i]}"
      diff -u --label "a/${files[$i]}" --label "b/${files[$i]}" "$repo/${files[$i]}" \
        "$tmp/${files[$i]}" || true
      cp -- "$repo/${files[$i]}" "$tmp/${files[$i]}"
    done
  fi
  echo "mutation-check: all ${#selected[@]} mutations apply to $repo"
  exit 0
fi

# --- scratch copy and build -------------------------------------------------------------------
owns_scratch=0
if [[ -z $scratch ]]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/canzona-mutation.XXXXXX")
  owns_scratch=1
else
  mkdir -p "$scratch"
  scratch=$(cd "$scratch" && pwd)
fi
case "$scratch/" in
  "$repo/"*) die "the scratch directory must lie outside the repository ($scratch)" ;;
esac
# Only a directory this script made (marked) or an empty one is used: stale files are deleted
# from its tree/ below.
stamp="$scratch/.canzona-mutation-scratch"
if [[ ! -f $stamp && -n $(ls -A "$scratch") ]]; then
  [[ $owns_scratch == 1 ]] ||
    die "--scratch $scratch is not empty and was not made by this script; name a new directory"
fi
touch "$stamp"
tree="$scratch/tree"
build="$scratch/build"
pristine="$scratch/pristine"
logs="$scratch/logs"
mkdir -p "$tree" "$pristine" "$logs"

current=-1  # index of the mutation applied right now, -1 for none
restore() {
  local i=$1
  # A plain cp (new mtime, not -p): Ninja must see the restored file as newer than the objects
  # built from the mutant, or the next build would keep them.
  cp -- "$pristine/$i" "$tree/${files[$i]}"
}
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  if [[ $current -ge 0 ]]; then restore "$current"; fi
  if [[ $keep == 0 && $owns_scratch == 1 ]]; then
    rm -rf -- "$scratch"
  else
    echo "mutation-check: scratch directory kept: $scratch (logs in $logs)" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Files of the work tree: tracked and untracked-but-not-ignored (build*/ is ignored), as they are
# on disk now. Only files that differ are copied, so a reused scratch build stays incremental.
echo "mutation-check: copying $repo -> $tree"
copied=0
declare -A in_work_tree=()
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do
    [[ -f $repo/$f && ! -L $repo/$f ]] || continue
    if ! cmp -s -- "$repo/$f" "$tree/$f"; then
      mkdir -p -- "$(dirname -- "$tree/$f")"
      cp -- "$repo/$f" "$tree/$f"
      copied=$((copied + 1))
    fi
    in_work_tree["$f"]=1
  done < <(git -C "$repo" ls-files -z --cached --others --exclude-standard)
  # Files of a reused scratch tree that the work tree no longer has.
  while IFS= read -r -d '' f; do
    f=${f#"$tree/"}
    if [[ -z ${in_work_tree["$f"]:-} ]]; then
      rm -f -- "$tree/$f"
      copied=$((copied + 1))
    fi
  done < <(find "$tree" -type f -print0)
else
  tar -C "$repo" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tree" -xf -
  copied=all
fi
echo "mutation-check: $copied files copied or removed"

export OPENBLAS_NUM_THREADS=1
cd "$tree"

# Every selected mutation must apply before we spend time building.
for i in "${selected[@]}"; do check_applies "$i" "$tree"; done

build_tree() {  # build_tree <log>
  cmake --build "$build" -j "$jobs" >"$1" 2>&1
}

# run_suite <log>: 0 if the whole suite passes; 1 if a test failed (sets first_failed); 2 if
# ctest failed without reporting a failed test.
first_failed=""
run_suite() {
  local log=$1 rc=0
  first_failed=""
  : >"$log"
  for pass in "-LE mpi" "-L mpi"; do
    # mutations_apply checks that every mutation's search text is in the tree, which a mutant
    # never is: it would "kill" every mutation, so the mutant runs the suite without it.
    # shellcheck disable=SC2086
    (cd "$build" && ctest $pass -E '^mutations_apply$' --stop-on-failure --output-on-failure \
      -j "$jobs") >>"$log" 2>&1 ||
      rc=$?
    if [[ $rc != 0 ]]; then
      # The first test ctest reports as failed (skipped or disabled tests do not count).
      first_failed=$(grep -E 'Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout|Not Run)' "$log" |
        grep -v 'Disabled' | head -n 1 | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' || true)
      if [[ -z $first_failed ]]; then
        first_failed="(ctest exit status $rc, no failed test)"
        return 2
      fi
      return 1
    fi
  done
  return 0
}

t0=$SECONDS
if [[ ! -f $build/build.ninja ]]; then
  echo "mutation-check: configuring $build"
  cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$logs/configure.log" 2>&1 ||
    die "configure failed, see $logs/configure.log (use --keep)"
fi
echo "mutation-check: building (-j $jobs)"
build_tree "$logs/build.log" || die "the unmutated tree does not build, see $logs/build.log (use --keep)"
echo "mutation-check: build done in $((SECONDS - t0)) s"
if [[ $skip_baseline == 0 ]]; then
  t1=$SECONDS
  echo "mutation-check: baseline suite (unmutated)"
  run_suite "$logs/baseline.log" ||
    die "the unmutated suite fails ($first_failed), see $logs/baseline.log; fix it before checking mutations"
  echo "mutation-check: baseline passed in $((SECONDS - t1)) s"
fi

# --- the mutations ----------------------------------------------------------------------------
results=() failed_tests=() build_s=() test_s=()
n=${#selected[@]}
k=0
for i in "${selected[@]}"; do
  k=$((k + 1))
  id=${ids[$i]}
  cp -- "$tree/${files[$i]}" "$pristine/$i"
  current=$i
  apply_mutation "$i" "$tree"
  tb=$SECONDS
  if build_tree "$logs/$id.build.log"; then
    bs=$((SECONDS - tb))
    tt=$SECONDS
    suite=0
    run_suite "$logs/$id.test.log" || suite=$?
    case $suite in
      0) result=SURVIVED ;;
      1) result=KILLED ;;
      *) result=ERROR ;;
    esac
    ts=$((SECONDS - tt))
  else
    # A mutant that does not compile proves nothing about the tests: the list must be fixed.
    bs=$((SECONDS - tb))
    ts=0
    result=NOBUILD
    first_failed="(does not compile, see $id.build.log)"
  fi
  restore "$i"
  current=-1
  [[ $result == SURVIVED ]] && first_failed="-"
  results[i]=$result
  failed_tests[i]=$first_failed
  build_s[i]=$bs
  test_s[i]=$ts
  printf 'mutation-check: [%d/%d] %-4s %-8s build %4d s, suite %4d s: %s %s\n' "$k" "$n" "$id" \
    "${layers[$i]}" "$bs" "$ts" "$result" "$first_failed"
done

# --- report -----------------------------------------------------------------------------------
echo
printf '%-4s %-8s %-32s %-9s %-56s %6s %6s  %s\n' id layer file result "first failing test" \
  build_s test_s description
killed=0
not_killed=()
for i in "${selected[@]}"; do
  printf '%-4s %-8s %-32s %-9s %-56s %6d %6d  %s\n' "${ids[$i]}" "${layers[$i]}" "${files[$i]}" \
    "${results[$i]}" "${failed_tests[$i]}" "${build_s[$i]}" "${test_s[$i]}" "${descs[$i]}"
  if [[ ${results[$i]} == KILLED ]]; then
    killed=$((killed + 1))
  else
    not_killed+=("${ids[$i]}")
  fi
done
echo
echo "mutation-check: $killed of $n mutations killed in $((SECONDS - t0)) s"
if [[ ${#not_killed[@]} -gt 0 ]]; then
  echo "mutation-check: NOT killed: ${not_killed[*]}"
  exit 1
fi
exit 0
