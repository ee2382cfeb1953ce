#!/usr/bin/env bash
# End-to-end checks of `canzona plan`.
# Usage: cli_plan_test.sh <canzona binary> <data dir> <canzona_check_output binary>
#
# * Every bad input exits with exactly 2, prints exactly one line on stderr containing the
#   expected words and nothing on stdout, and writes no --json file.
# * Every success exits with exactly 0, and every file it writes is read back with
#   canzona_check_output (tests/tools): the plan JSON has every documented key, ratios >= 1, lower
#   bounds <= ratios, counts integral and >= 0, loads[dp][tp] per stage, cuts dp+1 monotone offsets
#   ending at the bucket size, owners and hosts in range for the strategy; the SVG is well-formed
#   with one before and one after bar per grid rank in each of its two panels, whose heights show
#   the grid balance the table printed (max/mean of the bars = the ratio); the param dump
#   lists the model's params.
# * The JSON equals the table the same run printed (each ratio to its printed digits).
# * A dumped param list plans identically, and the same command twice writes the same plan.
# Prints "N passed, M failed" at the end.
# shellcheck disable=SC1091,SC2125,SC2206,SC2086,SC2046,SC2154 # sourced lib, set -f there
canzona=$1
data=$2
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$3"

expect_usage_error "unknown model 'qwen9-1t'" "$canzona" plan --model qwen9-1t
expect_usage_error "not an existing file" "$canzona" plan --model "$work/absent.json"
expect_usage_error "malformed JSON" "$canzona" plan --model "$data/malformed.json"
expect_usage_error "hidden_size" "$canzona" plan --model "$data/missing_hidden_config.json"
expect_usage_error "zero" "$canzona" plan --model "$data/zero_size_params.json"
expect_usage_error "--dp must be positive" "$canzona" plan --model qwen3-tiny --dp 0
expect_usage_error "--tp must be positive" "$canzona" plan --model qwen3-tiny --tp 0
expect_usage_error "--pp must be positive" "$canzona" plan --model qwen3-tiny --pp -1
expect_usage_error "--alpha must be in [0, 1]" "$canzona" plan --model qwen3-tiny --alpha 1.5
expect_usage_error "--cmax-mb must be positive" "$canzona" plan --model qwen3-tiny --cmax-mb 0
expect_usage_error "--cmax-mb must be between" "$canzona" plan --model qwen3-tiny --tp 2 --cmax-mb 1e-9
expect_usage_error "--cmax-mb must be between" "$canzona" plan --model qwen3-tiny --tp 2 --cmax-mb 1e30
expect_usage_error "--bucket-size must be >= 0" "$canzona" plan --model qwen3-tiny --bucket-size -5
expect_usage_error "kMaxRanks" "$canzona" plan --model qwen3-tiny --dp 2000000
expect_usage_error "tp" "$canzona" plan --model qwen3-tiny --tp 3
expect_usage_error "unknown --layerwise-buckets 'soft'" "$canzona" plan --model qwen3-tiny --layerwise-buckets soft
expect_usage_error "--pp 3 does not divide the 2 transformer layers of model 'qwen3-tiny'" "$canzona" plan --model qwen3-tiny --pp 3
expect_usage_error "unknown strategy" "$canzona" plan --model qwen3-tiny --strategy fast
expect_usage_error "unknown optimizer" "$canzona" plan --model qwen3-tiny --optimizer lion
expect_usage_error "--calibration" "$canzona" plan --model qwen3-tiny --cost calibrated
expect_usage_error "no fit for optimizer 'soap'" "$canzona" plan --model qwen3-tiny --optimizer soap \
  --cost calibrated --calibration "$data/calibration.json"
expect_usage_error "--split-qkv" "$canzona" plan --model qwen3-tiny --split-qkv rows
expect_usage_error "--bogus" "$canzona" plan --model qwen3-tiny --bogus
expect_usage_error "--model" "$canzona" plan
expect_usage_error "A subcommand is required" "$canzona"
# A usage error found after the model is loaded still writes no JSON and no SVG.
expect_usage_error "unknown strategy" "$canzona" plan --model qwen3-tiny --strategy fast \
  --json "$work/bad.json" --svg "$work/bad.svg"
expect_absent "$work/bad.json"
expect_absent "$work/bad.svg"
expect_ok help "$canzona" plan --help

