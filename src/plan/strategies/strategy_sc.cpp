// sc: every DP rank updates every param (All-Reduce); every TP rank gathers a TP-split matrix and
// computes it redundantly, so there are no micro groups.
#include "strategies/strategies.h"

namespace canzona::plan::detail {

StagePlan plan_sc(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  for (int p : stage.params) stage.owner[p] = kEveryone;
  plan_tp(o, stage, model, no_tp_groups);
  return stage;
}

}  // namespace canzona::plan::detail
