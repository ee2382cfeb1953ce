#!/usr/bin/env bash
# Hostile input to `canzona simulate`, one ctest per CLASS. Every bad input must exit
# with exactly 2, print exactly one stderr line naming the problem (and the limit), print nothing
# on stdout and write no --json/--svg/--dump-cluster file, within 20 s and 4 GB of address space.
# Usage: hostile_simulate_test.sh CLASS <canzona> <canzona_check_output>
#
#   grid         dp, tp, pp, gpus and their products out of range or overflowing int
#                (--tp 65536 --pp 65536 --gpus 1024 was a SIGFPE)
#   workload     --tokens / --seq-len / --micro-batch out of range (--tokens 2^63-1 printed a
#                negative iteration time)
#   cost         --ns-steps / --precondition-frequency / --max-precond-dim out of range, in
#                simulate and in plan (--max-precond-dim -5 was accepted)
#   cluster      cluster files whose numbers are absurd, tiny or huge (inf/nan columns before),
#                non-integer or out-of-range gpus_per_node, bad names, non-regular files
#   calibration  calibration files with absurd slopes, intercepts, sample shapes or seconds
#   sweep        --sweep-values that are not finite, out of range, or too many
#   outputs      unusable --json/--svg/--dump-cluster paths are refused before any work, and a
#                late failure leaves no file behind; a good run still writes every file and its
#                balance of equal loads is exactly 1
# shellcheck disable=SC1091,SC2154 # sourced lib
class=$1
canzona=$2
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$3"

# Runs canzona bounded in time (20 s) and address space (4 GB).
bounded() {
  run_bounded "$canzona" "$@"
}

# bad WORDS ARGS...: `canzona simulate ARGS... --json J --svg S` is a usage error naming WORDS
# and writes neither file.
bad() {
  local words=$1
  shift
  rm -f "$work/o.json" "$work/o.svg"
  expect_usage_error "$words" bounded simulate --model qwen3-0.6b "$@" --json "$work/o.json" \
    --svg "$work/o.svg"
  expect_absent "$work/o.json"
  expect_absent "$work/o.svg"
}

# cluster_file NAME JSON: writes $work/NAME.json holding JSON.
cluster_file() { printf '%s\n' "$2" >"$work/$1.json"; }

case "$class" in
grid)
  bad "tp x pp = 4294967296 must lie in [1, 1048576] (kMaxGridRanks)" --tp 65536 --pp 65536 \
    --gpus 1024
  bad "--dp x --tp x --pp = 32 x 65536 x 65536 ranks is more than 1048576" --tp 65536 --pp 65536
  bad "--dp x --tp x --pp = 1048576 x 8 x 1 ranks is more than 1048576" --dp 1048576 --tp 8
  bad "--dp x --tp x --pp = 2147483647 x 8 x 1 ranks is more than 1048576" --dp 2147483647 --tp 8
  bad "--dp must be positive (got 0)" --dp 0
  bad "--gpus = -5 must lie in [1, 1048576]" --gpus -5
  bad "--gpus = 2147483647 must lie in [1, 1048576]" --gpus 2147483647 --tp 1
  bad "--pp must be positive (got -2)" --pp -2
  ;;
workload)
  bad "--tokens = 9223372036854775807 must lie in [1, 1099511627776] (kMaxTokens)" \
    --tokens 9223372036854775807 --dp 2 --tp 2
  bad "--seq-len = 9223372036854775807 must lie in [1, 16777216] (kMaxSeqLen)" \
    --seq-len 9223372036854775807
  bad "--micro-batch = 4611686018427387904 must lie in [1, 1048576] (kMaxMicroBatch)" \
    --micro-batch 4611686018427387904
  bad "--tokens must be positive" --tokens -1
  ;;
