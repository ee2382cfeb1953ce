#!/usr/bin/env bash
# Our safetensors against an independent reader/writer (safetensors_ref.py, standard library +
# numpy under Debian's /usr/bin/python3), both directions, each with a negative control so a
# checker that always passes is caught.
# Usage: safetensors_interop_test.sh <ckpt_tool> <safetensors_ref.py>
set -u
tool=$1
ref=$2
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
  failed=$((failed + 1))
  echo "FAIL: $*"
}

# C++ writes, numpy reads.
if "$tool" write-pattern "$work/ours.safetensors" && "$python" "$ref" check "$work/ours.safetensors"; then
  ok
else
  bad "numpy rejected the file layout_f32 + OutFile wrote"
fi
size=$(stat -c %s "$work/ours.safetensors")
printf '\x7f' | dd of="$work/ours.safetensors" bs=1 seek=$((size - 5)) conv=notrunc status=none
if "$python" "$ref" check "$work/ours.safetensors" 2>/dev/null; then
  bad "safetensors_ref.py check accepted a modified value"
else
  ok
fi

# numpy writes F32/BF16/F16/F64 and a sharded directory, C++ reads.
if "$python" "$ref" write "$work/py" && "$tool" check-python "$work/py"; then
  ok
else
  bad "C++ read of the numpy-written files differs"
fi
printf '\x01' | dd of="$work/py/expected/mixed.f16.f32" bs=1 seek=9 conv=notrunc status=none
if "$tool" check-python "$work/py" 2>/dev/null; then
  bad "ckpt_tool check-python accepted a wrong expected value"
else
  ok
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
