#!/bin/sh
# expect_cli.sh RC REGEX COMMAND...: runs COMMAND, prints its output, and fails unless it exits
# with RC and its combined stdout/stderr matches the extended regular expression REGEX.
expected_rc=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$expected_rc" ]; then
  echo "expect_cli: exit code $rc, expected $expected_rc" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_cli: output does not match '$pattern'" >&2
  exit 1
fi
