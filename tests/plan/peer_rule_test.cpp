// The rule that judges plans against peers (peer_rule.h), on hand-made metrics: the strongest
// peer is behind the others' best on the fewest of the metrics every peer compares on, then has
// the lowest grid score; Megatron-LM's duplicated-TP layer-wise plan compares on DP FLOPs and the
// busiest rank only.
#include "canzona/plan/peer_rule.h"

#include <gtest/gtest.h>

#include <vector>

namespace canzona::plan {
namespace {

// A plan's metrics from the seven the rule reads; lower bounds 1 (grid score = worst ratio).
Metrics metrics(double dp_flops, double dp_memory, double tp_flops, double grid_flops,
                double grid_memory, double busy_flops, double busy_memory) {
  Metrics m;
  m.dp = {dp_memory, dp_flops};
  m.tp = {1.0, tp_flops};
  m.grid = {grid_memory, grid_flops};
  m.max_rank = {busy_flops, busy_memory};
  return m;
}

TEST(PeerRule, TheStrongestIsBehindOnTheFewestMetricsEveryPeerComparesOn) {
  // The qwen3-32b DP 32 x TP 8 table's shape, with the duplicated layer-wise plan among the peers:
  // they are judged on DP FLOPs and the busiest rank. Marks: DP FLOPs 1.1 (layer-wise), busiest
  // rank 28 / 1.7 (megatron-canzona). Layer-wise: behind on the busiest rank's FLOPs and memory
  // (2). Megatron-canzona: behind on DP FLOPs only (1). The paper's: behind on all three.
  const Metrics layerwise = metrics(1.1, 1.08, 1.0, 1.1, 1.08, 100, 4.0);
  const Metrics authors = metrics(1.3, 1.7, 1.7, 2.0, 3.4, 28, 1.7);
  const Metrics paper = metrics(3.8, 3.1, 4.8, 6.1, 5.9, 84, 2.9);
  const std::vector<Peer> peers{{&layerwise, true}, {&authors, false}, {&paper, false}};
  EXPECT_EQ(strongest_peer(peers), 1u);
  // Were the duplicated plan compared on every metric, its TP, grid and DP memory ratios near 1
  // would put the authors' plan behind on five and make the layer-wise plan the strongest.
  const std::vector<Peer> as_if_comparable{{&layerwise, false}, {&authors, false}, {&paper, false}};
  EXPECT_EQ(strongest_peer(as_if_comparable), 0u);
}

TEST(PeerRule, EveryPeerIsJudgedOnTheSameMetrics) {
  // Layer-wise (duplicated) is behind on the busiest rank's FLOPs and memory. A is behind on DP
  // FLOPs alone among the three shared metrics, though also on DP memory, TP and grid among all
  // seven (B's are lower); B is behind on DP FLOPs and both busiest-rank values. Counting each peer
  // on its own metrics would pick layer-wise (2 against A's 5 and B's 3); on the shared three, A.
  const Metrics layerwise = metrics(1.0, 1.0, 1.0, 1.0, 1.0, 100, 4.0);
  const Metrics a = metrics(1.1, 1.5, 1.6, 1.2, 1.6, 30, 1.5);
  const Metrics b = metrics(1.2, 1.2, 1.2, 1.1, 1.2, 31, 1.6);
  EXPECT_EQ(strongest_peer(std::vector<Peer>{{&layerwise, true}, {&a, false}, {&b, false}}), 1u);
}

TEST(PeerRule, ATieOnMetricsBehindGoesToTheLowerGridScoreThenTheEarlier) {
  // Each is behind the other on one metric; b's worst ratio (grid score) is lower.
  const Metrics a = metrics(1.0, 1.5, 1.0, 1.0, 1.0, 10, 1.0);
  const Metrics b = metrics(1.2, 1.2, 1.0, 1.0, 1.0, 10, 1.0);
  EXPECT_EQ(grid_score(a), 1.5);
  EXPECT_EQ(grid_score(b), 1.2);
  EXPECT_EQ(strongest_peer(std::vector<Peer>{{&a, false}, {&b, false}}), 1u);
  EXPECT_EQ(strongest_peer(std::vector<Peer>{{&b, false}, {&a, false}}), 0u);
  EXPECT_EQ(strongest_peer(std::vector<Peer>{{&a, false}, {&a, false}}), 0u);
}

TEST(PeerRule, BehindMeansMoreThanHalfAPercentAboveTheMark) {
  PeerMarks marks;
  const Metrics best = metrics(1.0, 1.0, 1.0, 1.0, 1.0, 100, 2.0);
  marks.tighten(best, comparable_metrics(false));
  EXPECT_EQ(metrics_behind(metrics(1.005, 1.0, 1.0, 1.0, 1.0, 100, 2.0), marks,
                           comparable_metrics(false)),
            0);
  EXPECT_EQ(metrics_behind(metrics(1.006, 1.0, 1.0, 1.0, 1.0, 100.6, 2.0), marks,
                           comparable_metrics(false)),
            2);
  // A metric no peer compares on has no mark: nothing is behind on it.
  PeerMarks duplicated_only;
  duplicated_only.tighten(best, comparable_metrics(true));
  EXPECT_EQ(metrics_behind(metrics(1.0, 9.0, 9.0, 9.0, 9.0, 100, 2.0), duplicated_only,
                           comparable_metrics(false)),
            0);
}

}  // namespace
}  // namespace canzona::plan
