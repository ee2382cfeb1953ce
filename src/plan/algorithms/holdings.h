// Internal to the plan layer: where a Plan places optimizer state (replan.h, "Terms"), looked up
// per param. Shared by state_movement (movement.cpp) and replan (replan.cpp).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan::detail {

class Holdings {
 public:
  // Throws UsageError "<what>: plan has N owners per stage for a model of M params" when the plan
  // does not fit the model's params. `plan` must outlive this object.
  Holdings(const model::ModelSpec& model, const Plan& plan, const char* what);

  const Plan& plan() const { return *plan_; }
  int dp() const { return plan_->options.dims.dp; }
  int tp() const { return plan_->options.dims.tp; }
  // Stage index of param p, -1 when no stage holds it.
  int stage_of(int p) const { return stage_[p]; }
  // The DP owner of param p in its stage (kDivided, kEveryone or a rank).
  int owner(int p) const;
  // TP-local element count of param p in this plan's layout (0 when not laid out).
  std::int64_t local_numel(int p) const;
  // Local elements [first, second) of element-wise param p that DP rank d updates; empty for
  // d >= dp().
  std::pair<std::int64_t, std::int64_t> part(int p, int d) const;
  // Interior boundaries of element-wise param p's parts (local offsets in (0, numel)).
  std::vector<std::int64_t> interior_cuts(int p) const;
  // The task of (param, piece) in its stage, or nullptr.
  const Task* task(int p, int piece) const;

  // Elements of element-wise param p that rank (d, t) of this plan holds among the local elements
  // [a, b) of TP rank t of a plan with `tp` TP ranks and `numel` local elements (replan.h: global
  // element mapping). 0 when t >= tp() or d >= dp().
  std::int64_t held(const model::ParamSpec& spec, int p, int d, int t, int tp, std::int64_t numel,
                    std::int64_t a, std::int64_t b) const;

 private:
  const Plan* plan_;
  std::vector<int> stage_, bucket_, slot_;  // [param]
  std::vector<std::vector<int>> task_of_;   // [param][piece + 1] task index in its stage, -1
};

}  // namespace canzona::plan::detail
