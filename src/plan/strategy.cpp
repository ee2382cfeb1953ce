// The strategy table (strategy.h).
#include "canzona/plan/strategy.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

constexpr const char* kAllReduces = " All-Reduces gradients, so every rank keeps every param";

// In design order (parse_strategy_list "all", the help texts). Each row is what a library may ask
// of a strategy; a library that needs more adds a column here rather than a switch of its own.
constexpr std::array<StrategyInfo, 6> kTable{{
    {Strategy::kSc,
     "sc",
     "All-Reduce, every rank computes every update (the unsharded baseline)",
     {DpSync::kAllReduce, TpExchange::kRedundantGather, ParamSync::kNone, DpExchange::kNone},
     false,
     kAllReduces,
     ComputeShare::kNone},
    {Strategy::kLayerwise,
     "layerwise",
     "Megatron-LM's layer-wise optimizer: padded equal shards, LPT re-laid buckets",
     {DpSync::kReduceScatter, TpExchange::kRedundantGather, ParamSync::kBucketAllGather,
      DpExchange::kNone},
     false,
     " is Megatron-LM's layer-wise optimizer, which has no ZeRO-3",
     ComputeShare::kDp},
    {Strategy::kLayerwisePaper,
     "layerwise-paper",
     "the paper-era layer-wise baseline: ping-pong owners, All-Reduce, All-Gather-v",
     {DpSync::kAllReduce, TpExchange::kRedundantGather, ParamSync::kLayerwiseAllGatherV,
      DpExchange::kNone},
     false,
     kAllReduces,
     ComputeShare::kDp},
    {Strategy::kAsc,
     "asc",
     "Canzona's start-index cuts and fixed-count TP micro groups",
     {DpSync::kReduceScatter, TpExchange::kMicroGroups, ParamSync::kBucketAllGather,
      DpExchange::kNone},
     true,
     "",
     ComputeShare::kGrid},
    {Strategy::kLbAsc,
     "lb-asc",
     "Canzona's balanced cuts and capacity-bounded TP micro groups",
     {DpSync::kReduceScatter, TpExchange::kMicroGroups, ParamSync::kBucketAllGather,
      DpExchange::kNone},
     true,
     "",
     ComputeShare::kGrid},
    {Strategy::kFsdpA2a,
     "fsdp-a2a",
     "FSDP's equal flat shards, each matrix moved to one owner by All-to-All (Dion's rule)",
     {DpSync::kReduceScatter, TpExchange::kRedundantGather, ParamSync::kBucketAllGather,
      DpExchange::kOwnerAllToAll},
     true,
     "",
     ComputeShare::kDp},
}};

// "sc, layerwise, ..., lb-asc or fsdp-a2a" (`last`: the separator before the final name).
std::string name_list(const char* last) {
  std::string out;
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (i > 0) out += i + 1 == kTable.size() ? last : ", ";
    out += kTable[i].name;
  }
  return out;
}

std::string sharding_list() {
  std::vector<std::string> names;
  for (const StrategyInfo& s : kTable)
    if (s.shards_params) names.emplace_back(s.name);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

std::span<const StrategyInfo> strategy_table() {
  return kTable;
}

const StrategyInfo& strategy_info(Strategy strategy) {
  for (const StrategyInfo& s : kTable)
    if (s.strategy == strategy) return s;
  CANZONA_CHECK(false, "unknown strategy ", static_cast<int>(strategy));
  return kTable[0];
}

StrategyParts strategy_parts(Strategy strategy, LayerwiseTp layerwise_tp) {
  StrategyParts parts = strategy_info(strategy).parts;
  if (strategy == Strategy::kLayerwise && layerwise_tp == LayerwiseTp::kLayerSharded)
    parts.tp_exchange = TpExchange::kMicroGroups;
  return parts;
}

std::int64_t compute_ranks(Strategy strategy, int dp, int tp) {
  switch (strategy_info(strategy).compute_share) {
    case ComputeShare::kNone:
      return 1;
    case ComputeShare::kDp:
      return dp;
    case ComputeShare::kGrid:
      break;
  }
  return std::int64_t{dp} * tp;
}

Strategy parse_strategy(const std::string& name) {
  for (const StrategyInfo& s : kTable)
    if (name == s.name) return s.strategy;
  throw UsageError(str("unknown strategy '", name, "' (expected ", name_list(" or "), ")"));
}

std::vector<Strategy> parse_strategy_list(const std::string& text) {
  std::vector<Strategy> out;
  if (text == "all") {
    for (const StrategyInfo& s : kTable) out.push_back(s.strategy);
    return out;
  }
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) out.push_back(parse_strategy(text.substr(begin, comma - begin)));
    begin = comma + 1;
  }
  CANZONA_REQUIRE(!out.empty(), "--strategy: give ", name_list(", "), ", a comma list or all");
  return out;
}

const char* to_string(Strategy strategy) {
  return strategy_info(strategy).name;
}

int strategy_name_width() {
  std::size_t width = 0;
  for (const StrategyInfo& info : strategy_table())
    width = std::max(width, std::string_view(info.name).size());
  return static_cast<int>(width);
}

void check_zero_stage(ZeroStage stage, std::span<const Strategy> strategies) {
  if (stage != ZeroStage::kThree) return;
  for (Strategy s : strategies) {
    const StrategyInfo& info = strategy_info(s);
    CANZONA_REQUIRE(info.shards_params, "--zero-stage 3: strategy ", info.name, info.no_zero3,
                    "; ZeRO-3 runs ", sharding_list());
  }
}

std::vector<Strategy> strategies_for_stage(const std::string& list, ZeroStage stage) {
  std::vector<Strategy> out = parse_strategy_list(list);
  if (stage == ZeroStage::kThree && list == "all")
    std::erase_if(out, [](Strategy s) { return !strategy_info(s).shards_params; });
  check_zero_stage(stage, out);
  return out;
}

}  // namespace canzona::plan
