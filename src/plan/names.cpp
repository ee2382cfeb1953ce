// The names of the planner's enums on the command line and in reports, one table per enum.
#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "canzona/common/error.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {
namespace {

template <typename E, std::size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

constexpr Names<Strategy, 6> kStrategies{{{Strategy::kSc, "sc"},
                                          {Strategy::kLayerwise, "layerwise"},
                                          {Strategy::kLayerwisePaper, "layerwise-paper"},
                                          {Strategy::kAsc, "asc"},
                                          {Strategy::kLbAsc, "lb-asc"},
                                          {Strategy::kFsdpA2a, "fsdp-a2a"}}};
constexpr Names<PlannerVariant, 3> kVariants{
    {{PlannerVariant::kPaper, "paper"},
     {PlannerVariant::kMegatronCanzona, "megatron-canzona"},
     {PlannerVariant::kCanzona, "canzona"}}};
constexpr Names<LayerwiseBuckets, 2> kLayerwiseBuckets{
    {{LayerwiseBuckets::kSoftMinimum, "soft-min"}, {LayerwiseBuckets::kFixed, "fixed"}}};
constexpr Names<LayerwiseTp, 2> kLayerwiseTp{
    {{LayerwiseTp::kDuplicated, "duplicated"}, {LayerwiseTp::kLayerSharded, "layer-sharded"}}};
constexpr Names<bool, 2> kBucketOrders{{{true, "free"}, {false, "keep"}}};

template <typename E, std::size_t N>
const char* name_of(const Names<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name.data();  // every name is a literal: NUL-terminated
  return "?";
}

// The value called `name`, or nullptr.
template <typename E, std::size_t N>
const E* value_of(const Names<E, N>& names, const std::string& name) {
  for (const auto& entry : names)
    if (entry.second == name) return &entry.first;
  return nullptr;
}

}  // namespace

Strategy parse_strategy(const std::string& name) {
  if (const Strategy* s = value_of(kStrategies, name)) return *s;
  throw UsageError(str("unknown strategy '", name,
                       "' (expected sc, layerwise, layerwise-paper, asc, lb-asc or fsdp-a2a)"));
}

std::vector<Strategy> parse_strategy_list(const std::string& text) {
  std::vector<Strategy> out;
  if (text == "all") {
    for (const auto& entry : kStrategies) out.push_back(entry.first);
    return out;
  }
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) out.push_back(parse_strategy(text.substr(begin, comma - begin)));
    begin = comma + 1;
  }
  CANZONA_REQUIRE(!out.empty(),
                  "--strategy: give sc, layerwise, layerwise-paper, asc, lb-asc, fsdp-a2a, a comma "
                  "list or all");
  return out;
}

const char* to_string(Strategy strategy) {
  return name_of(kStrategies, strategy);
}

PlannerVariant parse_variant(const std::string& name) {
  if (const PlannerVariant* v = value_of(kVariants, name)) return *v;
  throw UsageError(
      str("unknown planner '", name, "' (expected canzona, megatron-canzona or paper)"));
}

const char* to_string(PlannerVariant variant) {
  return name_of(kVariants, variant);
}

LayerwiseBuckets parse_layerwise_buckets(const std::string& name) {
  if (const LayerwiseBuckets* b = value_of(kLayerwiseBuckets, name)) return *b;
  throw UsageError(str("unknown --layerwise-buckets '", name, "' (expected soft-min or fixed)"));
}

const char* to_string(LayerwiseBuckets mode) {
  return name_of(kLayerwiseBuckets, mode);
}

LayerwiseTp parse_layerwise_tp(const std::string& name) {
  if (const LayerwiseTp* t = value_of(kLayerwiseTp, name)) return *t;
  throw UsageError(
      str("unknown --layerwise-tp '", name, "' (expected duplicated or layer-sharded)"));
}

const char* to_string(LayerwiseTp mode) {
  return name_of(kLayerwiseTp, mode);
}

bool parse_bucket_order(const std::string& name) {
  if (const bool* free = value_of(kBucketOrders, name)) return *free;
  throw UsageError(str("unknown --bucket-order '", name, "' (expected free or keep)"));
}

}  // namespace canzona::plan