# The last column of the balance table (the run the JSON describes) for one row label.
table_last() {
  awk -v label="$2" '{ name = substr($0, 1, 28); sub(/ +$/, "", name);
                       if (name == label) { print $NF; exit } }' "$1"
}

# Column N (1 = asc) of the balance table for one row label whose values are single words.
table_nth() {
  awk -v label="$2" -v n="$3" '{ name = substr($0, 1, 28); sub(/ +$/, "", name);
                       if (name == label) { split(substr($0, 29), f, " "); print f[n]; exit } }' "$1"
}

# plan_json_checks FILE DP TP PP STRATEGY [BALANCE_KEYS]: the checks every plan JSON passes, plus
# what the strategy implies about owners, hosts, cuts and micro groups. BALANCE_KEYS: 4, or 6 for a
# mixture of experts (balance.expert and balance.whole_grid beside them).
plan_json_checks() {
  local file=$1 dp=$2 tp=$3 pp=$4 strategy=$5 balance_keys=${6:-4}
  local b=/stages/*/buckets/* t=/stages/*/tasks/* g=/stages/*/micro_groups/*
  local checks=(
    /model:string /plan_ms">=0" /strategy=="$strategy" /planner:string /optimizer:string
    /cost:string /dp:int=="$dp" /tp:int=="$tp" /pp:int=="$pp" /alpha">=0" /alpha"<=1" /cmax_mb">0"
    /balance#=="$balance_keys" /balance/dp/memory /balance/dp/flops /balance/tp/memory
    /balance/tp/flops /balance/tp_worst_group/memory /balance/tp_worst_group/flops
    /balance/grid/memory /balance/grid/flops /balance/dp/*">=1" /balance/tp/*">=1"
    /balance/tp_worst_group/*">=1" /balance/grid/*">=1"
    /lower_bound#==3 /lower_bound/dp/memory /lower_bound/dp/flops /lower_bound/grid/memory
    /lower_bound/tp/memory /lower_bound/tp/flops /gap_to_bound#==3 /gap_to_bound/*/*">=1"
    /padding_elements:int">=0" /buffer_elements:int">0" /padding_elements"<=@/buffer_elements"
    /lower_bound/grid/flops /lower_bound/*/*">=1" /lower_bound/*/*"<=@/balance/*/*"
    /tp.groups:int">=0" /tp_group_makespan_sum">=0" /split_tensors:int">=0"
    /divided_params:int">=0" /idle_ranks:int">=0" /idle_ranks"<=$((dp * tp * pp))"
    /bucket_shard_ratio:array /plan_hash:int">=0"
    /stages#=="$pp" /stages/*/stage:int">=0" /stages/*/stage"<$pp"
    /stages/*/loads#=="$dp" /stages/*/loads/*#=="$tp" /stages/*/loads/*/*/flops">=0"
    /stages/*/loads/*/*/memory">=0"
    /stages/*/buckets#">=1" $b/offset:int">=0" $b/numel:int">0" $b/cuts:array $b/params#">=1"
    $b/params/*/name:string $b/params/*/offset:int">=0" $b/params/*/numel:int">0"
    $b/params/*/owner
    /stages/*/tasks#">=1" $t/name:string $t/shape#==2 $t/shape/*:int">0" $t/dp_owner:int
    $t/host:int">=-1" $t/host"<$tp" $t/group:int">=-1" $t/cost">0"
    /stages/*/micro_groups:array /buckets/0/numel==@/stages/0/buckets/0/numel
    /micro_groups#">=0"
  )
  case $strategy in
    sc)
      checks+=($t/dp_owner==-3 $t/host==-1 $b/cuts#==0 $b/params/*/owner==all /tp.groups==0
               /stages/*/micro_groups#==0 /bucket_shard_ratio#==0) ;;
    layerwise-paper)
      checks+=($t/dp_owner">=0" $t/dp_owner"<$dp" $t/host==-1 $b/cuts#==0 /tp.groups==0
               /bucket_shard_ratio#==0) ;;
    layerwise)  # padded equal shards: every shard of every bucket the same size
      checks+=($t/dp_owner">=0" $t/dp_owner"<$dp" $t/host==-1 $b/cuts#==$((dp + 1)) $b/cuts/0==0
               "$b/cuts/$dp==@$b/numel" /tp.groups==0 /bucket_shard_ratio/*==1
               /padding_elements">0" /padding_elements"<@/buffer_elements") ;;
    asc | lb-asc)
      checks+=($t/dp_owner">=0" $t/dp_owner"<$dp" $b/cuts#==$((dp + 1)) $b/cuts/0==0
               "$b/cuts/$dp==@$b/numel" /bucket_shard_ratio#">=1" /bucket_shard_ratio/*">=1")
      for ((r = 1; r <= dp; r++)); do checks+=($b/cuts/$r">=@$b/cuts/$((r - 1))"); done
      if [ "$tp" -gt 1 ]; then
        checks+=(/tp.groups">=1" $t/host">=0" $t/group">=0" $g/dp:int">=0" $g/dp"<$dp"
                 $g/index:int">=0" $g/makespan">0" $g/max_host_bytes:int">0" $g/tasks#">=1"
                 $g/tasks/*/name:string $g/tasks/*/host:int">=0" $g/tasks/*/host"<$tp")
      fi ;;
  esac
  check_file "$file" json "${checks[@]}"
}

