#!/usr/bin/env bash
# `canzona ckpt inspect` on a checkpoint written by safetensors_ref.py (numpy + hashlib, not our
# code): the report lists every tensor with dtype, shape and bytes and the totals add up; each
# corruption (checksum mismatch, truncated safetensors, missing file, garbled or incomplete
# trainer.json, plan.json disagreeing, bad DIR) exits 2 with one stderr line naming the file.
# Usage: cli_ckpt_test.sh <canzona> <safetensors_ref.py> <canzona_check_output>
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
ref=$2
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$3"
python=/usr/bin/python3

good=$work/good
"$python" "$ref" checkpoint "$good" || fail "safetensors_ref.py checkpoint failed"

# A fresh copy of the good checkpoint, changed by the rest of the arguments (a shell snippet run
# inside it), with trainer.json's record of FILE refreshed when REHASH=FILE is set.
variant() {
  local name=$1 snippet=$2
  rm -rf "${work:?}/$name"
  cp -r "$good" "$work/$name"
  (cd "$work/$name" && eval "$snippet")
  if [ -n "${REHASH:-}" ]; then
    "$python" - "$work/$name" "$REHASH" <<'PY'
import hashlib, json, os, sys
d, f = sys.argv[1], sys.argv[2]
t = json.load(open(os.path.join(d, "trainer.json")))
blob = open(os.path.join(d, f), "rb").read()
t["files"][f] = {"bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
json.dump(t, open(os.path.join(d, "trainer.json"), "w"))
PY
  fi
  echo "$work/$name"
}

# --- Happy path.
if expect_ok good "$canzona" ckpt inspect "$good" --json "$work/report.json"; then
  out=$work/good.out
  grep -q "step        120" "$out" && pass || fail "no step line: $(cat "$out")"
  grep -q "strategy    lb-asc" "$out" && pass || fail "no strategy line"
  grep -q "optimizer   muon" "$out" && pass || fail "no optimizer line"
  grep -q "dp x tp     2 x 2" "$out" && pass || fail "no dp x tp line"
  grep -q "plan hash   1234abcd5678ef90" "$out" && pass || fail "no plan hash line"
  grep -q "DP FLOPs 1.062  DP memory 1.250  TP FLOPs 1.000  TP memory 1.500" "$out" && pass ||
    fail "no balance line"
  for f in model.safetensors optimizer.safetensors config.json plan.json; do
    bytes=$(stat -c %s "$good/$f")
    [ "$(table_cell "$out" "$f" 2)" = "$bytes" ] && [ "$(table_cell "$out" "$f" 3)" = ok ] && pass ||
      fail "$f: row '$(grep "^$f" "$out")', expected $bytes bytes and ok"
  done
  # Every tensor with dtype, shape and bytes (4 per element).
  while read -r name shape bytes; do
    line=$(grep -E "^  $name +F32 " "$out")
    [ -n "$line" ] && [ "$(echo "$line" | awk '{print $NF}')" = "$bytes" ] &&
      echo "$line" | grep -qF "${shape//_/ }" && pass || fail "tensor $name: '$line', expected $shape $bytes"
  done <<'EOF2'
model.embed_tokens.weight [16,_8] 512
model.layers.0.mlp.down_proj.weight [8,_12] 384
model.norm.weight [8] 32
model.embed_tokens.weight.exp_avg [16,_8] 512
model.embed_tokens.weight.exp_avg_sq [16,_8] 512
model.layers.0.mlp.down_proj.weight.momentum [8,_12] 384
model.norm.weight.exp_avg [8] 32
model.norm.weight.exp_avg_sq [8] 32
EOF2
  grep -q "total: 3 tensors, 232 elements, 928 bytes" "$out" && pass || fail "model total"
  grep -q "total: 5 tensors, 368 elements, 1472 bytes" "$out" && pass || fail "optimizer total"
  grep -q "^total: 8 tensors, 600 elements, 2400 bytes of tensor data" "$out" && pass ||
    fail "grand total: $(tail -1 "$out")"
  [ ! -s "$work/good.err" ] && pass || fail "stderr not empty: $(cat "$work/good.err")"
  check_file "$work/report.json" json /step==120 /dp==2 /tp==2 /total/tensors==8 \
    /total/bytes==2400 "/safetensors/model.safetensors/tensor_count==3" \
    "/safetensors/*/bytes:int>0" "/files#==4" "/files/*/sha256_ok==true" \
    "/total/bytes==@/safetensors/model.safetensors/bytes+@/safetensors/optimizer.safetensors/bytes"
fi

# --- Corruptions: exit 2, one line, naming the file.
d=$(variant flipped 'printf "\x01" | dd of=model.safetensors bs=1 seek=300 conv=notrunc status=none')
expect_usage_error "$d/model.safetensors: checksum mismatch: trainer.json says" \
  "$canzona" ckpt inspect "$d"
d=$(variant truncated 'truncate -s -7 optimizer.safetensors')
expect_usage_error "$d/optimizer.safetensors: size mismatch" "$canzona" ckpt inspect "$d"
# Truncated but recorded as is: the safetensors validation catches it.
d=$(REHASH=optimizer.safetensors variant truncated2 'truncate -s -7 optimizer.safetensors')
expect_usage_error "$d/optimizer.safetensors: truncated: data section needs" \
  "$canzona" ckpt inspect "$d"
d=$(REHASH=model.safetensors variant garbled_header \
  'printf "[" | dd of=model.safetensors bs=1 seek=8 conv=notrunc status=none')
expect_usage_error "$d/model.safetensors: garbled header: not JSON" "$canzona" ckpt inspect "$d"
d=$(variant missing 'rm config.json')
expect_usage_error "$d/config.json: cannot read file" "$canzona" ckpt inspect "$d"
d=$(variant no_trainer 'rm trainer.json')
expect_usage_error "$d/trainer.json: cannot read file" "$canzona" ckpt inspect "$d"
d=$(variant garbled_trainer 'printf "{\"format\": " > trainer.json')
expect_usage_error "$d/trainer.json: malformed JSON" "$canzona" ckpt inspect "$d"
for key in step strategy optimizer dp plan_hash files; do
  d=$(variant "no_$key" "$python -c 'import json; t = json.load(open(\"trainer.json\")); del t[\"$key\"]; json.dump(t, open(\"trainer.json\", \"w\"))'")
  expect_usage_error "$d/trainer.json: missing key '$key'" "$canzona" ckpt inspect "$d"
done
d=$(variant no_sha "$python -c 'import json; t = json.load(open(\"trainer.json\")); del t[\"files\"][\"plan.json\"][\"sha256\"]; json.dump(t, open(\"trainer.json\", \"w\"))'")
expect_usage_error "$d/trainer.json: missing key 'files.plan.json.sha256'" "$canzona" ckpt inspect "$d"
d=$(variant wrong_format "sed -i 's/canzona-checkpoint/other/' trainer.json")
expect_usage_error "$d/trainer.json: key 'format' is \"other\"" "$canzona" ckpt inspect "$d"
d=$(variant wrong_version "sed -i 's/\"version\": 1/\"version\": 7/' trainer.json")
expect_usage_error "$d/trainer.json: key 'version' is 7" "$canzona" ckpt inspect "$d"
d=$(variant bad_dp "sed -i 's/\"dp\": 2/\"dp\": \"two\"/' trainer.json")
expect_usage_error "$d/trainer.json: key 'dp' is \"two\"" "$canzona" ckpt inspect "$d"
d=$(REHASH=plan.json variant plan_disagrees "sed -i 's/\"dp\": 2/\"dp\": 4/' plan.json")
expect_usage_error "$d/plan.json: key 'dp' is 4, trainer.json says 2" "$canzona" ckpt inspect "$d"
expect_usage_error "$work/nowhere: no such directory" "$canzona" ckpt inspect "$work/nowhere"
expect_usage_error "$good/config.json: not a directory" "$canzona" ckpt inspect "$good/config.json"
cli_finish
