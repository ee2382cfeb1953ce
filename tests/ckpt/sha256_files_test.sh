#!/usr/bin/env bash
# sha256_file against Python's hashlib (Debian's /usr/bin/python3) on random files whose sizes
# straddle the 64-byte block and the 1 MiB read chunk; a flipped byte must change the digest.
# Usage: sha256_files_test.sh <ckpt_tool>
set -u
tool=$1
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
for size in 0 1 55 56 57 63 64 65 119 120 1000 65536 1048575 1048576 1048577 3145735; do
  file=$work/r$size.bin
  head -c "$size" /dev/urandom >"$file"
  ours=$("$tool" sha256 "$file")
  theirs=$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$file")
  if [ "$ours" = "$theirs" ] && [ ${#ours} -eq 64 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: size $size: ours '$ours', hashlib '$theirs'"
  fi
done
# Negative control: one flipped bit (XOR, so the byte always changes) must change our digest.
file=$work/r1000.bin
before=$("$tool" sha256 "$file")
"$python" -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(500); b = f.read(1)[0]; f.seek(500); f.write(bytes([b ^ 1]))' "$file"
after=$("$tool" sha256 "$file")
if [ "$before" != "$after" ]; then passed=$((passed + 1)); else
  failed=$((failed + 1))
  echo "FAIL: digest unchanged after modifying the file"
fi
"$tool" bench-sha256 256
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