# table_matches_json OUT JSON: every ratio the table printed for the JSON's run, to its digits.
table_matches_json() {
  local out=$1 json=$2 checks=() row key
  for row in "DP memory:/balance/dp/memory" "DP FLOPs:/balance/dp/flops" \
             "TP memory:/balance/tp/memory" "TP FLOPs:/balance/tp/flops" \
             "grid memory:/balance/grid/memory" "grid FLOPs:/balance/grid/flops"; do
    key=$(table_last "$out" "${row%%:*}")
    if [ -z "$key" ]; then fail "$out has no row '${row%%:*}'"; return; fi
    checks+=("${row#*:}~=$key")
  done
  for row in "  DP lower bound mem/FLOPs:/lower_bound/dp" \
             "  TP lower bound mem/FLOPs:/lower_bound/tp" \
             "  grid lower bound mem/FLOPs:/lower_bound/grid" \
             "  worst TP group mem/FLOPs:/balance/tp_worst_group"; do
    key=$(table_last "$out" "${row%%:*}")
    checks+=("${row#*:}/memory~=${key%/*}" "${row#*:}/flops~=${key#*/}")
  done
  checks+=("/tp.groups==$(table_last "$out" "TP micro groups")"
           "/idle_ranks==$(table_last "$out" "idle ranks")"
           "/divided_params==$(table_last "$out" "divided element-wise")"
           "/split_tensors==$(sed -n 's/.*equal chunks would split \([0-9]*\) tensors.*/\1/p' "$out")")
  check_file "$json" json "${checks[@]}"
}

# The calibrated cost model plans with a bench-kernels calibration file.
if expect_ok calibrated "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --cost calibrated \
     --calibration "$data/calibration.json" --json "$work/calibrated.json"; then
  if grep -q "cost calibrated" "$work/calibrated.out"; then pass; else fail "calibrated: no 'cost calibrated'"; fi
  plan_json_checks "$work/calibrated.json" 4 2 1 lb-asc
  check_file "$work/calibrated.json" json /cost==calibrated
  table_matches_json "$work/calibrated.out" "$work/calibrated.json"
fi

# More ranks than tasks is legal: the plan says so, exits 0, and the JSON counts the idle ranks.
if expect_ok idle "$canzona" plan --model qwen3-tiny --dp 64 --planner paper --json "$work/idle.json"; then
  if grep -q "own no optimizer work" "$work/idle.out"; then pass; else fail "idle ranks not reported"; fi
  plan_json_checks "$work/idle.json" 64 1 1 lb-asc
  check_file "$work/idle.json" json /idle_ranks">0" /planner==paper
  table_matches_json "$work/idle.out" "$work/idle.json"
fi

