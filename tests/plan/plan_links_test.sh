#!/bin/bash
# A binary's link line names no BLAS, LAPACK or MPI library. Run on canzona_plan_test (which
# links only canzona_plan and GoogleTest) it holds the plan layer to "no BLAS, no MPI": a library
# that pulled in the kernels or a backend would put them on the line. Run on a binary that does
# link BLAS it must name the library (the checker's own check, in CMakeLists.txt).
# usage: plan_links_test.sh BUILD_DIR TARGET   (a Ninja build: reads `ninja -t commands`)
set -u
build=$1 target=$2
line=$(ninja -C "$build" -t commands "$target" | grep -F -- "-o $target " | tail -1)
if [ -z "$line" ]; then
  echo "no link line for $target in $build"
  exit 1
fi
found=$(tr ' ' '\n' <<<"$line" | grep -E '\.(so|a)(\.[0-9]+)*$|^-l' |
        grep -Ei 'blas|lapack|mpi' || true)
if [ -n "$found" ]; then
  echo "$target links:" $found
  exit 1
fi
echo "$target links no BLAS, LAPACK or MPI"