cost)
  bad "--max-precond-dim = -5 must lie in [0, 2147483648] (kMaxPrecondDim)" --optimizer shampoo \
    --max-precond-dim -5 --dp 2 --tp 2
  bad "--ns-steps = 2147483647 must lie in [1, 1000] (kMaxNsSteps)" --ns-steps 2147483647
  bad "--precondition-frequency = -1 must lie in [1, 1000000]" --optimizer soap \
    --precondition-frequency -1
  bad "--precision must be fp32 or bf16 (got 'fp8')" --precision fp8
  bad "--precision and --grad-reduce-in-fp32 set --param-dtype and --grad-dtype: give one spelling" \
    --precision bf16 --param-dtype fp32
  expect_usage_error "--max-precond-dim = -5 must lie in [0, 2147483648]" bounded plan \
    --model qwen3-0.6b --optimizer shampoo --cost flops --max-precond-dim -5
  ;;
cluster)
  cluster_file slow '{"base": "h100-8", "name": "x", "inter_node": {"bandwidth_GBps": 1e-300}}'
  bad "slow.json: key 'inter_node.bandwidth_GBps': value 1e-300 must lie in [0.001, 1e+06]" \
    --cluster "$work/slow.json"
  cluster_file fast '{"base": "h100-8", "name": "x", "intra_node": {"bandwidth_GBps": 1e300}}'
  bad "key 'intra_node.bandwidth_GBps': value 1e+300 must lie in" --cluster "$work/fast.json"
  cluster_file late '{"base": "h100-8", "name": "x", "inter_node": {"latency_us": 1e300}}'
  bad "key 'inter_node.latency_us': value 1e+300 must lie in [0, 1e+06] (kMaxLatencyUs)" \
    --cluster "$work/late.json"
  cluster_file flops '{"base": "h100-8", "name": "x", "device": {"bf16_tflops": 1e-310}}'
  bad "key 'device.bf16_tflops'" --cluster "$work/flops.json"
  cluster_file eff '{"base": "h100-8", "name": "x", "device": {"optimizer_efficiency": 1e-300}}'
  bad "key 'device.optimizer_efficiency': value 1e-300 must lie in [0.001, 1]" \
    --cluster "$work/eff.json"
  cluster_file over '{"base": "h100-8", "name": "x", "device": {"optimizer_task_overhead_us": 1e300}}'
  bad "key 'device.optimizer_task_overhead_us': value 1e+300 must lie in [0, 1e+06]" \
    --cluster "$work/over.json"
  cluster_file fact '{"base": "h100-8", "name": "x", "device": {"factorization_tflops": 1e300}}'
  bad "key 'device.factorization_tflops'" --cluster "$work/fact.json" --optimizer shampoo
  cluster_file gpus '{"base": "h100-8", "name": "x", "gpus_per_node": 1e9}'
  bad "key 'gpus_per_node': value 1e+09 must lie in [1, 1024] (kMaxGpusPerNode)" \
    --cluster "$work/gpus.json"
  cluster_file zero '{"base": "h100-8", "name": "x", "gpus_per_node": 0}'
  bad "key 'gpus_per_node': value 0 must lie in [1, 1024]" --cluster "$work/zero.json"
  cluster_file name '{"base": "h100-8", "name": "two\nlines"}'
  bad "key 'name': control characters are not allowed" --cluster "$work/name.json"
  cluster_file long "{\"base\": \"h100-8\", \"name\": \"$(printf 'x%.0s' $(seq 300))\"}"
  bad "key 'name': length 300 must lie in [1, 256] (kMaxClusterNameChars)" \
    --cluster "$work/long.json"
  bad "/dev/zero: not a regular file" --cluster /dev/zero
  ;;
