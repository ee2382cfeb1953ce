// sc: every DP rank updates every param (All-Reduce); every TP rank gathers a TP-split matrix and
// computes it redundantly, so there are no micro groups.
#include "canzona/common/error.h"
#include "strategies.h"

namespace canzona::plan::detail {
namespace {

std::vector<TpGroup> no_groups(const StagePlan&, const std::vector<int>&,
                               const std::vector<TpTask>&, const PlanOptions&,
                               std::vector<double>&) {
  CANZONA_CHECK(false, "sc hosts no task on one TP rank");
  return {};
}

}  // namespace

StagePlan plan_sc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  for (int p : stage.params) stage.owner[p] = kEveryone;
  plan_tp(o, stage, model, no_groups);
  return stage;
}

}  // namespace canzona::plan::detail
