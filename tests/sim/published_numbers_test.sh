#!/usr/bin/env bash
# Pins the simulator's published numbers: docs/results.md's table "Simulator: the paper's 256-GPU
# experiments, projected" and, in docs/simulator.md, the tables "Figure 4: Qwen3-32B + Muon, 256
# GPUs, DP=32, TP=8", "Shampoo and SOAP: Qwen3-14B, PP=2, DP=32, TP=4" and "ZeRO-3: Qwen3-32B at
# DP=32, TP=8 and Qwen3-8B at DP=64".
# Usage: published_numbers_test.sh <canzona> <canzona_check_output> <docs/results.md> <docs/simulator.md>
#
# Runs the commands those sections give (each with --json added), checks that each exits with 0
# and that the table it prints equals its JSON, then reads every "ours" cell of the pinned rows
# from the docs' text itself and checks each number in it, to the digits printed there,
# against the JSON value it names (see `pin` below). A stale published number, a reworded row
# (which no longer matches) or a simulator change fails with the cell, the value and the command.
# shellcheck disable=SC1091,SC2125,SC2206,SC2086,SC2046,SC2154 # sourced lib, set -f there
canzona=$1
readme=$3
doc=$4
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$2"

# The commands of the sections (docs/simulator.md lists them; docs/results.md's table quotes the first two
# as its columns and the Shampoo one as its last row).
declare -A commands=(
  [default]="simulate"
  [split]="simulate --split-qkv qkv --split-fc1"
  [shampoo]="simulate --model qwen3-14b --optimizer shampoo --pp 2 --dp 32 --tp 4"
  [soap]="simulate --model qwen3-14b --optimizer soap --pp 2 --dp 32 --tp 4"
)
for run in default split shampoo soap; do
  if expect_ok "$run" "$canzona" ${commands[$run]} --json "$work/$run.json"; then
    # The printed table equals the JSON (4 decimals per phase, as printed).
    checks=()
    while read -r name it _ fb _ dp _ op _ tp _ ps _ st _; do
      [ "$name" = pipeline ] && break  # the per-stage table of a PP run follows
      case $name in sc | layerwise | layerwise-paper | asc | lb-asc | fsdp-a2a) ;; *) continue ;; esac
      s=/strategies/$name
      checks+=("$s/iteration_s~=$it" "$s/fwd_bwd_s~=$fb" "$s/dp_comm_exposed_s~=$dp"
               "$s/optimizer_s~=$op" "$s/tp_comm_s~=$tp" "$s/param_sync_s~=$ps"
               "$s/optimizer_step_s~=$st")
    done <"$work/$run.out"
    check_file "$work/$run.json" json /strategies#==6 "${checks[@]}"
  fi
done

