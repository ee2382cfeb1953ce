#!/usr/bin/env bash
# Hostile model inputs, layouts and flags of `canzona plan` and `canzona bench-kernels`.
# Usage: hostile_plan_test.sh <canzona binary> <canzona_check_output binary>
#
# Every case runs under `timeout 20` and `ulimit -v 4000000` (4 GB) and must exit with exactly 2,
# print exactly one stderr line naming the problem (and the limit, where one applies), print
# nothing on stdout and write no output file. One class per block, each with a few
# representative inputs:
#   * layer indices that overflowed stage assignment (SIGSEGV before the fix)
#   * shapes whose element counts overflow int64 or exceed the element limits
#   * tiny HF configs asking for unbounded layers, heads, sizes or pieces (unbounded allocation)
#   * sizes that overflowed into a misleading "negative dimension" message
#   * param-list arch counts out of range
#   * bucket sizes beyond kMaxBucketSize (and beyond int64)
#   * unusable --json / --svg / --dump-params paths, refused before the model is even loaded
#   * bench-kernels: huge shapes, absurd repeats/steps/peak, unusable outputs, before any timing
# Prints "N passed, M failed" at the end.
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$2"

# Runs a command with the time and memory bound every hostile case must meet.
# Param list with one param per argument: "NAME SHAPE [EXTRA JSON FIELDS]".
param_list() {
  local file=$1
  shift
  {
    printf '{"params": ['
    local sep=""
    for p in "$@"; do
      printf '%s%s' "$sep" "$p"
      sep=", "
    done
    printf ']}\n'
  } >"$file"
}

# HF config of a small Qwen3 with the given overrides (JSON members, comma separated).
hf_config() {
  local file=$1 overrides=$2
  printf '{"model_type": "qwen3", %s}\n' "$overrides" >"$file"
}
base_keys='"intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000'

out=$work/out.json
run_plan() { run_bounded "$canzona" plan --json "$out" "$@"; }

# --- Stage assignment: a layer index near INT_MAX crashed with --pp 2.
param_list "$work/layer.json" '{"name": "a", "shape": [64, 64], "layer": 0}' \
  '{"name": "b", "shape": [64, 64], "layer": 2147483647}'
expect_usage_error "kMaxLayers" run_plan --model "$work/layer.json" --pp 2
expect_absent "$out"
param_list "$work/arch_layers.json" '{"name": "a", "shape": [64, 64], "layer": 0}'
sed -i 's/^{/{"arch": {"num_layers": 2147483647}, /' "$work/arch_layers.json"
expect_usage_error "kMaxLayers" run_plan --model "$work/arch_layers.json" --pp 2
expect_absent "$out"

# --- Element counts: int64 overflow and the element limits.
param_list "$work/overflow.json" '{"name": "a", "shape": [4294967296, 4294967296]}'
expect_usage_error "overflows a 64-bit integer" run_plan --model "$work/overflow.json"
param_list "$work/huge_dim.json" '{"name": "a.bias", "shape": [9223372036854775807]}'
expect_usage_error "kMaxDim" run_plan --model "$work/huge_dim.json"
param_list "$work/huge_param.json" '{"name": "a", "shape": [2147483648, 2147483648]}'
expect_usage_error "kMaxParamNumel" run_plan --model "$work/huge_param.json"
big='"shape": [1048576, 1048576]'
param_list "$work/huge_model.json" "{\"name\": \"a\", $big}" "{\"name\": \"b\", $big}" \
  "{\"name\": \"c\", $big}" "{\"name\": \"d\", $big}" "{\"name\": \"e\", $big}"
expect_usage_error "kMaxModelNumel" run_plan --model "$work/huge_model.json"
param_list "$work/three_d.json" '{"name": "a", "shape": [2, 2, 2], "optimizer": "matrix"}'
expect_usage_error "needs 'matrix_view'" run_plan --model "$work/three_d.json"
param_list "$work/nine_d.json" '{"name": "a", "shape": [1, 1, 1, 1, 1, 1, 1, 1, 2]}'
expect_usage_error "kMaxTensorDims" run_plan --model "$work/nine_d.json"
expect_absent "$out"

# --- Tiny HF configs asking for unbounded sizes (allocated without bound before the fix).
hf_config "$work/layers.json" "\"hidden_size\": 64, \"num_hidden_layers\": 1000000000, $base_keys"
expect_usage_error "kMaxLayers" run_plan --model "$work/layers.json"
hf_config "$work/heads.json" '"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
  "num_attention_heads": 1000000000, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 1000'
expect_usage_error "kMaxHeads" run_plan --model "$work/heads.json"
hf_config "$work/vocab.json" '"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
  "num_attention_heads": 4, "vocab_size": 1000000000000000000'
