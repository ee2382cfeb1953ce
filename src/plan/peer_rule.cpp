// The rule that judges plans against peers (peer_rule.h).
#include "canzona/plan/peer_rule.h"

#include <algorithm>
#include <limits>

#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

using M = PeerMetric;

constexpr std::initializer_list<PeerMetric> kAll = {M::kDpFlops,   M::kDpMemory,   M::kTpFlops,
                                                    M::kGridFlops, M::kGridMemory, M::kBusyFlops,
                                                    M::kBusyMemory};
constexpr std::initializer_list<PeerMetric> kDuplicated = {M::kDpFlops, M::kBusyFlops,
                                                           M::kBusyMemory};

std::array<double, kPeerMetrics> metric_values(const Metrics& m) {
  return {m.dp.flops,    m.dp.memory,      m.tp.flops,       m.grid.flops,
          m.grid.memory, m.max_rank.flops, m.max_rank.memory};
}

}  // namespace

std::initializer_list<PeerMetric> comparable_metrics(bool duplicated_tp) {
  return duplicated_tp ? kDuplicated : kAll;
}

PeerMarks::PeerMarks() {
  best.fill(std::numeric_limits<double>::infinity());
}

void PeerMarks::tighten(const Metrics& m, std::initializer_list<PeerMetric> which) {
  const auto values = metric_values(m);
  for (PeerMetric k : which) {
    const auto i = static_cast<std::size_t>(k);
    best[i] = std::min(best[i], values[i]);
  }
}

int metrics_behind(const Metrics& m, const PeerMarks& marks,
                   std::initializer_list<PeerMetric> which) {
  const auto values = metric_values(m);
  int count = 0;
  for (PeerMetric k : which) {
    const auto i = static_cast<std::size_t>(k);
    count += values[i] > (1.0 + kBehindTolerance) * marks.best[i];
  }
  return count;
}

double grid_score(const Metrics& m) {
  return std::max({m.dp.flops, m.dp.memory, m.grid.flops / m.lower_bound_grid.flops,
                   m.grid.memory / m.lower_bound_grid.memory});
}

std::size_t strongest_peer(std::span<const Peer> peers) {
  CANZONA_CHECK(!peers.empty());
  // The metrics every peer compares on: a peer judged on fewer metrics would be behind on fewer.
  const bool any_duplicated =
      std::any_of(peers.begin(), peers.end(), [](const Peer& p) { return p.duplicated_tp; });
  const std::initializer_list<PeerMetric> shared = comparable_metrics(any_duplicated);
  PeerMarks marks;
  for (const Peer& p : peers) marks.tighten(*p.metrics, shared);
  std::size_t best = 0;
  Standing held;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const Metrics& m = *peers[i].metrics;
    const Standing standing{metrics_behind(m, marks, shared), grid_score(m)};
    if (standing.beats(held)) {
      best = i;
      held = standing;
    }
  }
  return best;
}

}  // namespace canzona::plan
