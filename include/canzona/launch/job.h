// What a launch of `canzona run`, `compare` or `train` executes on, whatever it then does with it:
// the model and its task splits, the grid, the optimizers and their options, the planner knobs,
// the seed and the reduction mode. Each client adds its own options beside it (the synthetic loop:
// runtime::RunOptions; training: train::TrainOptions), and each library gets its share from it:
// the planner plan_options(), the engine engine_options(), the model builder build_options().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/comm/communicator.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/engine.h"
#include "canzona/launch/agreement.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"

namespace canzona::launch {

struct JobOptions {
  std::string model = "qwen3-tiny";  // preset, HF config.json or param list (model::load_model)
  model::QkvSplit qkv_split = model::QkvSplit::kNone;  // QKV -> q/k/v or per-head tasks
  bool split_fc1 = false;                              // fc1 -> gate/up tasks
  ParallelDims dims;                                   // the grid
  std::vector<int> pp_layout;  // layers per pipeline stage (--pp-layout); empty: even split

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
  std::int64_t bucket_size = 0;                  // elements; 0 = Megatron default (ZeRO-3: a layer)
  // ZeRO-3 (engine/engine.h): default buckets hold one transformer layer each (layout.h).
  ZeroStage zero_stage = ZeroStage::kOne;

  std::uint64_t seed = 1;  // init and data (synthetic or sampled)
  bool pipeline = true;    // TP micro groups: post group k+1's gather before computing k
  comm::ReduceMode reduce_mode = comm::ReduceMode::kDeterministic;
  // Params and gradients in bf16 with fp32 main params and optimizer state, or all in fp32
  // (--precision; docs/precision.md); gradients reduced in fp32 under bf16 params
  // (--grad-reduce-in-fp32, Megatron's grad_reduce_in_fp32).
  DType precision = DType::kF32;
  bool grad_reduce_in_fp32 = false;
};

// The planning settings as `canzona plan`'s flags and the Python package's keywords spell them
// (their names, strings and defaults; apps/planning_flags.h declares the flags, python/ the
// keywords), with one mapping onto the job options: apply_planning_args.
struct PlanningArgs {
  ParallelDims dims;           // --dp, --tp, --pp, --ep, --etp
  std::vector<int> pp_layout;  // --pp-layout (a flag only: Python plans even stages)
  std::string planner = "canzona";
  std::string optimizer = "muon";  // matrix optimizer
  std::string cost = "flops";      // the planners' unit
  std::string calibration;         // cost "calibrated": bench-kernels calibration JSON
  double alpha = 1.0;              // Algorithm 1 blend
  double cmax_mb = 512.0;          // micro-group capacity, MiB per host
  std::int64_t bucket_size = 0;    // elements; 0 = Megatron default
  int zero_stage = 1;              // 1 | 3 as typed (parse_zero_stage)
  std::string split_qkv = "none";
  bool split_fc1 = false;
  std::string layerwise_tp = "duplicated";     // layerwise: duplicated | layer-sharded
  std::string layerwise_buckets = "soft-min";  // layerwise: soft-min | fixed
  std::string bucket_order = "free";           // lb-asc (ours): free (may re-lay buckets) | keep
  std::string precision = "fp32";              // --precision: fp32 | bf16
  bool grad_reduce_in_fp32 = false;            // --grad-reduce-in-fp32
  // --ns-dtype fp32 | bf16, --ns-algorithm standard | gram: Muon's Newton–Schulz options
  // (optim/muon.h), the keys ns_dtype and ns_algorithm of the optimizer options; "" leaves them
  // to the optimizer options (or the defaults).
  std::string ns_dtype;
  std::string ns_algorithm;
};

// Copies `args` into `options`: grid, planner and its knobs, optimizer, cost unit, bucket size,
// ZeRO stage, task splits, precision; a given ns_dtype / ns_algorithm is added to
// options.optimizer_options (set those first). Throws UsageError for an unknown planner, layerwise
// mode, bucket order, cost, split, precision, NS dtype or algorithm name, a ZeRO stage other than
// 1 or 3, an NS flag for an optimizer without that option, and an NS flag that disagrees with the
// same key in options.optimizer_options; ranges are checked where the options are consumed
// (validate, plan::validate_options). The calibration file is the caller's to read.
// Errors name the settings as `names` says: the CLIs' flags ("--ns-dtype") or the Python keywords
// ("ns_dtype").
void apply_planning_args(const PlanningArgs& args, JobOptions& options,
                         DimNames names = DimNames::kFlags);

// Limits of validate(), each named in its error message: the grid's (kMaxRanks) and the planner's
// C_max limits, 2^40 elements per DP bucket (4 TiB of fp32).
inline constexpr double kMaxCmaxMb = plan::kMaxCmaxMb;
inline constexpr std::int64_t kMaxBucketSize = std::int64_t{1} << 40;

// Throws UsageError naming the flag (and the limit above) for: the grid (ParallelDims::check);
// bucket_size outside [0,
// kMaxBucketSize]; alpha not finite or outside [0, 1]; cmax_mb not finite or outside (0,
// kMaxCmaxMb]; an optimizer that is not a registered matrix optimizer (optim/registry.h; "adamw" is
// element-wise); non-object option JSON, unknown option keys and option values out of range (the
// optimizers' own checks).
void validate(const JobOptions& options);

// The model build options (TP padding, task splits) and the model they give (model::load_model).
model::BuildOptions build_options(const JobOptions& options);
model::ModelSpec load_model(const JobOptions& options);

// The plan options of `strategy`: grid, planner knobs, cost in options.cost for the matrix
// optimizer with its optimizer_options (the registry descriptor prices them) at the run's
// precision, bucket size.
plan::PlanOptions plan_options(const JobOptions& options, plan::Strategy strategy);

// The engine's share: optimizer, its options, AdamW's, the micro-group pipeline, the ZeRO stage,
// the param dtype and grad_reduce_in_fp32.
engine::EngineOptions engine_options(const JobOptions& options);

// The settings of the job the ranks of a launch agree on (agreement.h), in a fixed order that
// depends only on the optimizer: every field above, model_hash(model), the strategy list, then one
// setting per optimizer option as it runs (optim::effective_options, sorted keys: key
// "--optimizer-options lr", then "adamw options beta1", ...). `loop`, the client's settings of its
// training loop (steps and the like), goes after the planner's (--bucket-size) and before the
// seed, so a launch whose ranks were given other step counts is told that first. Pure: no MPI, no
// files. A client appends the rest of its settings.
Settings job_settings(const JobOptions& options, const std::vector<plan::Strategy>& strategies,
                      const model::ModelSpec& model, const Settings& loop = {});

}  // namespace canzona::launch
