#!/usr/bin/env bash
# The pictures as pictures (svg_render_check.py): every SVG the CLI draws renders with
# rsvg-convert at its size, nothing and no text reaches outside its canvas, and every value axis
# names its unit. The pictures: the README's three (scripts/render-pictures.sh --quick), a
# simulator sweep and a single bar, plans with pipeline stages, MoE experts, the longest planner
# name and asc alone, and loss plots without validation points and with one at the last step. The checker must
# also fail on a picture with text outside its canvas and on an axis without a unit.
# Usage: pictures_test.sh CANZONA_BUILD_DIR RSVG_CONVERT
set -uo pipefail
build=$1 rsvg=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
check=("/usr/bin/python3" "$here/svg_render_check.py" "$rsvg")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
canzona=$build/apps/canzona
export OPENBLAS_NUM_THREADS=1

"$root/scripts/render-pictures.sh" --quick --build "$build" --out "$work/img" ||
  fail "render-pictures.sh --quick failed"
for picture in plan simulate loss; do
  [ -s "$work/img/$picture.png" ] || fail "render-pictures.sh wrote no $picture.png"
done
"$canzona" simulate --model qwen3-0.6b --sweep tp --sweep-values 2,4,8 --gpus 16 \
  --svg "$work/sweep.svg" >/dev/null || fail "simulate --sweep tp --svg"
"$canzona" plan --model qwen3-mini --dp 4 --tp 2 --pp 2 --svg "$work/pp.svg" >/dev/null ||
  fail "plan --pp 2 --svg"
"$canzona" plan --model qwen3-0.6b --dp 4 --tp 2 --planner megatron-canzona \
  --svg "$work/long-names.svg" >/dev/null || fail "plan --planner megatron-canzona --svg"
"$canzona" plan --model "$root/tests/runtime/data/tiny-moe/config.json" --dp 4 --ep 2 \
  --svg "$work/moe.svg" >/dev/null || fail "plan of a MoE model --svg"
"$canzona" plan --model qwen3-mini --dp 4 --strategy asc --svg "$work/asc.svg" >/dev/null ||
  fail "plan --strategy asc --svg"
"$canzona" simulate --model qwen3-8b --tp 8 --sweep dp --sweep-values 1 --strategy lb-asc \
  --svg "$work/one-bar.svg" >/dev/null || fail "simulate with one bar --svg"
"$canzona" train --model qwen3-tiny --strategies sc,asc --steps 4 --warmup 1 --eval-every 0 \
  --plot "$work/noval.svg" >/dev/null || fail "train --plot without validation"
"$canzona" train --model qwen3-tiny --strategies lb-asc --steps 4 --warmup 1 --eval-every 9 \
  --plot "$work/lastval.svg" >/dev/null || fail "train --plot validating at the last step only"
"${check[@]}" "$work" "$work"/img/*.svg "$work"/{sweep,pp,long-names,moe,asc,one-bar}.svg \
  "$work/noval.svg" "$work/lastval.svg" || fail "svg_render_check.py found the faults above"

# The checker catches what it exists to catch.
cat >"$work/bad-text.svg" <<'SVG'
<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text class="axis-label y-label" x="10" y="50">time (s)</text>
<text x="150" y="50">a label that runs off the right edge</text>
</svg>
SVG
cat >"$work/bad-unit.svg" <<'SVG'
<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text class="axis-label y-label" x="10" y="50">time</text>
</svg>
SVG
out=$("${check[@]}" "$work" "$work/bad-text.svg" 2>&1) &&
  fail "the checker passed text outside the canvas"
grep -q "text outside the canvas: 'a label that runs off the right edge'" <<<"$out" ||
  fail "the checker did not name the text outside the canvas: $out"
out=$("${check[@]}" "$work" "$work/bad-unit.svg" 2>&1) && fail "the checker passed an axis without a unit"
grep -q "axis label 'time' names no unit" <<<"$out" || fail "the checker did not name the unitless axis: $out"

[ "$failed" = 0 ] && echo "pictures: all checks passed"
exit "$failed"
