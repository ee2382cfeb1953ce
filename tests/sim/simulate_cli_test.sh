#!/usr/bin/env bash
# End-to-end checks of `canzona simulate`, one ctest per CASE.
# Usage: simulate_cli_test.sh CASE <canzona> <canzona_check_output> <tests/sim/data dir>
#
#   smoke         one run of the four strategies with --json and --svg: exit 0; the JSON has the
#                 scenario, the resolved cluster and every documented per-strategy key; times
#                 finite and >= 0 (> 0 where work is done), iteration_s and optimizer_step_s the sums
#                 of their phases, hidden <= total DP comm, busiest rank >= mean, balance >= 1,
#                 micro_batches = ceil(tokens / (dp * seq_len)); the table printed by the same run
#                 equals the JSON to its printed digits; the SVG is well-formed with one stacked
#                 bar per strategy
#   sweep         a TP sweep at a fixed GPU count: the same per point, dp derived from --gpus
#   dump_cluster  --dump-cluster writes the preset's values, and the file reads back as the same
#                 cluster (same table)
#   usage_errors  bad input exits with exactly 2, one line on stderr naming the problem, nothing
#                 on stdout, and no --json/--svg file; --help exits with 0
# shellcheck disable=SC1091,SC2125,SC2206,SC2086,SC2046,SC2154 # sourced lib, set -f there
case_name=$1
canzona=$2
data=$4
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$3"