L=/strategies/lb-asc
W=/strategies/layerwise-paper
M=/strategies/layerwise  # Megatron-LM as it ships
S=/strategies/sc
# pin FILE "ROW START" COLUMN RUN EXPR...: the table row of FILE that starts with ROW START (exactly
# one), cell COLUMN (1 = the row label), holds exactly as many numbers as EXPRs are given, and
# number i, to its printed digits, is EXPR i of the JSON of RUN.
pin() {
  local file=$1 row=$2 column=$3 run=$4
  shift 4
  local lines cell numbers checks=() i=0
  lines=$(grep -cF -- "$row" "$file")
  if [ "$lines" -ne 1 ]; then
    fail "$(basename "$file"): $lines rows start with '$row', expected 1"
    return
  fi
  cell=$(grep -F -- "$row" "$file" | awk -F'|' -v c=$((column + 1)) '{ print $c }')
  read -r -a numbers <<<"$(grep -oE '[0-9]+(\.[0-9]+)?' <<<"$cell" | tr '\n' ' ')"
  if [ "${#numbers[@]}" -ne $# ]; then
    fail "$(basename "$file"): '$row' column $column '$cell' has ${#numbers[@]} numbers, expected $#"
    return
  fi
  for expr in "$@"; do
    checks+=("$expr~=${numbers[$i]}")
    i=$((i + 1))
  done
  local message
  if message=$("$checker" "$work/$run.json" json "${checks[@]}" 2>&1 >/dev/null); then
    pass
  else
    fail "$(basename "$file"): '$row' column $column '$cell' vs \`canzona ${commands[$run]}\`: $message"
  fi
}

ratio_it="ratio($W/iteration_s,$L/iteration_s)"
ratio_step="ratio($W/optimizer_step_s,$L/optimizer_step_s)"
fb_lb="sum($L/fwd_bwd_s,$L/dp_comm_exposed_s)"
fb_lw="sum($W/fwd_bwd_s,$W/dp_comm_exposed_s)"
sc_over_lb="ratio($S/optimizer_step_s,$L/optimizer_step_s)"

# docs/results.md: | | paper | ours, default tasks | ours, --split-qkv qkv --split-fc1 |
for column in 3:default 4:split; do
  pin "$readme" "| iteration, lb-asc / layerwise-paper |" "${column%%:*}" "${column#*:}" \
    $L/iteration_s $W/iteration_s "$ratio_it"
  pin "$readme" "| optimizer step, lb-asc / layerwise-paper |" "${column%%:*}" "${column#*:}" \
    $L/optimizer_step_s $W/optimizer_step_s "$ratio_step"
done
pin "$readme" "| Shampoo, Qwen3-14B PP=2 DP=32 TP=4, sc → lb-asc |" 3 shampoo \
  $S/optimizer_step_s $L/optimizer_step_s "$sc_over_lb"

# docs/simulator.md, Figure 4: | quantity | paper | ours, default tasks | ours, split |
pin "$doc" "| iteration, lb-asc (Canzona) |" 3 default $L/iteration_s
pin "$doc" "| iteration, lb-asc (Canzona) |" 4 split $L/iteration_s
pin "$doc" "| iteration, layerwise-paper (the paper's NV-layerwise) |" 3 default $W/iteration_s
pin "$doc" "| iteration, layerwise-paper (the paper's NV-layerwise) |" 4 split $W/iteration_s
pin "$doc" "| iteration, layerwise (Megatron-LM today) |" 3 default $M/iteration_s
pin "$doc" "| iteration, layerwise (Megatron-LM today) |" 4 split $M/iteration_s
pin "$doc" "| iteration speedup |" 3 default "$ratio_it"
pin "$doc" "| iteration speedup |" 4 split "$ratio_it"
pin "$doc" "| optimizer step, lb-asc |" 3 default $L/optimizer_step_s $L/optimizer_s $L/tp_comm_s
pin "$doc" "| optimizer step, lb-asc |" 4 split $L/optimizer_step_s
pin "$doc" "| optimizer step, layerwise-paper |" 3 default $W/optimizer_step_s $W/optimizer_s \
  $W/param_sync_s $W/tp_comm_s
pin "$doc" "| optimizer step, layerwise-paper |" 4 split $W/optimizer_step_s
pin "$doc" "| optimizer step, layerwise (Megatron-LM today) |" 3 default $M/optimizer_step_s
pin "$doc" "| optimizer step, layerwise (Megatron-LM today) |" 4 split $M/optimizer_step_s
pin "$doc" "| optimizer step speedup |" 3 default "$ratio_step"
pin "$doc" "| optimizer step speedup |" 4 split "$ratio_step"
pin "$doc" "| forward-backward incl. exposed DP comm, lb-asc |" 3 default "$fb_lb" $L/fwd_bwd_s \
  $L/dp_comm_exposed_s
pin "$doc" "| forward-backward incl. exposed DP comm, lb-asc |" 4 split "$fb_lb"
pin "$doc" "| forward-backward incl. exposed DP comm, layerwise-paper |" 3 default "$fb_lw" $W/fwd_bwd_s \
  $W/dp_comm_exposed_s
pin "$doc" "| forward-backward incl. exposed DP comm, layerwise-paper |" 4 split "$fb_lw"
for column in 3:default 4:split; do
  pin "$doc" "| forward-backward ratio |" "${column%%:*}" "${column#*:}" \
    "ratio($W/fwd_bwd_s+$W/dp_comm_exposed_s,$L/fwd_bwd_s+$L/dp_comm_exposed_s)"
  pin "$doc" "| sc optimizer step |" "${column%%:*}" "${column#*:}" $S/optimizer_step_s
done

# docs/simulator.md, Shampoo and SOAP: | optimizer step | paper | ours |
pin "$doc" "| Shampoo, sc |" 3 shampoo $S/optimizer_step_s
pin "$doc" "| Shampoo, layerwise-paper |" 3 shampoo $W/optimizer_step_s
pin "$doc" "| Shampoo, layerwise (Megatron-LM today) |" 3 shampoo $M/optimizer_step_s
pin "$doc" "| Shampoo, lb-asc |" 3 shampoo $L/optimizer_step_s
pin "$doc" "| Shampoo, sc / lb-asc |" 3 shampoo "$sc_over_lb"
pin "$doc" "| SOAP, sc → lb-asc |" 3 soap $S/optimizer_step_s $L/optimizer_step_s "$sc_over_lb"

# docs/simulator.md, ZeRO-3: one column per (model, stage, strategy).
commands[z32_1]="simulate --model qwen3-32b --dp 32 --tp 8 --strategy lb-asc,fsdp-a2a --zero-stage 1"
commands[z32_3]="simulate --model qwen3-32b --dp 32 --tp 8 --strategy lb-asc,fsdp-a2a --zero-stage 3"
commands[z8_1]="simulate --model qwen3-8b --dp 64 --tp 1 --strategy lb-asc,fsdp-a2a --zero-stage 1"
commands[z8_3]="simulate --model qwen3-8b --dp 64 --tp 1 --strategy lb-asc,fsdp-a2a --zero-stage 3"
for run in z32_1 z32_3 z8_1 z8_3; do
  expect_ok "$run" "$canzona" ${commands[$run]} --json "$work/$run.json" &&
    check_file "$work/$run.json" json /strategies#==2
done
F=/strategies/fsdp-a2a
for column in "2 z32_1 $L" "3 z32_3 $L" "4 z32_3 $F" "5 z8_1 $L" "6 z8_3 $L" "7 z8_3 $F"; do
  read -r c run s <<<"$column"
  pin "$doc" "| iteration, ZeRO table |" "$c" "$run" "$s/iteration_s"
  pin "$doc" "| optimizer step, ZeRO table |" "$c" "$run" "$s/optimizer_step_s"
  pin "$doc" "| owner All-to-Alls exposed, ZeRO table |" "$c" "$run" "$s/dp_exchange_s"
  pin "$doc" "| param All-Gathers, ZeRO table |" "$c" "$run" "$s/param_gather_total_s"
  pin "$doc" "| gathers stalling compute, ZeRO table |" "$c" "$run" "$s/param_gather_exposed_s"
done

cli_finish
