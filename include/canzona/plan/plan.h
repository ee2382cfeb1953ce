// The Plan: who updates which param (DP), which TP rank hosts each matrix task and in which micro
// group, for every pipeline stage. Pure: data in, Plan out; deterministic to the byte.
//
// Terms (docs/design.md section 3). R = DP ranks. Each stage's buffer is cut into buckets
// (layout.h). A bucket's *cuts* are R+1 monotone element offsets, cuts[0] = 0 and cuts[R] = bucket
// numel; DP rank r holds the shard [cuts[r], cuts[r+1]) of the bucket (Reduce-Scatter / All-Gather
// counts). A matrix param is *owned* by the DP rank whose shard holds its whole slot; an
// element-wise param may be *divided* (each rank updates the part inside its shard). A *task* is
// one matrix the matrix optimizer updates (a whole matrix param or one of its pieces); with TP > 1
// its *host* is the TP rank that gathers the full gradient and computes the update, and tasks are
// packed into ordered *micro groups*, one fused All-to-All each way per group.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canzona/common/parallel_dims.h"
#include "canzona/cost/cost.h"
#include "canzona/layout/layout.h"
#include "canzona/model/spec.h"
#include "canzona/plan/strategy.h"

namespace canzona::plan {

// lb-asc's planners. kPaper: Algorithms 1 and 2 as the paper's text states them.
// kMegatronCanzona: the authors' published code as it behaves (liangyuwang/Megatron-Canzona,
// megatron/core/optimizer/matrix_based_optimizer/). kCanzona: ours (docs/design.md section 3).
enum class PlannerVariant { kPaper, kCanzona, kMegatronCanzona };
// Megatron layer-wise buckets: kSoftMinimum (upstream today, NVIDIA/Megatron-LM #5415 and #4771:
// Muon params in soft-minimum shard-aligned buckets, the rest in the distributed optimizer's
// buffer) or kFixed (the earlier rule: one buffer of Megatron's fixed buckets, re-laid in padded
// shards).
enum class LayerwiseBuckets { kSoftMinimum, kFixed };

PlannerVariant parse_variant(const std::string& name);  // "paper" | "megatron-canzona" | "canzona"
const char* to_string(PlannerVariant variant);
LayerwiseTp parse_layerwise_tp(const std::string& name);  // "duplicated" | "layer-sharded"
LayerwiseBuckets parse_layerwise_buckets(const std::string& name);  // "soft-min" | "fixed"
const char* to_string(LayerwiseBuckets mode);
const char* to_string(LayerwiseTp mode);
bool parse_bucket_order(const std::string& name);  // "free" -> true | "keep" -> false

// Limits make_plan enforces, each named in its error message: the grid's (kMaxRanks,
// common/parallel_dims.h); C_max up to 1 PiB per host per group (x 2^20 B/MiB = 2^50 bytes, so the
// capacity in bytes always fits int64).
using canzona::kMaxRanks;
inline constexpr double kMaxCmaxMb = 1024.0 * 1024.0 * 1024.0;
// asc and lb-asc store dp + 1 cut points per bucket, so a stage's plan (and its JSON) grows with
// buckets x dp, and so does planning (several candidates, each O(cut points)). 2^22 cut points
// keep planning within a few seconds and a few hundred MiB on one core. Megatron's default bucket
// (max(40M, 1M x dp) elements) gives about numel / 1M cut points at large DP (Qwen3-32B: ~33,000);
// only hand-set small buckets at large DP reach the limit, and the UsageError asks for larger ones.
inline constexpr std::int64_t kMaxCutPoints = std::int64_t{1} << 22;

struct PlanOptions {
  Strategy strategy = Strategy::kLbAsc;
  PlannerVariant variant = PlannerVariant::kCanzona;
  // The grid. A mixture-of-experts model's expert buffer is planned over expert DP =
  // dp x tp / (ep x etp) ranks and etp TP ranks (ExpertPlan).
  ParallelDims dims;
  // Layers of each pipeline stage (--pp-layout, model::stage_bounds); empty: split evenly.
  std::vector<int> pp_layout;
  double alpha = 1.0;       // Algorithm 1 blend of even split (0) and deficit fill (1)
  double cmax_mb = 512.0;   // fused All-to-All capacity, MiB received per host per group
  int asc_group_tasks = 0;  // asc: tasks per fixed-count group; 0 = tp
  LayerwiseTp layerwise_tp = LayerwiseTp::kDuplicated;                  // layerwise: TP mode
  LayerwiseBuckets layerwise_buckets = LayerwiseBuckets::kSoftMinimum;  // layerwise: buckets
  // lb-asc with our planner: may lay each bucket's params out by owner (docs/design.md section 3,
  // "order inside a bucket is free"); re-laid candidates are kept when they win the selection.
  bool reorder_buckets = true;
  cost::CostOptions cost;        // cost.kind is the unit the DP and TP planners balance
  layout::LayoutOptions layout;  // dp and tp are taken from this struct's dp and tp
};

// Sentinel owners.
inline constexpr int kDivided = -2;   // element-wise param split across DP ranks by the cuts
inline constexpr int kEveryone = -3;  // sc: every DP rank updates it redundantly
inline constexpr int kAllTp = -1;     // every TP rank of the owner computes the task (tp == 1,
                                      // replicated params, sc and layerwise)

struct Task {
  int param = 0;          // index into ModelSpec::params
  int piece = -1;         // index into ParamSpec::pieces, -1 = whole param
  std::int64_t rows = 0;  // the full (un-TP-split) matrix the optimizer sees
  std::int64_t cols = 0;
  double cost = 0.0;              // planner unit (PlanOptions::cost.kind)
  double flops = 0.0;             // optimizer FLOPs per step
  double state_bytes = 0.0;       // optimizer-state bytes on the host
  std::int64_t gather_bytes = 0;  // fp32 gradient bytes the host receives (full matrix)
  int dp_owner = 0;               // DP rank that owns the param (kEveryone under sc)
  int host = kAllTp;              // TP rank that computes it, or kAllTp
  int group = -1;                 // micro group index within its DP rank's list, -1 if not hosted
};

struct MicroGroup {
  std::vector<int> tasks;           // indices into StagePlan::tasks, in execution order
  double makespan = 0.0;            // max over hosts of the summed task cost
  std::int64_t max_host_bytes = 0;  // max over hosts of gathered bytes (<= C_max unless alone)
};

struct StagePlan {
  int stage = 0;
  std::vector<int> params;  // model param indices, registration order
  layout::Layout layout;
  std::vector<std::vector<std::int64_t>> cuts;  // [bucket] R+1 element offsets (asc, lb-asc);
                                                // empty for sc and layerwise (All-Reduce)
  std::vector<int> owner;                       // [model param] DP owner, kDivided, kEveryone, or
                                                // -1 when the param is not in this stage
  std::vector<Task> tasks;                      // matrix tasks of this stage
  std::vector<std::vector<MicroGroup>> groups;  // [dp rank] micro groups; empty when tp == 1 or
                                                // the strategy computes TP redundantly
  // fsdp-a2a: the matrix params of each owner All-to-All, in execution order (Dion's batches:
  // params of one shape in registration order, dp at a time); empty for the other strategies.
  std::vector<std::vector<int>> owner_batches;
};

struct ExpertPlan;

struct Plan {
  PlanOptions options;
  // The stages' buffers: every param of a dense model; a MoE model's params other than experts.
  std::vector<StagePlan> stages;
  // A MoE model's second buffer (Megatron's expert buffer), or null for a dense model.
  std::shared_ptr<const ExpertPlan> expert;
  // Tied embeddings at PP > 1 (model arch.tied_embeddings): the word embedding's param index,
  // listed by the first stage and again, last, by the last stage, which keeps a copy for its
  // output layer as Megatron does (the copy's gradient is the embedding's, summed over the
  // embedding group, so both copies take the same step); -1 otherwise.
  int tied_embedding = -1;
};

// The word embedding's param index when `model` ties its output layer to it, else -1.
int tied_embedding_param(const model::ModelSpec& model);

// The expert buffer of a MoE model: the expert params of one EP rank (model::expert_part of EP
// rank 0; every EP rank holds experts of the same shapes in the same order, so one plan serves
// all, with expert e + k E/ep in place of e on EP rank k), planned like a dense model by the same
// strategy over expert DP x expert TP: plan.options.dims.dp = edp, plan.options.dims.tp = etp.
//
// Ranks: Megatron's expert grid (ParallelDims::expert_coord).
struct ExpertPlan {
  int ep = 1, etp = 1, edp = 1;
  model::ModelSpec model;   // model::expert_part(model, ep, etp, 0).model
  std::vector<int> source;  // its params' indices in the full model (EP rank 0)
  Plan plan;
};

// The checks of make_plan on the options alone (no model): the grid (ParallelDims::check),
// alpha, cmax_mb, the matrix
// optimizer and cost counts, as listed below. Lets a command report a bad flag before it loads a
// model. Throws UsageError.
void validate_options(const PlanOptions& options);

// Builds the plan. A MoE model (model::has_experts) gets two buffers, as Megatron keeps them:
// its dense params in `stages` over dp x tp and its experts in `expert` (ExpertPlan), each planned
// by the same strategy over its own DP group. Throws UsageError naming the flag and limit for: ep
// or etp outside [1, kMaxRanks]; ep x etp not dividing dp x tp; ep or etp above 1 on a dense
// model; the checks of model::expert_part; dp, tp, pp outside
// [1, kMaxRanks] or dp x tp x pp > kMaxRanks; alpha not finite or outside [0, 1]; cmax_mb not
// finite or outside [2^-20 (one byte), kMaxCmaxMb]; layerwise, asc, lb-asc with more than
// kMaxCutPoints cut points ((dp + 1) x buckets) in a stage; a model that fails model::validate or
// whose stages cannot be assigned; a matrix whose fp32 gradient bytes (rows x cols x 4), or a stage
// whose summed matrix gradient bytes, overflow int64; a matrix whose optimizer cost is not
// finite. Near-linear in the number of matrix tasks (pieces) for a fixed grid: the TP planners
// are O(n log n), the DP candidates bounded by fixed work limits (balanced_dp.cpp).
Plan make_plan(const model::ModelSpec& model, const PlanOptions& options);

// Stable 64-bit FNV-1a hash of every decision in the plan (cuts, owners, hosts, groups); ranks
// compare it before the first collective.
std::uint64_t plan_hash(const Plan& plan);

}  // namespace canzona::plan
