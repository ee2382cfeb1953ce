// The rule that judges plans against peers (docs/design.md section 1: baselines at their
// strongest). Our planner's never-behind selection uses it to choose among its candidates, and
// `canzona plan --svg` to pick the strongest peer it draws beside ours.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <span>

#include "canzona/plan/metrics.h"

namespace canzona::plan {

// The metrics a plan is judged on: the five max/mean ratios a peer can be compared on and the
// busiest rank's FLOPs and memory.
enum class PeerMetric {
  kDpFlops,
  kDpMemory,
  kTpFlops,
  kGridFlops,
  kGridMemory,
  kBusyFlops,
  kBusyMemory
};
inline constexpr int kPeerMetrics = 7;

// Every metric of a peer compares, except for Megatron-LM's layer-wise plan with duplicated TP:
// it computes and stores every TP-split update on every TP rank, so its TP and grid max/mean are
// 1 and its memory max/mean are over a mean inflated by tp x the matrix state. Only its DP FLOPs
// ratio (matrix work, all inflated alike) and its busiest rank compare.
std::initializer_list<PeerMetric> comparable_metrics(bool duplicated_tp);

// The lowest value any peer reaches on each metric (infinity where no peer compares).
struct PeerMarks {
  std::array<double, kPeerMetrics> best;
  PeerMarks();
  // Lowers `best` on `which` to the values of `m`.
  void tighten(const Metrics& m, std::initializer_list<PeerMetric> which);
};

// A metric counts as behind when it exceeds the mark by more than this fraction
// (scripts/plan-sweep.sh marks the same).
inline constexpr double kBehindTolerance = 0.005;

// On how many of `which` the plan with metrics `m` is behind the marks.
int metrics_behind(const Metrics& m, const PeerMarks& marks,
                   std::initializer_list<PeerMetric> which);

// How good a plan is on the whole grid: the worst of DP FLOPs and memory max/mean and grid FLOPs
// and memory max/mean relative to their lower bounds (1 is perfect).
double grid_score(const Metrics& m);

// A plan's standing under the rule: behind on fewer metrics wins, then a lower grid score (by more
// than rounding); on a tie the standing already held wins.
struct Standing {
  int behind = std::numeric_limits<int>::max();
  double score = std::numeric_limits<double>::infinity();
  bool beats(const Standing& held) const {
    return behind < held.behind || (behind == held.behind && score < held.score * (1.0 - 1e-12));
  }
};

// One peer's plan as the rule sees it.
struct Peer {
  const Metrics* metrics = nullptr;
  bool duplicated_tp = false;  // Megatron-LM's layer-wise plan with duplicated TP
};

// The strongest of `peers` by the rule, on the metrics every one of them compares on (all seven,
// or the duplicated-TP layer-wise plan's three when it is among them): behind the others' best on
// the fewest, then the lowest grid score, then the earliest. `peers` holds at least one.
std::size_t strongest_peer(std::span<const Peer> peers);

}  // namespace canzona::plan