# strategy_checks PREFIX PP: the checks of every strategy object under PREFIX (may hold a "*").
strategy_checks() {
  local s=$1/* pp=$2
  echo "$s/strategy:string $s/iteration_s>0 $s/fwd_bwd_s>0 $s/dp_comm_exposed_s>=0"
  echo "$s/optimizer_s>0 $s/tp_comm_s>=0 $s/param_sync_s>=0 $s/optimizer_step_s>0"
  echo "$s/iteration_s==@$s/fwd_bwd_s+@$s/dp_comm_exposed_s+@$s/optimizer_s+@$s/tp_comm_s+@$s/dp_exchange_s+@$s/param_sync_s"
  echo "$s/optimizer_step_s==@$s/optimizer_s+@$s/tp_comm_s+@$s/dp_exchange_s+@$s/param_sync_s"
  echo "$s/dp_exchange_s>=0 $s/param_gather_total_s>=@$s/param_gather_exposed_s $s/param_gather_exposed_s>=0"
  echo "$s/tp_comm_sequential_s>=0 $s/tp_comm_pipelined_s>=0 $s/tp_comm_s==@$s/tp_comm_pipelined_s"
  echo "$s/dp_comm_total_s>=@$s/dp_comm_exposed_s $s/optimizer_rank_mean_s>0"
  # max/mean of equal loads is exactly 1 (sc: every rank computes everything)
  echo "$s/optimizer_rank_max_s>=@$s/optimizer_rank_mean_s $s/optimizer_balance>=1"
  echo "$s/fwd_bwd_flops>0 $s/micro_batches:int>=1 $s/critical_stage:int>=0 $s/critical_stage<$pp"
  echo "$s/micro_groups:int>=0"
}

# table_matches_json OUT JSON PREFIX: each row of a strategy table (format_table) equals the JSON
# object PREFIX/<strategy> to the printed digits; speedups are the first row's over the row's.
table_matches_json() {
  local out=$1 json=$2 prefix=$3 checks=() rows=0 first="" name fields i
  local keys=(iteration_s fwd_bwd_s dp_comm_exposed_s optimizer_s tp_comm_s param_sync_s
              optimizer_step_s)
  while read -r name fields; do
    case $name in sc | layerwise | layerwise-paper | asc | lb-asc | fsdp-a2a) ;; *) continue ;; esac
    read -r -a f <<<"$fields"
    [ -z "$first" ] && first=$name
    for i in "${!keys[@]}"; do checks+=("$prefix/$name/${keys[$i]}~=${f[$((2 * i))]}"); done
    checks+=("$prefix/$name/optimizer_balance~=${f[14]}"
             "ratio($prefix/$first/optimizer_step_s,$prefix/$name/optimizer_step_s)~=${f[15]%x}"
             "ratio($prefix/$first/iteration_s,$prefix/$name/iteration_s)~=${f[16]%x}"
             "$prefix/$name/dp_exchange_s~=${f[17]}" "$prefix/$name/param_gather_total_s~=${f[19]}"
             "$prefix/$name/param_gather_exposed_s~=${f[21]}")
    rows=$((rows + 1))
  done <"$out"
  if [ "$rows" -eq 0 ]; then fail "$out has no strategy rows"; return; fi
  check_file "$json" json "$prefix#==$rows" "${checks[@]}"
}

case $case_name in
smoke)
  if expect_ok smoke "$canzona" simulate --model qwen3-1.7b --dp 4 --tp 2 --json "$work/s.json" \
       --svg "$work/s.svg"; then
    S=/strategies
    check_file "$work/s.json" json /model==qwen3-1.7b /gpus==0 /dp==4 /tp==2 /pp==1 \
      /optimizer==muon /alpha==1 /cmax_mb==512 /planner==canzona /cost==flops /split_qkv==none \
      /split_fc1:bool /bucket_size:int">=0" /var_collective==grouped /cluster/name==h100-8 \
      /cluster/gpus_per_node==8 /cluster/intra_node/bandwidth_GBps==360 \
      /cluster/intra_node/latency_us==3 /cluster/inter_node/bandwidth_GBps==45 \
      /cluster/inter_node/latency_us==8 /cluster/device/name:string \
      /cluster/device/bf16_tflops==989.4 /cluster/device/tf32_tflops==494.7 \
      /cluster/device/fp32_tflops==66.9 /cluster/device/hbm_GBps==3350 \
      /cluster/device/matmul_efficiency==0.45 /cluster/device/optimizer_efficiency==0.5 \
      /cluster/device/optimizer_precision==tf32 /cluster/device/optimizer_task_overhead_us==50 \
      /cluster/device/factorization_tflops==5 /workload/tokens==524288 /workload/seq_len==4096 \
      /workload/micro_batch==1 /workload/grad_bytes==4 /workload/param_bytes==2 \
      /workload/adamw_bytes_per_element">0" /workload/attention_flops:bool \
      /workload/tp_pipeline:bool \
      $S#==6 $S/sc/strategy==sc $S/layerwise/strategy==layerwise \
      $S/layerwise-paper/strategy==layerwise-paper $S/asc/strategy==asc \
      $S/lb-asc/strategy==lb-asc $(strategy_checks $S 1) \
      $S/*/micro_batches==32 $S/*/fwd_bwd_s==@$S/sc/fwd_bwd_s \
      $S/*/fwd_bwd_flops==@$S/sc/fwd_bwd_flops $S/*/dp_comm_total_s">0" \
      $S/sc/param_sync_s==0 $S/asc/param_sync_s==0 $S/lb-asc/param_sync_s==0 \
      $S/layerwise/param_sync_s==0 $S/layerwise-paper/param_sync_s">0" $S/sc/micro_groups==0 \
      $S/layerwise/micro_groups==0 $S/layerwise-paper/micro_groups==0 \
      $S/asc/micro_groups">=1" $S/lb-asc/micro_groups">=1"
    table_matches_json "$work/smoke.out" "$work/s.json" $S
    # One bar per strategy: 6 forward-backward and 6 optimizer segments (+ 1 legend swatch each),
    # param sync for layerwise-paper only; segments inside the canvas.
    check_file "$work/s.svg" svg "count(rect[fill=#4e79a7])==7" "count(rect[fill=#e15759])==7" \
      "count(rect[fill=#59a14f])==2" "rect[fill=#4e79a7]@height>=0" "rect[fill=#e15759]@height>=0" \
      "rect[fill=#4e79a7]@y>=0" "rect[fill=#e15759]@y>=0" "text(qwen3-1.7b muon, DP=4 TP=2 PP=1 on h100-8)" \
      "text(lb-asc forward-backward: )" "text(layerwise-paper param sync: )" "text(exposed DP comm)"
  fi
  ;;
sweep)
  if expect_ok sweep "$canzona" simulate --model qwen3-0.6b --sweep tp --sweep-values 2,8 \
       --gpus 16 --strategy sc,lb-asc --json "$work/w.json" --svg "$work/w.svg"; then
    P=/points
    check_file "$work/w.json" json /sweep==tp /gpus==16 $P#==2 $P/0/value=='"2"' \
      $P/1/value=='"8"' $P/*/strategies#==2 $(strategy_checks "$P/*/strategies" 1) \
      $P/0/strategies/*/micro_batches==16 $P/1/strategies/*/micro_batches==64 \
      $P/*/strategies/sc/micro_groups==0 $P/*/strategies/lb-asc/micro_groups">=1"
    # Rows "<tp> <sc iter> s <sc step> s <lb-asc iter> s <lb-asc step> s" equal the JSON.
    checks=()
    for point in 0:2 1:8; do
      i=${point%%:*}
      tp=${point#*:}
      checks+=("$P/$i/strategies/sc/iteration_s~=$(table_cell "$work/sweep.out" "$tp" 2)"
               "$P/$i/strategies/sc/optimizer_step_s~=$(table_cell "$work/sweep.out" "$tp" 4)"
               "$P/$i/strategies/lb-asc/iteration_s~=$(table_cell "$work/sweep.out" "$tp" 6)"
               "$P/$i/strategies/lb-asc/optimizer_step_s~=$(table_cell "$work/sweep.out" "$tp" 8)")
    done
    check_file "$work/w.json" json "${checks[@]}"
    check_file "$work/w.svg" svg "count(rect[fill=#4e79a7])==5" "count(rect[fill=#e15759])==5" \
      "rect[fill=#4e79a7]@height>=0" "text(qwen3-0.6b muon, DP=gpus/(tp*pp))" "text(sweep tp)"
  fi
  ;;
dump_cluster)
  base=(simulate --model qwen3-0.6b --dp 2 --tp 2 --strategy "sc,lb-asc")
  if expect_ok dump "$canzona" "${base[@]}" --dump-cluster "$work/c.json"; then
    check_file "$work/c.json" json /name==h100-8 /gpus_per_node==8 \
      /intra_node/bandwidth_GBps==360 /intra_node/latency_us==3 /inter_node/bandwidth_GBps==45 \
      /inter_node/latency_us==8 /device/bf16_tflops==989.4 /device/tf32_tflops==494.7 \
      /device/fp32_tflops==66.9 /device/hbm_GBps==3350 /device/matmul_efficiency==0.45 \
      /device/optimizer_efficiency==0.5 /device/optimizer_precision==tf32 \
      /device/optimizer_task_overhead_us==50 /device/factorization_tflops==5 /device/name:string
    if expect_ok reread "$canzona" "${base[@]}" --cluster "$work/c.json"; then
      if diff <(tail -n +3 "$work/dump.out") <(tail -n +3 "$work/reread.out") >/dev/null; then
        pass
      else
        fail "the dumped cluster simulates differently from its preset"
      fi
    fi
  fi
  ;;
usage_errors)
  expect_usage_error "bad_cluster.json: key 'device.matmul_efficency': unknown key" \
    "$canzona" simulate --cluster "$data/bad_cluster.json"
  expect_usage_error "tp=16 must lie in [1, 8]" "$canzona" simulate --tp 16 --dp 2 \
    --json "$work/e.json" --svg "$work/e.svg"
  expect_absent "$work/e.json"
  expect_absent "$work/e.svg"
  expect_usage_error "unknown sweep 'bogus'" "$canzona" simulate --sweep bogus --json "$work/e.json"
  expect_absent "$work/e.json"
  expect_usage_error "--sweep-values needs --sweep" "$canzona" simulate --sweep-values 1,2
  expect_usage_error "--grad-dtype: expected fp32 or bf16" "$canzona" simulate --grad-dtype fp16
  expect_usage_error "--gpus 10 is not a multiple of tp * pp = 4" "$canzona" simulate --gpus 10 --tp 4
  expect_usage_error "unknown strategy" "$canzona" simulate --strategy fast
  expect_usage_error "--optimizer: give a matrix optimizer" "$canzona" simulate --optimizer adamw
  expect_usage_error "neither a preset" "$canzona" simulate --cluster "$work/absent.json"
  expect_usage_error "unknown variable-size collective" "$canzona" simulate --varsize-collectives tree
  expect_usage_error "--tokens must be positive" "$canzona" simulate --model qwen3-0.6b --dp 2 \
    --tp 2 --tokens 0
  expect_usage_error "--bogus" "$canzona" simulate --bogus
  expect_ok help "$canzona" simulate --help
  ;;
*)
  echo "unknown case '$case_name'"
  exit 2
  ;;
esac

cli_finish
