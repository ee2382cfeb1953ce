// A random model for the plan's property tests (fixed seeds): 1-40 params, element-wise vectors
// (TP-split or replicated) and matrices (replicated, split on rows or columns, sometimes two row
// pieces), with split dims divisible by tp.
#pragma once

#include <random>
#include <string>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::test_models {

inline model::ModelSpec random_model(std::mt19937& rng, int tp) {
  model::ModelSpec m;
  m.name = "random";
  std::uniform_int_distribution<int> count(1, 40), side(1, 24), kind(0, 4);
  const int n = count(rng);
  for (int i = 0; i < n; ++i) {
    model::ParamSpec p;
    p.name = std::string("p").append(std::to_string(i));
    const int k = kind(rng);
    if (k == 0) {  // element-wise vector
      p.shape = {static_cast<std::int64_t>(side(rng)) * 16};
      p.tp_split_dim = rng() % 2 ? 0 : -1;
      p.optimizer = model::OptimizerClass::kElementwise;
    } else {  // matrix, sometimes replicated, sometimes with two pieces
      p.shape = {static_cast<std::int64_t>(side(rng)) * 8,
                 static_cast<std::int64_t>(side(rng)) * 8};
      p.tp_split_dim = k == 1 ? -1 : (k == 2 ? 0 : 1);
      p.optimizer = model::OptimizerClass::kMatrix;
      if (k == 4) {
        const std::int64_t half = p.shape[0] / 2;
        p.pieces = {{"a", {{0, half}}}, {"b", {{half, p.shape[0]}}}};
      }
    }
    // Make split dims divisible by tp.
    if (p.tp_split_dim >= 0) p.shape[p.tp_split_dim] *= tp;
    m.params.push_back(p);
  }
  return m;
}

// Every strategy (layerwise in both TP modes), and lb-asc with each planner (ours with and without
// re-laid buckets).
struct Case {
  Strategy strategy;
  PlannerVariant variant;
  LayerwiseTp layerwise_tp = LayerwiseTp::kDuplicated;
  bool reorder_buckets = true;
};

inline constexpr Case kCases[] = {
    {Strategy::kSc, PlannerVariant::kCanzona},
    {Strategy::kLayerwise, PlannerVariant::kCanzona},
    {Strategy::kLayerwise, PlannerVariant::kCanzona, LayerwiseTp::kLayerSharded},
    {Strategy::kLayerwisePaper, PlannerVariant::kCanzona},
    {Strategy::kAsc, PlannerVariant::kCanzona},
    {Strategy::kFsdpA2a, PlannerVariant::kCanzona},
    {Strategy::kLbAsc, PlannerVariant::kPaper},
    {Strategy::kLbAsc, PlannerVariant::kMegatronCanzona},
    {Strategy::kLbAsc, PlannerVariant::kCanzona, LayerwiseTp::kDuplicated, false},
    {Strategy::kLbAsc, PlannerVariant::kCanzona}};

}  // namespace canzona::plan::test_models
