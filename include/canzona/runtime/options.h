// What one `canzona run` / `canzona compare` launch executes: the model, the grid, the optimizer,
// the planner knobs and the synthetic training loop (docs/design.md sections 1 and 4).
//
// Terms. A *step* is one training iteration: a simulated forward and backward pass over the
// buckets (real compute, sized below), the DP gradient sync, the optimizer step and the parameter
// sync. *Warmup* steps run first and are excluded from the timing medians; the final parameters
// (and --verify) include them. The simulated pass costs compute_scale x 6 x (TP-local params) x
// tokens FLOPs per step and rank (2/6 forward, 4/6 backward), spent as 128 x 128 x 128 sgemms.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "canzona/comm/communicator.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/engine.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace canzona::runtime {

struct RunOptions {
  std::string model = "qwen3-tiny";  // preset, HF config.json or param list (model::load_model)
  model::QkvSplit qkv_split = model::QkvSplit::kNone;  // QKV -> q/k/v or per-head tasks
  bool split_fc1 = false;                              // fc1 -> gate/up tasks
  int dp = 1;
  int tp = 1;
  int pp = 1;  // only 1 is executed (pipeline stages are planned, not run)

  std::string optimizer = "muon";  // matrix optimizer: muon | shampoo | soap
  nlohmann::json optimizer_options = nlohmann::json::object();  // its options (registry keys)
  nlohmann::json adamw_options = nlohmann::json::object();      // element-wise params

  plan::PlannerVariant planner = plan::PlannerVariant::kCanzona;
  plan::LayerwiseTp layerwise_tp = plan::LayerwiseTp::kDuplicated;  // layerwise's TP mode
  plan::LayerwiseBuckets layerwise_buckets = plan::LayerwiseBuckets::kSoftMinimum;
  bool reorder_buckets = true;  // lb-asc (canzona): params of a bucket may be laid out by owner
  double alpha = 1.0;           // Algorithm 1 blend
  double cmax_mb = 512.0;       // micro-group capacity, MiB per host
  cost::CostKind cost = cost::CostKind::kFlops;  // the unit the planners balance
  std::int64_t bucket_size = 0;                  // elements; 0 = Megatron default

  int steps = 5;                // timed steps (>= 1)
  int warmup = 1;               // untimed steps before them (>= 0)
  double compute_scale = 0.01;  // fraction of the 6 N T FLOPs of a `tokens` batch to simulate
  std::int64_t tokens = 4096;   // tokens per simulated batch
  std::uint64_t seed = 1;       // synthetic init and gradients (synthetic.h)
  bool pipeline = true;         // TP micro groups: post group k+1's gather before computing k
  comm::ReduceMode reduce_mode = comm::ReduceMode::kDeterministic;

  // Test hooks are faults (common/faults.h: kPerturbPlan, kCorruptParams), not options.

  int total_steps() const { return warmup + steps; }
};

// Limits of validate(), each named in its error message. Generous for every real model and
// cluster: 2^20 ranks (DP x TP), a million steps, 2^40 tokens per batch (Llama-3-405B trained on
// 16M-token batches), a 100x full forward/backward per step, 1 PiB micro-group capacity, 2^40
// elements per DP bucket (4 TiB of fp32). The grid and C_max limits are the planner's.
inline constexpr std::int64_t kMaxRanks = plan::kMaxRanks;
inline constexpr std::int64_t kMaxSteps = 1'000'000;
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;
inline constexpr double kMaxComputeScale = 100.0;
inline constexpr double kMaxCmaxMb = plan::kMaxCmaxMb;
inline constexpr std::int64_t kMaxBucketSize = std::int64_t{1} << 40;

// Throws UsageError naming the flag (and the limit above) for: dp, tp outside [1, kMaxRanks] or
// dp x tp > kMaxRanks; pp != 1 (not executed); steps outside [1, kMaxSteps]; warmup outside
// [0, kMaxSteps]; compute_scale not finite or outside [0, kMaxComputeScale]; tokens outside
// [1, kMaxTokens]; bucket_size outside [0, kMaxBucketSize]; alpha not finite or outside [0, 1];
// cmax_mb not finite or outside (0, kMaxCmaxMb]; a test hook rank outside [-1, dp x tp); an
// optimizer that is not a registered matrix optimizer (optim/registry.h; "adamw" is element-wise);
// non-object option JSON, unknown
// option keys and option values out of range (the optimizers' own checks).
void validate(const RunOptions& options);

// The model with options' TP padding and task splits (model::load_model).
model::ModelSpec load_model(const RunOptions& options);

// The plan options of `strategy` for this run: grid, planner knobs, cost in options.cost for the
// matrix optimizer with its optimizer_options (the registry descriptor prices them), bucket size.
plan::PlanOptions plan_options(const RunOptions& options, plan::Strategy strategy);

// The engine's share of the options: optimizer, its options, AdamW's, the micro-group pipeline.
engine::EngineOptions engine_options(const RunOptions& options);

// "deterministic" | "native"; throws UsageError otherwise.
comm::ReduceMode parse_reduce_mode(const std::string& name);
const char* to_string(comm::ReduceMode mode);

}  // namespace canzona::runtime