calibration)
  cal() {
    printf '{"version": 1, "optimizers": {"muon": %s}}\n' "$2" >"$work/$1.json"
  }
  cal slope '{"intercept_s": 0, "seconds_per_flop": 1e300}'
  bad "slope.json: optimizers.muon: key 'seconds_per_flop' = 1e+300 must lie in [1e-18, 0.001]" \
    --cost calibrated --calibration "$work/slope.json"
  cal flat '{"intercept_s": 0, "seconds_per_flop": 0}'
  bad "key 'seconds_per_flop' = 0 must lie in" --cost calibrated --calibration "$work/flat.json"
  cal icept '{"intercept_s": 1e300, "seconds_per_flop": 1e-12}'
  bad "key 'intercept_s' = 1e+300 must lie in [0, 3600] (kMaxInterceptSeconds)" \
    --cost calibrated --calibration "$work/icept.json"
  cal rows '{"intercept_s": 0, "seconds_per_flop": 1e-12, "samples": [{"rows": 1000000000000000000, "cols": 2, "seconds": 1}]}'
  bad "samples[0]: sample shape 1000000000000000000x2 must lie in [1, 16777216]" \
    --cost calibrated --calibration "$work/rows.json"
  cal wrap '{"intercept_s": 0, "seconds_per_flop": 1e-12, "samples": [{"rows": 18446744073709551615, "cols": 2, "seconds": 1}]}'
  bad "key 'rows' = 18446744073709551615 exceeds the 64-bit integer range" \
    --cost calibrated --calibration "$work/wrap.json"
  cal secs '{"intercept_s": 0, "seconds_per_flop": 1e-12, "samples": [{"rows": 2, "cols": 2, "seconds": 1e300}]}'
  bad "has seconds 1e+300" --cost calibrated --calibration "$work/secs.json"
  bad "/dev/zero: not a regular file" --cost calibrated --calibration /dev/zero
  ;;
sweep)
  bad "--sweep dp: value '1e300' must lie in [1, 1048576] (kMaxGridRanks)" --tp 1 --sweep dp \
    --sweep-values 2,1e300
  bad "--sweep tp: value '-8' must lie in [1, 1048576]" --sweep tp --sweep-values -8
  bad "--sweep alpha: value 'nan' is not a finite number" --sweep alpha --sweep-values nan
  bad "--sweep cmax: value 'inf' is not a finite number" --sweep cmax --sweep-values 64,inf
  bad "--sweep dp: value '2.5' is not an integer" --sweep dp --sweep-values 2.5
  many=$(printf "2,%.0s" $(seq 33))
  bad "--sweep-values: 33 values, more than 32 (kMaxSweepValues)" --sweep dp --sweep-values "$many"
  bad "--dp x --tp x --pp = 32 x 65536 x 65536 ranks is more than 1048576" --pp 65536 --sweep tp \
    --sweep-values 65536
  ;;
outputs)
  expect_usage_error "--json" bounded simulate --json ""
  expect_usage_error "--svg" bounded simulate --svg "$work"
  expect_usage_error "--dump-cluster" bounded simulate --dump-cluster "$work/absent/c.json"
  expect_usage_error "--svg and --json name the same file" bounded simulate --model qwen3-0.6b \
    --json "$work/same" --svg "$work/same"
  expect_absent "$work/same"
  # Refused before any work: the good --json path is not written either.
  expect_usage_error "--svg" bounded simulate --model qwen3-0.6b --json "$work/o.json" \
    --dump-cluster "$work/d.json" --svg "$work/absent/o.svg"
  expect_absent "$work/o.json"
  expect_absent "$work/d.json"
  # A failure after the cluster is read (a sweep value) writes no --dump-cluster file.
  expect_usage_error "is not a finite number" bounded simulate --model qwen3-0.6b \
    --dump-cluster "$work/d.json" --sweep alpha --sweep-values nan
  expect_absent "$work/d.json"
  # A good run writes every file; sc's equal loads have a balance of exactly 1.
  if expect_ok good bounded simulate --model qwen3-0.6b --dp 4 --tp 2 --strategy sc,lb-asc \
    --json "$work/o.json" --svg "$work/o.svg" --dump-cluster "$work/d.json"; then
    check_file "$work/o.json" json /strategies/sc/optimizer_balance==1 \
      /strategies/sc/optimizer_rank_mean_s==@/strategies/sc/optimizer_rank_max_s
    check_file "$work/o.svg" svg
    check_file "$work/d.json" json /name==h100-8
  fi
  ;;
*)
  echo "unknown class '$class'"
  exit 2
  ;;
esac

cli_finish
