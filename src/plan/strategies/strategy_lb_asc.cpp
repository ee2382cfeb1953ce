// lb-asc: Canzona with load balancing. Reduce-Scatter with the plan's variable cuts, micro groups,
// a bucket All-Gather. How the cuts and groups are chosen is the planner variant's (--planner):
// ours (variant_canzona.cpp), the authors' code (variant_megatron_canzona.cpp) or the paper's
// algorithms (variant_paper.cpp).
#include "canzona/common/error.h"
#include "strategies/strategies.h"
#include "variants/never_behind.h"

namespace canzona::plan::detail {
namespace {

const VariantPlanner& variant_planner(PlannerVariant variant) {
  switch (variant) {
    case PlannerVariant::kPaper:
      return kPaperVariant;
    case PlannerVariant::kMegatronCanzona:
      return kMegatronCanzonaVariant;
    case PlannerVariant::kCanzona:
      return kCanzonaVariant;
  }
  CANZONA_CHECK(false, "unknown planner variant ", static_cast<int>(variant));
  return kCanzonaVariant;
}

}  // namespace

StagePlan plan_lb_asc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  const VariantPlanner& variant = variant_planner(o.variant);
  std::vector<LaidCuts> candidates = variant.dp_cut_candidates(model, stage.layout, stage.tasks, o);
  if (candidates.size() == 1)
    return stage_with_cuts(model, stage, std::move(candidates.front()), o, variant.tp_groups);
  return never_behind(model, stage, std::move(candidates), o, variant.tp_groups);
}

}  // namespace canzona::plan::detail
