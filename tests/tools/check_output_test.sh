#!/usr/bin/env bash
# Self-test of canzona_check_output (check_output.cpp): it must pass good files and fail, with exit
# code 1 and exactly one line on stderr naming the problem, on every kind of bad file the CLI tests
# rely on it to catch: missing, empty, malformed, a key absent, a NaN (written as null), a number
# out of range, a table value that does not match, a broken or wrong SVG, a broken trace. A
# malformed check is a usage error (exit 2). Usage: check_output_test.sh <canzona_check_output>
set -u
set -f  # checks hold "*" (JSON wildcards): never expand them as file globs
check=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect RC "<stderr substring>" FILE KIND CHECK...
expect() {
  local rc_expected=$1 words=$2
  shift 2
  "$check" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$rc" -ne "$rc_expected" ]; then
    fail "check $* exited $rc, expected $rc_expected (stderr: $(cat "$work/err"))"
  elif [ "$rc" -ne 0 ] && [ "$lines" -ne 1 ]; then
    fail "check $* printed $lines stderr lines, expected 1: $(cat "$work/err")"
  elif [ "$rc" -ne 0 ] && ! grep -qF -- "$words" "$work/err"; then
    fail "check $*: stderr '$(cat "$work/err")' lacks '$words'"
  elif [ "$rc" -eq 0 ] && ! grep -q "checks passed" "$work/out"; then
    fail "check $*: exit 0 without 'checks passed'"
  else
    pass
  fi
}

# JSON.
cat >"$work/good.json" <<'EOF'
{"dp": 4, "tp": 2, "name": "lb-asc", "value": "2", "ok": true, "none": "", "tp.groups": 6, "ratio": 1.2346, "bound": 1.1,
 "loads": [[1, 2], [3, 4], [5, 6], [7, 8]],
 "strategies": {"sc": {"total": 6.0, "a": 1.0, "b": 2.0, "c": 3.0},
                "lb-asc": {"total": 3.0, "a": 1.0, "b": 1.5, "c": 0.5}},
 "empty": []}
EOF
expect 0 "" "$work/good.json" json /dp /dp:int /dp==4 /tp:int">=1" /name==lb-asc /name!=sc \
  /tp.groups:int">=0" /ratio">=1" /ratio"<=@/ratio" /bound"<=@/ratio" /ratio~=1.235 /ratio~=1.23 \
  /loads#==4 /loads/*#==2 /loads/*/*">0" /strategies/*/total==@/strategies/*/a+@/strategies/*/b+@/strategies/*/c \
  /strategies/sc/total">"@/strategies/lb-asc/total /strategies#==2 \
  "ratio(/strategies/sc/total,/strategies/lb-asc/total)~=2.00" \
  "sum(/strategies/sc/a,/strategies/sc/b)==3" "sum(/dp,/tp)>=6" "ratio(/dp+/tp,/tp)==3" /ok==true /ok!=false /none== /name!= '/value=="2"' '/value!="3"' 
