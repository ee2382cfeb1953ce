// Checks made before the first collective of a strategy, shared by every launch (`canzona
// run`/`compare` and `canzona train`): the plan fits the model and the grid (validate_plan), and
// every rank computed the same plan (check_plan_agreement). Both throw PlanAgreementError,
// identically on every rank, so the caller can report it once and end the job without an abort.
#pragma once

#include "canzona/comm/communicator.h"
#include "canzona/common/error.h"
#include "canzona/common/parallel_dims.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::launch {

// A usage error every rank raises identically (report it once).
class PlanAgreementError : public UsageError {
 public:
  using UsageError::UsageError;
};

// Throws PlanAgreementError naming the rule when the plan does not fit the model or the grid:
// dp, tp or pp differing from the grid, stages that do not hold every param once, a layout slot
// whose size is not the param's TP-local size, cuts that are not monotone or split a matrix param,
// owners or hosts out of range, matrix params without tasks, micro groups that do not list
// exactly the hosted tasks; every stage is checked. A MoE plan's stages hold every param but the
// experts; check plan.expert->plan against its EP rank's expert model (model::expert_part) and
// the expert grid with another call.
void validate_plan(const model::ModelSpec& model, const plan::Plan& plan, const ParallelDims& grid);

// Collective over `world` (control traffic only): every rank contributes plan_hash(plan).
// Throws PlanAgreementError "ranks disagree on the plan: rank R has plan hash H1, rank 0 has H0
// ..." naming the lowest disagreeing rank.
void check_plan_agreement(comm::Communicator& world, const plan::Plan& plan);

}  // namespace canzona::launch
