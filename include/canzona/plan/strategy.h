// The strategies that run side by side and the table of their nature: the one place a library
// reads what a strategy is made of, whether it can shard params (ZeRO-3), how its optimizer work
// is shared over the grid, and its names.
//
// Terms. A strategy is a combination of parts (StrategyParts): the DP gradient sync (All-Reduce
// of each bucket, or a variable Reduce-Scatter with the plan's cuts), the TP exchange of TP-split
// matrices (every TP rank gathers the whole gradient and computes redundantly, or the micro-group
// pipeline where one host per task computes) and the parameter sync (none, the layer-wise
// All-Gather-v over DP, or one variable All-Gather per bucket). fsdp-a2a adds a fourth, the DP
// owner exchange: every matrix's reduced gradient moves from the DP shards that hold it to its
// owner by All-to-All, and the updated values move back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canzona/common/parallel_dims.h"

namespace canzona::plan {

// docs/design.md section 1. kLayerwise is NVIDIA Megatron-LM's layer-wise optimizer as it ships
// today (megatron/core/optimizer/layer_wise_optimizer.py: each bucket re-laid by LPT, padded equal
// shards, standard Reduce-Scatter / All-Gather); kLayerwisePaper is the paper-era baseline
// (ping-pong owners, All-Reduce, All-Gather-v). kFsdpA2a is the equal-shard baseline of fully
// sharded matrix optimizers (Microsoft's Dion, torchtitan's FlexShard, the authors' FSDP-Canzona):
// FSDP's equal flat shards, each matrix's gradient moved to one owner DP rank by All-to-All,
// updated there and sent back (strategy_fsdp_a2a.cpp). (New strategies go last so the older
// values, which plan_hash mixes in, keep their numbers.)
enum class Strategy { kSc, kLayerwise, kAsc, kLbAsc, kLayerwisePaper, kFsdpA2a };

// Megatron layer-wise TP modes: kDuplicated (its default: every TP rank gathers the shards and
// runs the full update) and kLayerSharded (each weight has one home TP rank; one fused
// All-to-All each way per DP rank).
enum class LayerwiseTp { kDuplicated, kLayerSharded };

enum class DpSync { kAllReduce, kReduceScatter };
enum class TpExchange { kRedundantGather, kMicroGroups };
enum class ParamSync { kNone, kLayerwiseAllGatherV, kBucketAllGather };
enum class DpExchange { kNone, kOwnerAllToAll };

struct StrategyParts {
  DpSync dp_sync = DpSync::kAllReduce;
  TpExchange tp_exchange = TpExchange::kRedundantGather;
  ParamSync param_sync = ParamSync::kNone;
  DpExchange dp_exchange = DpExchange::kNone;
};

// Which ranks share a strategy's optimizer work: kNone, every rank computes every update (sc);
// kDp, the DP ranks share it and every TP rank of a task gathers and computes the whole matrix
// (layerwise, layerwise-paper, fsdp-a2a); kGrid, each matrix is computed once on the DP x TP
// grid (asc, lb-asc).
enum class ComputeShare { kNone, kDp, kGrid };

struct StrategyInfo {
  Strategy strategy;
  const char* name;   // on the command line, in reports and in the Python package
  const char* about;  // one line for --help and docs
  // The parts (layerwise: under its default TP mode; strategy_parts takes the mode).
  StrategyParts parts;
  // Whether it can keep only its DP shard of params and gradients (ZeRO-3): a Reduce-Scatter and
  // a bucket All-Gather of its cuts, and not Megatron-LM's layer-wise optimizer, which has none.
  bool shards_params;
  // Why not, when it cannot (the end of check_zero_stage's message).
  const char* no_zero3;
  ComputeShare compute_share;
};

// Every strategy, in design order: sc, layerwise, layerwise-paper, asc, lb-asc, fsdp-a2a.
std::span<const StrategyInfo> strategy_table();
const StrategyInfo& strategy_info(Strategy strategy);

// The parts of `strategy`; layerwise's TP exchange follows `layerwise_tp` (kLayerSharded: micro
// groups, one group per DP rank).
StrategyParts strategy_parts(Strategy strategy,
                             LayerwiseTp layerwise_tp = LayerwiseTp::kDuplicated);
// How many ranks of a stage's dp x tp share the optimizer work (ComputeShare): 1, dp or dp x tp.
std::int64_t compute_ranks(Strategy strategy, int dp, int tp);

// "sc" | "layerwise" | "layerwise-paper" | "asc" | "lb-asc" | "fsdp-a2a"; UsageError listing the
// names otherwise.
Strategy parse_strategy(const std::string& name);
// "all" (every strategy, in design order) or a comma list of names; throws UsageError when empty
// or bad.
std::vector<Strategy> parse_strategy_list(const std::string& text);
const char* to_string(Strategy strategy);
// The length of the longest strategy name: the width of a name column that aligns every table.
int strategy_name_width();

// Throws UsageError naming the first strategy that cannot run under ZeRO-3 ("--zero-stage 3:
// strategy sc All-Reduces gradients, so every rank keeps every param; ZeRO-3 runs asc, lb-asc and
// fsdp-a2a"); nothing under ZeRO-1.
void check_zero_stage(ZeroStage stage, std::span<const Strategy> strategies);
// The strategies of --strategy/--strategies under `stage`: parse_strategy_list, where under
// ZeRO-3 "all" means every strategy that shards params; then check_zero_stage.
std::vector<Strategy> strategies_for_stage(const std::string& list, ZeroStage stage);

}  // namespace canzona::plan
