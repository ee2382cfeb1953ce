#!/usr/bin/env bash
# `canzona train` checkpoints against an independent reader (hf_reference.py: standard library +
# numpy under Debian's /usr/bin/python3, derived from the Hugging Face side, not from our code).
#   a. A TP 2 run with lr 0 saves its init: every file matches trainer.json's size and SHA-256,
#      model.safetensors holds exactly the HF Qwen3 tensors of config.json's HF shapes, F32, each
#      value bit for bit the counter-based init at the Megatron element the HF element maps to,
#      optimizer.safetensors exactly the Muon / AdamW state names and shapes. Negative controls:
#      one changed value (checksums updated) and one changed byte (not) are caught.
#   b. --init-from a sharded HF directory (two files and an index; BF16, F16 and F32 tensors, the
#      embedding short of the padded vocabulary) on another grid (DP 2) loads exactly the
#      rounded values, zero padding rows. A directory lacking a tensor, or with one of another
#      shape, exits 2 naming it, printed once, nothing saved.
#   c. --precision bf16: the init saved at TP 2 is BF16 in model.safetensors, each value the init
#      rounded to nearest even, and optimizer.safetensors keeps every task's and tensor's fp32
#      main param (the bf16 init widened) beside the state; a changed main value is caught.
#      --init-from the mixed directory of b into a bf16 run keeps its BF16 tensors' bits and
#      rounds the others.
# Usage: ckpt_hf_test.sh <canzona> <mpirun> <canzona_check_output>
# shellcheck disable=SC1091,SC2154,SC2034 # sourced lib; mpirun_exe is used by ckpt_lib.sh
canzona=$1
mpirun_exe=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tools/cli_test_lib.sh"
cli_init "$3"
source "$here/ckpt_lib.sh"
python=/usr/bin/python3
ref=$here/hf_reference.py
shape=(--seq-len 32 --micro-batch 2 --warmup 1 --eval-every 0 --lr 0 --adamw-lr 0 --steps 1)

# expect_py NAME ARGS...: hf_reference.py ARGS succeeds.
expect_py() {
  local name=$1
  shift
  if "$python" "$ref" "$@" >"$work/$name.py.out" 2>&1; then
    pass
  else
    fail "$name: hf_reference.py $*: $(cat "$work/$name.py.out")"
  fi
}

# expect_py_fails NAME WORDS ARGS...: hf_reference.py ARGS fails, saying WORDS (negative control).
expect_py_fails() {
  local name=$1 words=$2
  shift 2
  if "$python" "$ref" "$@" >"$work/$name.py.out" 2>&1; then
    fail "$name: hf_reference.py $* accepted a changed checkpoint"
  elif ! grep -qF -- "$words" "$work/$name.py.out"; then
    fail "$name: hf_reference.py $* failed without '$words': $(cat "$work/$name.py.out")"
  else
    pass
  fi
}

# --- a. The init, saved at TP 2, read back independently.
S=$work/S
if expect_ok save mpi 2 "$canzona" train --model qwen3-tiny "${shape[@]}" --dp 1 --tp 2 \
  --save-dir "$S"; then
  ckpt=$S/step-00000001
  expect_py init check-init "$ckpt"
  # Negative controls: one value changed with trainer.json updated (the value check must catch
  # it), and one byte changed without (the checksum check must).
  t=model.layers.1.self_attn.v_proj.weight
  expect_py flip mutate "$ckpt" "$work/flipped" flip "$t"
  expect_py_fails flipped "tensor '$t': 1 of 8192 values differ" check-init "$work/flipped"
  cp -r "$ckpt" "$work/byte"
  "$python" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(5000); b = f.read(1); f.seek(5000); f.write(bytes([b[0] ^ 1]))' \
    "$work/byte/optimizer.safetensors"
  expect_py_fails byte "optimizer.safetensors: {'bytes'" check-init "$work/byte"

  # --- b. --init-from a sharded, mixed-precision HF directory, on DP 2.
  H=$work/H
  expect_py write_hf write-hf "$ckpt" "$H" "$work/expected.safetensors"
  S2=$work/S2
  if expect_ok init_from mpi 2 "$canzona" train --init-from "$H" "${shape[@]}" --dp 2 \
    --save-dir "$S2"; then
    if grep -q "^checkpoint loaded: $H " "$work/init_from.out"; then
      pass
    else
      fail "no 'checkpoint loaded: $H' line: $(cat "$work/init_from.out")"
    fi
    expect_py loaded check-equal "$S2/step-00000001" "$work/expected.safetensors"
    expect_py flip2 mutate "$S2/step-00000001" "$work/flipped2" flip model.norm.weight
    expect_py_fails flipped2 "tensor 'model.norm.weight': 1 of 128 values differ" \
      check-equal "$work/flipped2" "$work/expected.safetensors"
  fi

  # Negative: a HF directory missing a tensor, or holding one of another shape.
  # expect_init_error NAME MESSAGE DIR: exit 2, MESSAGE on exactly one stderr line, one
  # "canzona:" line, nothing saved.
  expect_init_error() {
    local name=$1 message=$2 dir=$3
    expect_agreed_error "$name" "$message" "$work/out_$name" \
      mpi 2 "$canzona" train --init-from "$dir" "${shape[@]}" --dp 2 --save-dir "$work/out_$name"
  }
  t=model.layers.1.mlp.up_proj.weight
  expect_py hf_drop mutate "$ckpt" "$work/hf_drop" hf-drop "$t"
  expect_init_error hf_drop "$work/hf_drop: no tensor '$t'" "$work/hf_drop"
  t=model.layers.0.self_attn.q_proj.weight
  expect_py hf_reshape mutate "$ckpt" "$work/hf_reshape" hf-reshape "$t"
  expect_init_error hf_reshape \
    "$work/hf_reshape/model.safetensors: tensor '$t' has shape [64, 256], this model needs [128, 128]" \
    "$work/hf_reshape"
fi

# --- c. bf16.
B=$work/B
if expect_ok save_bf16 mpi 2 "$canzona" train --model qwen3-tiny "${shape[@]}" --dp 1 --tp 2 \
  --precision bf16 --save-dir "$B"; then
  ckpt=$B/step-00000001
  expect_py init_bf16 check-init "$ckpt"
  expect_py flip_main mutate "$ckpt" "$work/flipped_main" flip-optimizer \
    model.layers.0.self_attn.qkv_proj.weight.main
  expect_py_fails flipped_main "tensor 'model.layers.0.self_attn.qkv_proj.weight.main': 1 of" \
    check-init "$work/flipped_main"
  if [ -d "${H:-}" ]; then
    B2=$work/B2
    if expect_ok init_from_bf16 mpi 2 "$canzona" train --init-from "$H" "${shape[@]}" --dp 2 \
      --precision bf16 --save-dir "$B2"; then
      expect_py loaded_bf16 check-equal "$B2/step-00000001" "$work/expected.safetensors"
    fi
  fi
fi

cli_finish
