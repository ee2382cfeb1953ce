#!/usr/bin/env bash
# `canzona plan` on hostile plan options and on models with very many TP pieces.
# Usage: cli_plan_limits_test.sh <canzona binary> <canzona_check_output binary>
#
# Every case runs under `timeout 20` (60 in a sanitizer build) and 4 GB (run_bounded). Classes:
#   * plan options not finite or out of range (--alpha, --cmax-mb, the DP x TP x PP grid): exit 2,
#     one stderr line naming the flag (and the limit), nothing on stdout, no --json written
#   * plan size: (dp + 1) x buckets over kMaxCutPoints is a usage error naming the limit; the
#     largest grid (dp 2^20) with one bucket, and sc at dp 2^20, plan within the bound
#   * planning time: a 16,384-head model split per head (98,000 TP tasks) with a C_max large
#     enough for one micro group plans with both planners within the bound (the paper planner
#     re-solved the whole candidate group for each added task: over a minute); only the bound is
#     checked, not a time
# Prints "N passed, M failed" at the end.
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$2"

out=$work/out.json
run_plan() { run_bounded "$canzona" plan --json "$out" "$@"; }

# A param list of replicated matrices (no TP divisibility rules), so grid sizes reach the planner.
printf '{"params": [{"name": "a", "shape": [64, 64]}, {"name": "b", "shape": [64]}]}\n' \
  >"$work/small.json"

# --- Options not finite or out of range.
expect_usage_error "--alpha" run_plan --model qwen3-tiny --alpha nan
expect_absent "$out"
expect_usage_error "--alpha" run_plan --model qwen3-tiny --alpha inf
expect_usage_error "--cmax-mb" run_plan --model qwen3-tiny --tp 2 --cmax-mb nan
expect_usage_error "kMaxCmaxMb" run_plan --model qwen3-tiny --tp 2 --cmax-mb 1e300
expect_absent "$out"
expect_usage_error "--cmax-mb" run_plan --model qwen3-tiny --tp 2 --cmax-mb -inf

# --- Grid sizes: each factor and the product run_bounded by kMaxRanks (no int overflow).
expect_usage_error "kMaxRanks" run_plan --model "$work/small.json" --dp 2048 --tp 1024 --pp 2
expect_absent "$out"
expect_usage_error "kMaxRanks" run_plan --model "$work/small.json" --dp 2147483647 --tp 2147483647

# --- Plan size: asc / lb-asc keep dp + 1 cut points per bucket, bounded by kMaxCutPoints (2^24):
# 113 buckets x 2^20 + 1 ranks is refused at once instead of allocating gigabytes.
expect_usage_error "kMaxCutPoints" run_plan --model qwen3-0.6b --dp 1048576 --bucket-size 1048576
expect_absent "$out"
expect_usage_error "--bucket-size" run_plan --model qwen3-0.6b --strategy asc --dp 262144 \
  --bucket-size 1048576
# ... while the largest grid with one bucket, and sc at the largest DP, plan within the bounds
# (work linear in dp: no per-rank formatting, allocation or per-param x rank loops). The JSON of
# such a plan lists every rank's load (millions of values), so it is read back at DP 2^16.
# The time bound is the Release build's: under ASan + UBSan (CANZONA_SANITIZE) planning runs about
# 5x slower, so the sanitized suite plans a quarter of the ranks.
dp_max=1048576
[ -n "${CANZONA_SANITIZE:-}" ] && dp_max=262144
expect_ok "dp_max_one_bucket" run_bounded "$canzona" plan --model qwen3-0.6b --dp "$dp_max" \
  --bucket-size 1000000000
expect_ok "sc_dp_max" run_bounded "$canzona" plan --model qwen3-0.6b --strategy sc --dp "$dp_max"
if expect_ok "dp_65536_json" run_plan --model qwen3-0.6b --dp 65536 --bucket-size 1000000000; then
  check_file "$out" json "/dp==65536"
fi

# --- Planning time near-linear in TP pieces: 16,384 heads and KV heads split per head, one group.
printf '%s\n' '{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 2,
  "num_attention_heads": 16384, "num_key_value_heads": 16384, "head_dim": 128,
  "vocab_size": 32000, "tie_word_embeddings": false}' >"$work/heads.json"
for planner in paper canzona; do
  if expect_ok "heads_$planner" run_bounded "$canzona" plan --model "$work/heads.json" --dp 8 --tp 8 \
    --split-qkv head --cmax-mb 1000000 --planner "$planner" --json "$work/heads_$planner.json"; then
    check_file "$work/heads_$planner.json" json "/planner==$planner"
  fi
done

cli_finish
