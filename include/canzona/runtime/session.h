// A launch of `canzona run` / `canzona compare`: every strategy on the same data in one MPI job,
// with plan agreement, statistics gathered to world rank 0, optional verification and trace.
//
// Error policy. Everything that could make ranks disagree is checked before the first
// collective that depends on it: check_agreement() (agreement.h: every rank runs the same
// effective configuration) before the first collective of the launch, then per strategy
// validate_plan() (the plan fits the model and the grid) and check_plan_agreement() (every rank
// computed the same plan). All throw PlanAgreementError, identically on every rank, so the caller
// can report it once and end the job without an abort (comm::end_job).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/common/error.h"
#include "canzona/launch/plan_check.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/runner.h"

namespace canzona::runtime {

struct SessionOptions {
  bool verify = false;             // compare final params and last reduced gradients (below)
  double verify_tolerance = 1e-4;  // max |difference| of final params accepted under kNative
  std::string trace_path;          // Chrome trace; empty = none
};

// Results of one strategy; world rank 0 holds the gathered values.
struct StrategyResult {
  plan::Strategy strategy = plan::Strategy::kLbAsc;
  std::uint64_t plan_hash = 0;
  // FNV-1a of the final params: each world rank hashes the bytes of its params (layout order),
  // then the per-rank hashes are hashed in world-rank order. The same for every strategy of one
  // grid when they agree bit for bit (what --verify checks element by element).
  std::uint64_t params_hash = 0;
  int buckets = 0;
  int micro_groups = 0;                 // over all DP ranks
  engine::StepTimes median;             // per phase: median over timed steps of the max over ranks
  std::vector<double> opt_cpu_ms;       // [world rank] median optimizer CPU per step
  std::vector<double> busy_cpu_ms;      // [world rank] median compute CPU per step
  std::vector<double> state_mb;         // [world rank] optimizer state + main params, MiB
  comm::CommBytes dp_bytes;             // per step, summed over ranks, by collective kind
  comm::CommBytes tp_bytes;             // per step, summed over ranks, by collective kind
  PhaseBytes dp_phase_bytes;            // per step, summed over ranks, by phase
  PhaseBytes tp_phase_bytes;            // per step, summed over ranks, by phase
  double predicted_flops_max = 0.0;     // plan metrics: optimizer FLOPs of the busiest rank
  double predicted_flops_mean = 0.0;    // and of the mean rank, per step
  std::vector<double> predicted_flops;  // [world rank] plan metrics, per step

  comm::CommBytes bytes() const;  // dp_bytes + tp_bytes
};

// --verify. Final params: every strategy, every DP replica, compared with the single-process
// Reference and with the first strategy: bitwise under kDeterministic; under kNative within
// SessionOptions::verify_tolerance (absolute; a sanity bound, the optimizers amplify rounding).
// Reduced gradients of the last step (where the runtime holds them: every DP replica for
// All-Reduce strategies, the assembled shards for Reduce-Scatter ones) compared with the
// Reference's: bitwise under kDeterministic; under kNative within native_sum_factor(dp) x
// sum_d |x_d| per element (src/runtime/verify.h), a bound any summation order meets and a gradient
// not averaged by 1/DP misses. `passed` also needs every element of the model compared.
struct VerifyResult {
  bool ran = false;
  bool bitwise = false;       // params and gradients: every strategy, every replica, every element
  bool passed = false;        // bitwise, or within the bounds above under kNative
  double max_abs_diff = 0.0;  // final params
  double param_bound = 0.0;   // SessionOptions::verify_tolerance: the params' bound under kNative
  double grad_max_abs_diff = 0.0;      // reduced gradients
  std::string first_mismatch;          // "" when bitwise; else where and what
  std::int64_t elements = 0;           // param elements compared per replica (== model numel)
  std::int64_t grad_elements = 0;      // gradient elements compared per view (== model numel)
  std::int64_t expected_elements = 0;  // the model's numel
};

struct CompareResult {
  RunOptions options;
  std::string model_name;
  std::int64_t model_numel = 0;
  std::vector<StrategyResult> strategies;
  VerifyResult verify;
};

// Runs each strategy in turn (plan, validate, agree, set up, warmup + timed steps, finish),
// collective over every communicator of the grid. Its first collective is check_agreement()
// (agreement.h) over launch_settings(options, session, strategies, model), so ranks called with
// different arguments fail with the same PlanAgreementError instead of hanging. With
// session.verify, world rank 0 also runs the single-process Reference and compares each strategy's
// final params (every DP replica) with it and with the first strategy's. Throws PlanAgreementError
// (identically on every rank) or Error. A MoE model needs `experts` (comm/grid.h, made for
// options.dims.ep and options.dims.etp): each strategy then also runs the expert buffer
// (StrategyRunner), and the verification covers every expert of every EP rank.
CompareResult run_strategies(comm::Grid& grid, const model::ModelSpec& model,
                             const RunOptions& options,
                             const std::vector<plan::Strategy>& strategies,
                             const SessionOptions& session, comm::ExpertGroups* experts = nullptr);

}  // namespace canzona::runtime