expect_usage_error "kMaxVocab" run_plan --model "$work/vocab.json"
hf_config "$work/head_dim.json" "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"head_dim\": 2147483647, $base_keys"
expect_usage_error "kMaxHeadDim" run_plan --model "$work/head_dim.json"
hf_config "$work/pieces.json" '"hidden_size": 65536, "num_hidden_layers": 4096,
  "intermediate_size": 128, "num_attention_heads": 65536, "num_key_value_heads": 65536,
  "head_dim": 1, "vocab_size": 1000'
expect_usage_error "kMaxPieces" run_plan --model "$work/pieces.json" --split-qkv head
expect_absent "$out"

# --- Sizes that wrapped around into "negative dimension" before the fix.
hf_config "$work/hidden.json" "\"hidden_size\": 4611686018427387904, \"num_hidden_layers\": 2, $base_keys"
expect_usage_error "kMaxHidden" run_plan --model "$work/hidden.json"
hf_config "$work/ffn.json" '"hidden_size": 64, "num_hidden_layers": 2,
  "intermediate_size": 4611686018427387904, "num_attention_heads": 4, "vocab_size": 1000'
expect_usage_error "kMaxFfnHidden" run_plan --model "$work/ffn.json"
expect_absent "$out"

# --- Param-list arch counts out of range (kMaxParams itself: Validate.RejectsTooManyParams).
param_list "$work/arch_heads.json" '{"name": "a", "shape": [64, 64]}'
sed -i 's/^{/{"arch": {"num_heads": 4294967296}, /' "$work/arch_heads.json"
expect_usage_error "kMaxHeads" run_plan --model "$work/arch_heads.json"
expect_absent "$out"

# --- Bucket sizes beyond kMaxBucketSize, and beyond int64 (CLI11 must not wrap them).
expect_usage_error "kMaxBucketSize" run_plan --model qwen3-tiny --bucket-size 4611686018427387904
expect_usage_error "--bucket-size" run_plan --model qwen3-tiny --bucket-size 100000000000000000000000
expect_usage_error "--bucket-size" run_plan --model qwen3-tiny --bucket-size 1e23
expect_absent "$out"

# --- Output paths are checked before anything else (here: before a model that would fail).
expect_usage_error "--json: empty output path" run_bounded "$canzona" plan --model "$work/layer.json" \
  --pp 2 --json ""
expect_usage_error "--svg $work/absent/x.svg" run_bounded "$canzona" plan --model "$work/layer.json" \
  --pp 2 --svg "$work/absent/x.svg"
mkdir "$work/dir"
expect_usage_error "--dump-params $work/dir" run_bounded "$canzona" plan --model qwen3-tiny \
  --dump-params "$work/dir"
# Flags come before the files they name: with a bad flag and a model that would fail (or take a
# read), the flag is what the one line names.
expect_usage_error "unknown strategy 'fast'" run_bounded "$canzona" plan --model "$work/layer.json" \
  --pp 2 --strategy fast
expect_usage_error "--alpha must be in [0, 1]" run_bounded "$canzona" plan --model /dev/zero \
  --alpha 2
expect_usage_error "--cost calibrated needs --calibration" run_bounded "$canzona" plan \
  --model "$work/layer.json" --pp 2 --cost calibrated
# A usage error found after loading writes neither the param dump nor the plan.
expect_usage_error "unknown strategy" run_bounded "$canzona" plan --model qwen3-tiny --strategy fast \
  --dump-params "$work/dump.json" --json "$out"
expect_absent "$work/dump.json"
expect_absent "$out"

# --- bench-kernels: every flag and output path is refused before any timing starts.
bench() { run_bounded "$canzona" bench-kernels --kernels sgemm --json "$out" "$@"; }
expect_usage_error "kMaxBenchSide" bench --shapes 100000x100000
expect_usage_error "kMaxBenchElements" bench --shapes 16384x16384
expect_usage_error "is not ROWSxCOLS" bench --shapes 99999999999999999999999x2
expect_usage_error "is not ROWSxCOLS" bench --shapes 64x64junk
expect_usage_error "kMaxBenchRepeats" bench --shapes 64x64 --repeats 2147483647
expect_usage_error "kMaxBenchNsSteps" bench --shapes 64x64 --ns-steps 1000000
expect_usage_error "kMaxBenchFrequency" bench --shapes 64x64 --frequency 2147483647
expect_usage_error "--peak" bench --shapes 64x64 --peak inf
expect_absent "$out"
expect_usage_error "--json: empty output path" run_bounded "$canzona" bench-kernels --shapes 64x64 \
  --json ""
expect_usage_error "--calibration $work/absent/c.json" run_bounded "$canzona" bench-kernels \
  --calibration "$work/absent/c.json"

cli_finish