expect 1 "cannot open" "$work/absent.json" json
: >"$work/empty.json"
expect 1 "file is empty" "$work/empty.json" json
printf '{"a": 1,' >"$work/truncated.json"
expect 1 "not valid JSON" "$work/truncated.json" json
printf '{"a": NaN}' >"$work/nan.json"
expect 1 "not valid JSON" "$work/nan.json" json
printf '{"a": null}' >"$work/null.json"
expect 1 "null (a NaN or infinity" "$work/null.json" json /a">=0"
expect 1 "/dpp' is absent" "$work/good.json" json /dpp
expect 1 "/strategies/asc' is absent" "$work/good.json" json /strategies/asc/total
expect 1 "expected >= 5" "$work/good.json" json /dp">=5"
printf '{"big": 1e400}' >"$work/big.json"
expect 1 "not valid JSON" "$work/big.json" json /big">0"
expect 1 "is not of type int" "$work/good.json" json /ratio:int
expect 1 "prints as 1.235, expected 1.234" "$work/good.json" json /ratio~=1.234
expect 1 "has 4 entries, expected == 8" "$work/good.json" json /loads#==8
expect 1 "/strategies/lb-asc/total = 3" "$work/good.json" json \
  /strategies/*/total==@/strategies/*/a+@/strategies/*/b
expect 1 "prints as 2.00, expected 2.01" "$work/good.json" json \
  "ratio(/strategies/sc/total,/strategies/lb-asc/total)~=2.01"
expect 1 "/strategies/sc/d' is absent" "$work/good.json" json "sum(/strategies/sc/a,/strategies/sc/d)>0"
expect 1 "/loads/3/1 = 8, expected < 8" "$work/good.json" json /loads/*/*"<8"
expect 1 "is empty" "$work/good.json" json /empty/*">0"
expect 1 'expected == "sc"' "$work/good.json" json /name==sc
expect 1 "/value is string, not a number" "$work/good.json" json /value==2
expect 1 '/dp = 4 is not a string' "$work/good.json" json '/dp=="4"'
expect 1 '/ok = true, expected == false' "$work/good.json" json /ok==false
expect 1 '/ok = true is not a string' "$work/good.json" json /ok==yes
expect 1 '/name = "lb-asc", expected == ""' "$work/good.json" json /name==
expect 2 "bad operator" "$work/good.json" json /dp"=>1"
expect 2 "must start with '/'" "$work/good.json" json dp
expect 2 "unknown type" "$work/good.json" json /dp:integer

# Chrome trace.
cat >"$work/trace.json" <<'EOF'
{"displayTimeUnit": "ms", "traceEvents": [
 {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "rank 0"}},
 {"ph": "X", "pid": 0, "tid": 1, "cat": "opt", "name": "step", "ts": 1.5, "dur": 2.0}]}
EOF
expect 0 "" "$work/trace.json" trace /traceEvents#==2
sed 's/"dur": 2.0/"dur": -2.0/' "$work/trace.json" >"$work/neg.json"
expect 1 "event 1 (step) has no finite dur >= 0" "$work/neg.json" trace
sed 's/"ts": 1.5, //' "$work/trace.json" >"$work/nots.json"
expect 1 "has no finite ts" "$work/nots.json" trace
printf '{"traceEvents": [{"ph": "M", "pid": 0, "tid": 0, "name": "x"}]}' >"$work/meta.json"
expect 1 "only metadata" "$work/meta.json" trace
printf '{"events": []}' >"$work/notrace.json"
expect 1 "traceEvents' is absent" "$work/notrace.json" trace

# SVG.
cat >"$work/good.svg" <<'EOF'
<?xml version="1.0"?>
<!-- a chart -->
<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50">
<rect width="100%" height="100%" fill="white"/>
<rect x='1' y='2' width='3' height='4' fill='#2a6'><title>lb-asc &amp; more: 1.0 s</title></rect>
<rect x="5" y="2" width="3" height="0" fill="#2a6"/>
<text x="1" y="9">lower bound</text>
</svg>
EOF
expect 0 "" "$work/good.svg" svg "count(rect)==3" "count(rect[fill=#2a6])==2" "text(lower bound)" \
  "text(lb-asc & more)" "rect[fill=#2a6]@height>=0" "rect[fill=#2a6]@y<=50" \
  "maxmean(rect[fill=#2a6]@height,0,2)~=2.00" "maxmean(rect@y,0,2)~=1.0"
expect 1 "cannot open" "$work/absent.svg" svg
: >"$work/empty.svg"
expect 1 "file is empty" "$work/empty.svg" svg
head -n 6 "$work/good.svg" >"$work/truncated.svg"
expect 1 "<svg> is never closed" "$work/truncated.svg" svg
sed 's/<\/svg>/<\/svg><svg\/>/' "$work/good.svg" >"$work/tworoots.svg"
expect 1 "content after the root element" "$work/tworoots.svg" svg
sed 's/<\/rect>/<\/text>/' "$work/good.svg" >"$work/mismatch.svg"
expect 1 "</text> closes <rect>" "$work/mismatch.svg" svg
sed "s/x='1'/x=1/" "$work/good.svg" >"$work/unquoted.svg"
expect 1 "is not quoted" "$work/unquoted.svg" svg
sed 's/&amp;/\&/' "$work/good.svg" >"$work/amp.svg"
expect 1 "bare '&'" "$work/amp.svg" svg
sed 's/<svg /<html /; s/<\/svg>/<\/html>/' "$work/good.svg" >"$work/html.svg"
expect 1 "root element is <html>, not <svg>" "$work/html.svg" svg
sed 's/ xmlns="[^"]*"//' "$work/good.svg" >"$work/nons.svg"
expect 1 "lacks xmlns" "$work/nons.svg" svg
sed 's/height="0"/height="nan"/' "$work/good.svg" >"$work/nanbar.svg"
expect 1 "height='nan', not a finite number" "$work/nanbar.svg" svg "rect[fill=#2a6]@height>=0"
expect 1 "3 <rect> elements, expected == 4" "$work/good.svg" svg "count(rect)==4"
expect 1 "no element's text contains 'upper bound'" "$work/good.svg" svg "text(upper bound)"
expect 1 "height=0, expected > 0" "$work/good.svg" svg "rect[fill=#2a6]@height>0"
expect 1 "no <rect[fill=#000]> element" "$work/good.svg" svg "rect[fill=#000]@height>0"
expect 1 "max/mean = 2, expected 1.90" "$work/good.svg" svg "maxmean(rect[fill=#2a6]@height,0,2)~=1.90"
expect 1 "2 <rect[fill=#2a6]> elements, expected at least 3" "$work/good.svg" svg \
  "maxmean(rect[fill=#2a6]@height,0,3)~=1"
expect 1 "no numeric height" "$work/good.svg" svg "maxmean(rect@height,0,2)~=1"
printf '{"a": 1}' >"$work/json.svg"
expect 1 "not well-formed XML" "$work/json.svg" svg

expect 2 "unknown kind" "$work/good.json" yaml

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