# JSON, SVG chart and param dump of the main example; the dump plans identically.
if expect_ok main "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/plan.json" \
     --svg "$work/plan.svg" --dump-params "$work/params.json"; then
  plan_json_checks "$work/plan.json" 4 2 1 lb-asc
  check_file "$work/plan.json" json /model==qwen3-mini /planner==canzona /optimizer==muon \
    /cost==flops /alpha==1 /cmax_mb==512 /stages/0/stage==0
  table_matches_json "$work/main.out" "$work/plan.json"
  # 2 panels x 8 grid ranks x (the strongest peer, ours); bars inside the canvas, every bar of
  # ours visible (no rank is idle in this plan: idle_ranks == 0 above); in each panel (FLOPs first,
  # then memory) the bars' max/mean height is the grid balance the table printed, in the column of
  # the peer the title names for the grey bars (peer_rule_test.cpp checks the pick by hand), and
  # the legend writes each series' max/mean as the table does; axes in units.
  check_file "$work/plan.json" json /idle_ranks==0
  # Every row of the balance table is as long as its header: the labels, "lb-asc (megatron-canzona)"
  # the longest, keep their columns.
  if awk '/^max\/mean/ { n = length($0); on = 1 } on && length($0) != n { bad = 1 }
          /^plan time/ { on = 0 } END { exit bad }' "$work/main.out"; then
    pass
  else
    fail "the balance table's rows and header differ in width: $(head -5 "$work/main.out")"
  fi
  peer=$(sed -n 's/.*: lb-asc (canzona) beside \(.*\), the strongest peer<.*/\1/p' "$work/plan.svg")
  case "$peer" in
    layerwise) column=2 ;;
    "lb-asc (paper)") column=3 ;;
    "lb-asc (megatron-canzona)") column=4 ;;
    *) column=0; fail "the plan SVG names no strongest peer in its title: '$peer'" ;;
  esac
  check_file "$work/plan.svg" svg "count(rect[class=bar-peer])==16" "count(rect[class=bar-ours])==16" \
    "rect[class=bar-ours]@height>0" "rect[class=bar-peer]@height>=0" "rect[class=bar-ours]@y>=0" \
    "rect[class=bar-ours]@x<=1100" "text(optimizer FLOPs per step per rank)" \
    "text(optimizer-state memory per rank)" "text(lower bound on the busiest rank)" \
    "text(DP rank (each group: TP ranks 0-1 left to right))" "count(text[class=tick-x])==8" \
    "text(lb-asc (canzona): max )" "text(max/mean )" \
    "maxmean(rect[class=bar-ours]@height,0,8)~=$(table_last "$work/main.out" "grid FLOPs")" \
    "maxmean(rect[class=bar-ours]@height,8,8)~=$(table_last "$work/main.out" "grid memory")" \
    "maxmean(rect[class=bar-peer]@height,0,8)~=$(table_nth "$work/main.out" "grid FLOPs" $column)" \
    "maxmean(rect[class=bar-peer]@height,8,8)~=$(table_nth "$work/main.out" "grid memory" $column)"
  params=$(sed -n 's/^model qwen3-mini (\([0-9]*\) params.*/\1/p' "$work/main.out")
  check_file "$work/params.json" json /params#=="${params:-missing}" /params/*/name:string \
    /params/*/shape#">=1" /params/*/shape/*:int">0" /params/*/tp_split_dim:int">=-1" \
    /params/*/tp_split_dim"<=1" /params/*/optimizer:string
  if expect_ok again "$canzona" plan --model "$work/params.json" --dp 4 --tp 2 --json "$work/again.json"; then
    plan_json_checks "$work/again.json" 4 2 1 lb-asc
    if [ "$(grep '"plan_hash"' "$work/plan.json")" = "$(grep '"plan_hash"' "$work/again.json")" ]; then
      pass
    else
      fail "a dumped param list plans differently from its preset"
    fi
  fi
fi

# Every strategy writes a JSON whose owners, hosts and cuts are those of the strategy.
for strategy in sc layerwise layerwise-paper asc; do
  if expect_ok "$strategy" "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --strategy "$strategy" \
       --json "$work/$strategy.json"; then
    plan_json_checks "$work/$strategy.json" 4 2 1 "$strategy"
    table_matches_json "$work/$strategy.out" "$work/$strategy.json"
  fi
done

# A grid where the DP and the grid lower bounds differ (1.20/1.86 vs 2.40/3.71 when written), so
# the table cross-check tells them apart.
if expect_ok bounds "$canzona" plan --model qwen3-mini --dp 16 --tp 2 --json "$work/bounds.json"; then
  plan_json_checks "$work/bounds.json" 16 2 1 lb-asc
  table_matches_json "$work/bounds.out" "$work/bounds.json"
fi

# Pipeline stages: one entry per stage, each with its own loads[dp][tp].
if expect_ok pp "$canzona" plan --model qwen3-mini --dp 2 --tp 2 --pp 2 --json "$work/pp.json"; then
  plan_json_checks "$work/pp.json" 2 2 2 lb-asc
  check_file "$work/pp.json" json /stages/0/stage==0 /stages/1/stage==1
