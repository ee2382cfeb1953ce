#!/usr/bin/env bash
# Mixture-of-experts checkpoints: save, resume and reshard across DP, EP, TP, strategy and ZeRO
# stage. Usage: ckpt_moe_test.sh <canzona> <mpirun> <canzona_check_output>
#
# The model is tests/runtime/data/tiny-moe (2 layers of 8 experts, top-2). A checkpoint keeps the
# whole model in HF names, each expert written by the EP rank holding it, so loading it in any
# shape and saving it at once must reproduce both files byte for byte: every rank of the new shape
# read exactly the experts and optimizer state it holds there.
#   1. DP=4 x EP=2 lb-asc trains 4 steps, saving at 2 and 4 (A); its model file holds all 8
#      experts of both layers under Qwen3-MoE's names.
#   2. A/step-2 -> DP=2 x EP=1 sc -> DP=2 x TP=2 x EP=2 asc -> DP=1 layerwise, each resumed at
#      step 2 and saved at once: all copies of step 2 are byte-identical (EP 2 -> 1 -> 2 -> 1).
#   3. The last copy, resumed under DP=4 x EP=2 fsdp-a2a for steps 3..4, gives A's losses bit for
#      bit and A's step-4 files byte for byte.
#   4. ZeRO-3 (each rank reads and writes only its shard of both buffers): A/step-2 resumed under
#      --zero-stage 3 at DP=4 x EP=2 and saved at once is byte-identical.
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
set +f

model=$here/../../runtime/data/tiny-moe/config.json
run() {
  local np=$1
  shift
  timeout 120 "$mpirun_exe" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" \
    "$canzona" train --model "$model" --seq-len 32 --micro-batch 2 --warmup 1 --eval-every 0 \
    --bucket-size 100000 "$@"
}

a=$work/a
expect_ok a run 4 --dp 4 --ep 2 --steps 4 --save-every 2 --save-dir "$a" \
  --json "$work/a.json" || { cli_finish; exit; }
s2=step-00000002
# --- 1. Every expert of both layers, under Qwen3-MoE's names, in one file.
names=$(/usr/bin/python3 - "$a/$s2/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
print(sum(1 for k in header if ".mlp.experts." in k), sum(1 for k in header if k.endswith(".mlp.gate.weight")))
PY
)
if [ "$names" = "48 2" ]; then pass; else
  fail "expected 2 layers x 8 experts x 3 projections and 2 routers in the model file, got '$names'"
fi

# --- 2. EP 2 -> 1 -> 2 (with TP 2) -> 1 through three strategies, each saved at once.
prev=$a/$s2
for shape in "2 2 1 1 sc" "4 2 2 2 asc" "1 1 1 1 layerwise"; do
  read -r np dp tp ep strategy <<<"$shape"
  out=$work/dp${dp}tp${tp}ep${ep}
  if expect_ok "dp${dp}tp${tp}ep${ep}" run "$np" --dp "$dp" --tp "$tp" --ep "$ep" \
    --strategy "$strategy" --steps 2 --resume "$prev" --save-dir "$out"; then
    same_state "$a/$s2" "$out/$s2" "step 2 reloaded under DP=$dp TP=$tp EP=$ep $strategy and saved"
  fi
  prev=$out/$s2
done

# --- 3. Back to DP=4 x EP=2 under fsdp-a2a: A's steps 3..4 bit for bit.
if expect_ok back run 4 --dp 4 --ep 2 --strategy fsdp-a2a --steps 4 --resume "$prev" \
  --save-dir "$work/back" --json "$work/back.json"; then
  if diff <(train_losses "$work/a.json" 3) <(train_losses "$work/back.json" 3) >"$work/d1" &&
    [ "$(train_losses "$work/back.json" 3 | wc -l)" -eq 2 ]; then
    pass
  else
    fail "losses after three reshapes differ from the run that never stopped: $(cat "$work/d1")"
  fi
  same_state "$a/step-00000004" "$work/back/step-00000004" "step 4 after three reshapes"
fi

# --- 4. ZeRO-3.
if expect_ok z3 run 4 --dp 4 --ep 2 --zero-stage 3 --strategy lb-asc --steps 2 \
  --resume "$a/$s2" --save-dir "$work/z3"; then
  same_state "$a/$s2" "$work/z3/$s2" "step 2 reloaded under ZeRO-3 at DP=4 x EP=2 and saved"
fi
cli_finish
