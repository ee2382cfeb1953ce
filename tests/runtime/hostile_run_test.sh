#!/usr/bin/env bash
# Hostile flags of `canzona run` / `canzona compare`, refused before MPI starts.
# Usage: hostile_run_test.sh <canzona binary> <canzona_check_output binary>
#
# Every case runs under `timeout 20` and `ulimit -v 4000000` (4 GB), without mpirun, and must exit
# with exactly 2, print exactly one stderr line naming the flag (and the limit, where one applies),
# print nothing on stdout and write no output file. One class per block:
#   * numeric flags that are not finite or out of range (--compute-scale inf ran with no compute,
#     --seed -1 wrapped around silently)
#   * optimizer option values out of range (max_precond_dim -5, precondition_frequency 0, ...) and
#     option JSON with a repeated key (the last one silently won)
#   * unusable --json / --trace paths, found before the run instead of after it
# Prints "N passed, M failed" at the end.
# shellcheck disable=SC1091,SC2154 # sourced lib
canzona=$1
source "$(dirname "$0")/../tools/cli_test_lib.sh"
cli_init "$2"

out=$work/out.json
trace=$work/trace.json
run() { run_bounded "$canzona" compare --json "$out" --trace "$trace" "$@"; }
opts() { run --optimizer "$1" --optimizer-options "$2"; }

# Numeric flags: finite and within the documented limits.
expect_usage_error "--compute-scale = inf must be a finite number" run --compute-scale inf
expect_usage_error "--compute-scale = nan must be a finite number" run --compute-scale nan
expect_usage_error "kMaxComputeScale" run --compute-scale 1e300
expect_usage_error "--compute-scale = -1" run --compute-scale -1
expect_usage_error "kMaxTokens" run --tokens 9223372036854775807
expect_usage_error "--tokens = 0 must lie in" run --tokens 0
expect_usage_error "kMaxSteps" run --steps 2147483647
expect_usage_error "--warmup = -1 must lie in" run --warmup -1
expect_usage_error "kMaxSteps" run --warmup 2147483647
expect_usage_error "--alpha must be in [0, 1] and finite (got nan)" run --alpha nan
expect_usage_error "kMaxCmaxMb" run --cmax-mb inf
expect_usage_error "kMaxRanks" run --dp 2000000
expect_usage_error "--dp x --tp x --pp = 2048 x 2048 x 1 ranks is more than 1048576 (kMaxRanks)" \
  run --dp 2048 --tp 2048
expect_usage_error "kMaxBucketSize" run --bucket-size 9223372036854775807
expect_usage_error "--test-corrupt-rank = 5" run --test-corrupt-rank 5
expect_usage_error "--seed must be an integer in [0, 18446744073709551615] (got '-1')" run --seed -1
expect_usage_error "--seed must be an integer" run --seed 99999999999999999999999
expect_absent "$out"
expect_absent "$trace"

# Optimizer option values, named by optimizer and key.
expect_usage_error "shampoo option 'max_precond_dim' = -5 must lie in [1, 65536] (kMaxPrecondDim)" \
  opts shampoo '{"max_precond_dim": -5}'
expect_usage_error "soap option 'max_precond_dim' = 0" opts soap '{"max_precond_dim": 0}'
expect_usage_error "soap option 'precondition_frequency' = 0" \
  opts soap '{"precondition_frequency": 0}'
expect_usage_error "shampoo option 'beta2' = 1 must be a finite number" opts shampoo '{"beta2": 1}'
expect_usage_error "muon option 'lr' = -1" opts muon '{"lr": -1}'
expect_usage_error "muon option 'eps' = 0" opts muon '{"eps": 0}'
expect_usage_error "kMaxNsSteps" opts muon '{"ns_steps": 1000000}'
expect_usage_error "--optimizer-options is not valid JSON" opts muon '{"lr": 1e999}'
expect_usage_error "--optimizer-options: duplicate key 'lr'" opts muon '{"lr": 0.1, "lr": 0.2}'
# Muon's Newton-Schulz flags: a bad name, a flag the optimizer has no option for, a flag that
# disagrees with --optimizer-options (which would otherwise win or lose silently).
expect_usage_error "--ns-dtype: unknown Newton-Schulz dtype 'fp16' (known: fp32, bf16)" \
  run --ns-dtype fp16
expect_usage_error "--ns-algorithm: unknown Newton-Schulz algorithm 'polar' (known: standard, gram)" \
  run --ns-algorithm polar
expect_usage_error "--ns-dtype is an option of Muon's Newton-Schulz iteration; the matrix optimizer here is shampoo" \
  run --optimizer shampoo --ns-dtype bf16
expect_usage_error "--ns-dtype bf16 disagrees with --optimizer-options' \"ns_dtype\": \"fp32\"" \
  run --ns-dtype bf16 --optimizer-options '{"ns_dtype": "fp32"}'
expect_usage_error "muon option 'ns_algorithm': gram has no stable restart set for polar_express x 8 in bf16" \
  run --ns-dtype bf16 --ns-algorithm gram --optimizer-options '{"ns_coefficients": "polar_express", "ns_steps": 8}'
expect_usage_error "muon option 'ns_algorithm': unknown Newton-Schulz algorithm 'fast'" \
  opts muon '{"ns_algorithm": "fast"}'
expect_absent "$out"

# Output paths, refused before the model is loaded and before MPI starts.
expect_usage_error "--json" run_bounded "$canzona" compare --steps 1 --json ""
expect_usage_error "--trace" run_bounded "$canzona" run --steps 1 --trace ""
expect_usage_error "--json $work/absent/r.json" run_bounded "$canzona" compare --steps 1 \
  --json "$work/absent/r.json"
expect_usage_error "--trace $work" run_bounded "$canzona" run --steps 1 --trace "$work"
expect_absent "$work/absent"

cli_finish
