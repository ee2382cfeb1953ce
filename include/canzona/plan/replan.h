// Minimum-movement re-planning: a plan for a new grid (or new options) that keeps as much of an
// old plan's optimizer state where it already is as a stated balance tolerance allows, and the
// measure of how much state a change of plan moves.
//
// Terms. A *holder* of state is a grid rank (stage, DP rank, TP rank). A matrix task's state
// (Task::state_bytes, the matrix optimizer's state of the full matrix) lies on every holder that
// computes it: DP owner (every DP rank for kEveryone) x host (every TP rank for kAllTp). An
// element-wise param's AdamW state lies, element by element, on the DP ranks that update those
// elements (rank_plan.h: slot_part) on every TP rank, in TP-local elements; TP-local element e of
// TP rank t is global element t x local_numel + e of a param split on dim 0, global element e of a
// replicated one. Only optimizer state counts (no fp32 main params, no gradients). A holder
// *receives* the state it holds in the new plan and did not hold in the old one; ranks that exist
// in only one of the two plans hold nothing in the other.
//
// The *from-scratch plan* P* is make_plan(model, options). A rank's *DP load* is the planner's
// cost (PlanOptions::cost.kind) of what it updates summed over its TP ranks: matrix tasks at their
// full cost (x tp when replicated), AdamW elements x tp; its *DP memory* the same in state bytes.
// With cost kind flops these are exactly compute_metrics' DP-axis loads.
#pragma once

#include <cstdint>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::plan {

// Largest --move-tolerance: a plan ten times worse than the from-scratch one is no longer
// "balanced"; beyond this the tolerance only hides mistakes.
inline constexpr double kMaxMoveTolerance = 10.0;

struct ReplanOptions {
  // The re-plan's maximum DP load and DP memory per stage may exceed P*'s by this fraction; each
  // DP rank's busiest TP host may exceed a from-scratch host placement of that rank's tasks by
  // it, and the stage's TP-axis max/mean P*'s by it. Other metrics (the grid's max/mean) are not
  // bounded.
  double tolerance = 0.05;
};

// Throws UsageError "--move-tolerance must be finite and in [0, 10] (got X)" otherwise.
void validate_replan_options(const ReplanOptions& options);

// The plan for `model` under `options` that moves the least state from `old_plan` within the
// tolerance. `old_plan` must be a plan of the same model's params (same count, same indices; its
// grid, strategy and planner may differ; its element-wise local sizes are read from its own
// layout). Strategies without a choice of cuts return P* itself: sc and layerwise (All-Reduce, no
// cuts). For asc and lb-asc:
//   DP: buckets in Algorithm 1's order (descending total load, ties by index) with running loads
//   L_r, M_r. Each bucket's cut positions are its slot starts, its end and, inside element-wise
//   slots the planner may divide (lb-asc --planner canzona), the old plan's and P*'s cut points
//   there. A dynamic program over (rank, position) picks monotone cuts minimising the state bytes
//   the bucket's new DP owners did not own before (then the number of cuts differing from P*'s)
//   subject to L_r + load <= cap and M_r + memory <= memory cap for every rank, the caps being
//   (1 + tolerance) x P*'s maxima. A bucket with no feasible cuts is cut with the smallest
//   possible overshoot. If the finished stage still exceeds a cap, the pass is repeated with
//   caps at half, a quarter and none of the tolerance; if even that fails, P*'s cuts are used.
//   (asc's result therefore need not follow the start-index rule; the runtime takes any cuts.)
//   TP (lb-asc with tp > 1): a DP rank keeps the old host (< new tp) of each task it already
//   owned, largest state first, while its busiest host stays within (1 + tolerance) x a
//   from-scratch LPT placement of its tasks; the rest go LPT onto those loads, then micro groups
//   are packed first-fit by C_max (as balanced_groups). The ranks that keep hosts are the longest
//   prefix 0..k-1 (binary search on k) for which the stage's TP-axis max/mean stays within
//   (1 + tolerance) x P*'s; the others are placed as make_plan does (Algorithm 2 for --planner
//   paper; ours relabelled towards the TP axis's balance). asc keeps round-robin groups.
//   Finally three candidates are compared by state_movement: these cuts with kept hosts, P*'s
//   cuts with kept hosts, and P*; the least moving one within the TP tolerance wins (the first on
//   ties), so the result never moves more than P*.
// Work: O(R x m^2) per bucket for m cut positions (a bucket over 5e7 is cut as P* does), a few
// host placements per stage, plus make_plan. Deterministic. Throws as make_plan,
// validate_replan_options, and UsageError when `old_plan` does not have model.params.size() owners
// per stage.
Plan replan(const model::ModelSpec& model, const PlanOptions& options, const Plan& old_plan,
            const ReplanOptions& replan_options);

struct Movement {
  double moved_state_bytes = 0.0;   // state bytes holders of `to` receive
  double total_state_bytes = 0.0;   // all state bytes held in `to`, counted per holder
  int kept_tasks = 0;               // matrix tasks of `to` whose every holder already held them
  int moved_tasks = 0;              // the other matrix tasks of `to`
  double moved_matrix_bytes = 0.0;  // part of moved_state_bytes from matrix tasks
  double moved_elementwise_bytes = 0.0;  // part from element-wise params
};

// The state `to` places on holders that `from` did not place there (see Terms). A matrix task is
// matched by (param, piece); a `to` task without a match in `from` is wholly received. Both plans
// must be of `model`'s params (owner lists of model.params.size()); element-wise params split on
// dim 1 are compared only when both plans have the same tp (otherwise wholly received). A MoE
// plan's expert buffer counts once per EP rank (each EP rank's experts move as EP rank 0's), all
// received when `from` has no expert buffer or other expert groups (EP, ETP).
Movement state_movement(const model::ModelSpec& model, const Plan& from, const Plan& to);

}  // namespace canzona::plan
