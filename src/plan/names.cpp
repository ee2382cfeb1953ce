// The names of the planner's enums on the command line and in reports, one table per enum.
#include <array>
#include <string_view>
#include <utility>

#include "canzona/common/error.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {
namespace {

template <typename E, std::size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

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