fi

# The same command twice writes identical plans (deterministic to the byte, timing aside).
if expect_ok a "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/a.json" &&
   expect_ok b "$canzona" plan --model qwen3-mini --dp 4 --tp 2 --json "$work/b.json"; then
  if diff <(grep -v plan_ms "$work/a.json") <(grep -v plan_ms "$work/b.json") >/dev/null; then pass
  else fail "two runs wrote different plans"; fi
fi

# Mixture of experts: bad expert groups are one-line errors; a plan has the expert buffer's keys
# beside today's (one EP rank's 4 of 8 experts x 4 layers x fc1, fc2 over expert DP 2 x 2 / 2).
expect_usage_error "--ep 3 x --etp 1 = 3 does not divide --dp 2 x --tp 2 = 4 ranks" "$canzona" plan \
  --model qwen3-moe-cpu --dp 2 --tp 2 --ep 3
expect_usage_error "need a mixture-of-experts model" "$canzona" plan --model qwen3-tiny --dp 2 --ep 2
if expect_ok moe "$canzona" plan --model qwen3-moe-cpu --dp 2 --tp 2 --ep 2 --json "$work/moe.json"; then
  plan_json_checks "$work/moe.json" 2 2 1 lb-asc 6
  check_file "$work/moe.json" json /ep==2 /etp==1 /expert/edp==2 /expert/params==32 \
    /balance/expert/dp/flops">=1" /balance/expert/tp/memory">=1" /balance/expert/grid/flops">=1" \
    /balance/whole_grid/flops">=1" /expert/stages/0/loads#==2 /expert/stages/0/tasks#==32
  if grep -q "^expert DP FLOPs" "$work/moe.out"; then pass; else fail "moe: no expert rows"; fi
fi

# --precision: the memory model counts each buffer at its dtype (docs/precision.md). Under ZeRO-3
# a rank keeps params, gradients, main params and state: bf16 holds 2 + 2 of fp32's 4 + 4 bytes
# per element, so the busiest rank's GiB drop; the header and the JSON say the dtypes, and a
# re-plan reads them back. A bad name is one line.
expect_usage_error "--precision must be fp32 or bf16 (got 'fp8')" "$canzona" plan --model qwen3-tiny --precision fp8
for pr in fp32 bf16; do
  expect_ok "precision_$pr" "$canzona" plan --model qwen3-0.6b --dp 4 --tp 2 --zero-stage 3 \
    --precision "$pr" --json "$work/precision_$pr.json"
done
check_file "$work/precision_bf16.json" json /precision==bf16 /grad_reduce_in_fp32==false
check_file "$work/precision_fp32.json" json /precision==fp32
if grep -q "bf16 params and grads (memory at those dtypes)" "$work/precision_bf16.out"; then pass; else
  fail "plan --precision bf16: the header does not say the dtypes"; fi
gib_fp32=$(table_last "$work/precision_fp32.out" "max rank GFLOP / GiB")
gib_bf16=$(table_last "$work/precision_bf16.out" "max rank GFLOP / GiB")
if awk -v a="$gib_fp32" -v b="$gib_bf16" 'BEGIN { exit !(b > 0 && b < 0.9 * a) }'; then pass; else
  fail "ZeRO-3 busiest rank: bf16 $gib_bf16 GiB is not below 0.9 x fp32's $gib_fp32 GiB"; fi
# A re-plan re-makes the old plan at its recorded stage and dtypes (a ZeRO-3 bf16 plan re-made as
# ZeRO-1 fp32 would not give its plan_hash), records them in replan.from, and a re-plan of that
# re-plan re-makes both levels.
expect_ok precision_replan "$canzona" plan --model qwen3-0.6b --dp 2 --tp 2 --zero-stage 3 \
  --precision bf16 --from-plan "$work/precision_bf16.json" --json "$work/precision_replan.json"
check_file "$work/precision_replan.json" json /precision==bf16 /replan/from/precision==bf16 \
  /replan/from/zero_stage==3
expect_ok precision_replan2 "$canzona" plan --model qwen3-0.6b --dp 4 --tp 2 --zero-stage 3 \
  --precision bf16 --from-plan "$work/precision_replan.json" --json "$work/precision_replan2.json"

cli_finish
