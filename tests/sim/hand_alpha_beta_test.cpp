// The simulator against numbers derived by hand from the α-β formulas it documents
// (collectives.h, simulate.h, docs/simulator.md), on a tiny model planned by the real planner.
//
// Every expected value below is written out from the formula with the inputs, and its value is
// given in the comment, computed by hand; no simulator helper (collectives, task_seconds, ...) is
// called to make an expectation. A dropped (p-1)/p factor, a lost α term, a wrong byte size, a
// wrong link or a wrong FLOP rate changes one of these numbers.
//
// The configuration, all round numbers:
//   model    four 1024 x 1024 Muon matrices in one layer (two column-, two row-parallel), no
//            element-wise params; one bucket of N = 4 * 2^20 = 4,194,304 elements (no padding:
//            N is a multiple of lcm(dp, 128))
//   cluster  8 GPUs per node; NVLink α = 10 µs, β = 100 GB/s = 1e11 B/s; InfiniBand α = 20 µs,
//            β = 10 GB/s = 1e10 B/s; forward-backward at 100 TFLOP/s bf16 x 0.5 = 5e13 FLOP/s;
//            optimizer at 10 TFLOP/s TF32 x 1.0 = 1e13 FLOP/s plus 100 µs per task
//   workload seq_len 1024, one sequence per micro batch, two micro batches per DP replica, no
//            attention FLOPs; gradients fp32 (4 B), params gathered in bf16 (2 B)
//
// Ring collectives on p ranks of buffer n bytes (collectives.h):
//   Reduce-Scatter = All-Gather = (p-1)/p * n/β + (p-1) α;  All-Reduce = twice that
//   uneven shards c_r (grouped, the default): (n - min c)/β + (p-1) α
//   All-to-All = (p-1) α + (max bytes a rank sends or receives) / β
// One Muon task of an m x n matrix (m >= n): ns_steps (4 m n^2 + 2 n^3) FLOPs; here
//   5 * 6 * 2^30 = 32,212,254,720 FLOPs -> 32,212,254,720 / 1e13 + 100e-6 = 3.321225472e-3 s.
// One micro batch: 6 * N * 1024 tokens / (tp * 5e13) = 5.1539607552e-4 s / tp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "canzona/plan/plan.h"
#include "canzona/sim/simulate.h"

namespace canzona::sim {
namespace {

constexpr double kN = 4.0 * 1024 * 1024;            // elements of the four matrices (one bucket)
constexpr double kMatrixBytes = 4.0 * 1024 * 1024;  // one full 1024 x 1024 fp32 gradient
constexpr double kAlphaNv = 10e-6, kBetaNv = 1e11;  // NVLink
constexpr double kAlphaIb = 20e-6, kBetaIb = 1e10;  // InfiniBand
constexpr double kMuonFlops = 5.0 * (4.0 * 1024 * 1024 * 1024 + 2.0 * 1024 * 1024 * 1024);
constexpr double kTaskS = kMuonFlops / 1e13 + 100e-6;    // 3.321225472e-3 s
constexpr double kMicroBatchS = 6.0 * kN * 1024 / 5e13;  // 5.1539607552e-4 s at tp = 1

// Relative comparison: the simulator sums the same terms in another order.
void expect_close(double actual, double expected, const char* what) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::fabs(expected) + 1e-18) << what;
}

model::ModelSpec four_matrices() {
  model::ModelSpec m;
  m.name = "four-matrices";
  for (int i = 0; i < 4; ++i) {
    m.params.push_back({"decoder.layers.0.w" + std::to_string(i) + ".weight",
                        {1024, 1024},
                        i % 2,
                        model::OptimizerClass::kMatrix,
                        0,
                        -1,
                        {}});
  }
  return m;
}

Cluster round_cluster() {
  Cluster c;
  c.name = "round";
  c.gpus_per_node = 8;
  c.intra_node = {100.0, 10.0};
  c.inter_node = {10.0, 20.0};
  c.device.name = "round";
  c.device.bf16_tflops = 100.0;
  c.device.tf32_tflops = 10.0;
  c.device.fp32_tflops = 1.0;
  c.device.hbm_GBps = 1000.0;
  c.device.matmul_efficiency = 0.5;
  c.device.optimizer_efficiency = 1.0;
  c.device.optimizer_precision = Precision::kTf32;
  c.device.optimizer_task_overhead_us = 100.0;
  c.device.factorization_tflops = 1.0;
  return c;
}

// Two micro batches per DP replica of one 1024-token sequence each.
Workload two_micro_batches(int dp) {
  Workload w;
  w.seq_len = 1024;
  w.micro_batch = 1;
  w.tokens = 1024 * 2 * dp;
  w.attention_flops = false;
  return w;
}

plan::Plan make(plan::Strategy strategy, int dp, int tp) {
  plan::PlanOptions options;
  options.strategy = strategy;
  options.dims.dp = dp;
  options.dims.tp = tp;
  return plan::make_plan(four_matrices(), options);
}

// The plan facts the hand derivations rely on (a failure here is the planner's, not the
// simulator's).
void expect_one_bucket(const plan::Plan& p, int tp) {
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].layout.buckets.size(), 1u);
  ASSERT_EQ(p.stages[0].layout.buckets[0].numel, static_cast<std::int64_t>(kN) / tp);
  ASSERT_EQ(p.stages[0].tasks.size(), 4u);
}

// lb-asc on DP=4 x TP=1 (one NVLink node): each DP rank owns one whole matrix.
TEST(HandAlphaBeta, LbAscDp4ReduceScatterAllGatherAndOneTaskPerRank) {
  const plan::Plan p = make(plan::Strategy::kLbAsc, 4, 1);
  expect_one_bucket(p, 1);
  ASSERT_EQ(p.stages[0].cuts[0],
            (std::vector<std::int64_t>{0, 1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  const Breakdown r = simulate(four_matrices(), p, round_cluster(), two_micro_batches(4));

  EXPECT_EQ(r.micro_batches, 2);  // ceil(8192 tokens / (1024 * 1 * 4))
  // 1F1B on one stage: 2 micro batches * 5.1539607552e-4 = 1.03079215104e-3 s.
  expect_close(r.fwd_bwd_s, 2 * kMicroBatchS, "fwd_bwd_s");
  expect_close(r.fwd_bwd_s, 1.03079215104e-3, "fwd_bwd_s literal");
  // FLOPs of the iteration, whole cluster: 6 N per token * 1024 tokens * 2 micro batches * 4.
  expect_close(r.fwd_bwd_flops, 6.0 * kN * 1024 * 2 * 4, "fwd_bwd_flops");

  // Reduce-Scatter of the fp32 bucket (equal 2^20-element shards, so the grouped uneven
  // collective is the plain ring), p = 4 on NVLink:
  //   3/4 * 16,777,216 B / 1e11 + 3 * 10e-6 = 1.2582912e-4 + 3e-5 = 1.5582912e-4 s.
  const double reduce_scatter = (4.0 - 1) / 4 * (kN * 4) / kBetaNv + (4 - 1) * kAlphaNv;
  expect_close(reduce_scatter, 1.5582912e-4, "reduce-scatter by hand");
  // All-Gather of the bf16 params: 3/4 * 8,388,608 / 1e11 + 3e-5 = 9.291456e-5 s.
  const double all_gather = (4.0 - 1) / 4 * (kN * 2) / kBetaNv + (4 - 1) * kAlphaNv;
  expect_close(all_gather, 9.291456e-5, "all-gather by hand");
  // One bucket: ready exactly when the last backward ends, needed exactly when forward starts,
  // so both are fully exposed.
  expect_close(r.dp_comm_exposed_s, reduce_scatter + all_gather, "dp_comm_exposed_s");
  expect_close(r.dp_comm_total_s, reduce_scatter + all_gather, "dp_comm_total_s");

  // Optimizer makespan: one Muon task per rank, no TP, no element-wise params.
  expect_close(r.optimizer_s, kTaskS, "optimizer_s");
  expect_close(r.optimizer_s, 3.321225472e-3, "optimizer_s literal");
  EXPECT_EQ(r.tp_comm_s, 0.0);
  EXPECT_EQ(r.param_sync_s, 0.0);
  expect_close(r.optimizer_rank_max_s, kTaskS, "optimizer_rank_max_s");
  expect_close(r.optimizer_rank_mean_s, kTaskS, "optimizer_rank_mean_s");

  // 1.03079215104e-3 + 1.5582912e-4 + 9.291456e-5 + 3.321225472e-3 = 4.60076130304e-3 s.
  expect_close(r.iteration_s, 4.60076130304e-3, "iteration_s");
}

// lb-asc on DP=8 x TP=1: exactly one full node, so the DP ring still runs on NVLink. Four ranks
// own one matrix each and four own nothing: the uneven (grouped) Reduce-Scatter pays n - min c
// with min c = 0, i.e. the whole bucket, on the busiest link.
TEST(HandAlphaBeta, LbAscDp8FillsOneNodeWithEmptyShards) {
  const plan::Plan p = make(plan::Strategy::kLbAsc, 8, 1);
  expect_one_bucket(p, 1);
  const auto& cuts = p.stages[0].cuts[0];
  ASSERT_EQ(cuts.size(), 9u);
  int full = 0, empty = 0;
  for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
    full += cuts[r + 1] - cuts[r] == (1 << 20);
    empty += cuts[r + 1] == cuts[r];
  }
  ASSERT_EQ(full, 4);
  ASSERT_EQ(empty, 4);
  const Breakdown r = simulate(four_matrices(), p, round_cluster(), two_micro_batches(8));
  EXPECT_EQ(r.micro_batches, 2);  // ceil(16384 tokens / (1024 * 1 * 8))
  // (n - min c) / β + (p-1) α = 16,777,216 / 1e11 + 7 * 10e-6 = 1.6777216e-4 + 7e-5
  //   = 2.3777216e-4 s (fp32 gradients);
  // 8,388,608 / 1e11 + 7e-5 = 1.5388608e-4 s (bf16 params).
  const double reduce_scatter = (kN * 4 - 0) / kBetaNv + (8 - 1) * kAlphaNv;
  const double all_gather = (kN * 2 - 0) / kBetaNv + (8 - 1) * kAlphaNv;
  expect_close(reduce_scatter, 2.3777216e-4, "reduce-scatter-v by hand");
  expect_close(all_gather, 1.5388608e-4, "all-gather-v by hand");
  expect_close(r.dp_comm_exposed_s, reduce_scatter + all_gather, "dp_comm_exposed_s");
  expect_close(r.optimizer_s, kTaskS, "optimizer_s");
  expect_close(r.optimizer_rank_mean_s, kTaskS / 2, "optimizer_rank_mean_s");  // 4 of 8 busy
  // 1.03079215104e-3 + 2.3777216e-4 + 1.5388608e-4 + 3.321225472e-3 = 4.74367586304e-3 s.
  expect_close(r.iteration_s, 4.74367586304e-3, "iteration_s");
}

// sc on the same grid: All-Reduce of the whole fp32 bucket, every rank computes all four tasks.
TEST(HandAlphaBeta, ScDp4AllReduceAndEveryTaskEverywhere) {
  const plan::Plan p = make(plan::Strategy::kSc, 4, 1);
  expect_one_bucket(p, 1);
  const Breakdown r = simulate(four_matrices(), p, round_cluster(), two_micro_batches(4));

  // 2 * 3/4 * 16,777,216 / 1e11 + 2 * 3 * 10e-6 = 2.5165824e-4 + 6e-5 = 3.1165824e-4 s.
  const double all_reduce = 2.0 * (4 - 1) / 4 * (kN * 4) / kBetaNv + 2.0 * (4 - 1) * kAlphaNv;
  expect_close(all_reduce, 3.1165824e-4, "all-reduce by hand");
  expect_close(r.dp_comm_exposed_s, all_reduce, "dp_comm_exposed_s");
  expect_close(r.dp_comm_total_s, all_reduce, "dp_comm_total_s");
  // 4 * 3.321225472e-3 = 1.3284901888e-2 s on every rank.
  expect_close(r.optimizer_s, 4 * kTaskS, "optimizer_s");
  expect_close(r.optimizer_rank_max_s, 4 * kTaskS, "optimizer_rank_max_s");
  expect_close(r.optimizer_rank_mean_s, 4 * kTaskS, "optimizer_rank_mean_s");
  EXPECT_EQ(r.param_sync_s, 0.0);
  // 1.03079215104e-3 + 3.1165824e-4 + 1.3284901888e-2 = 1.462735227904e-2 s.
  expect_close(r.iteration_s, 1.462735227904e-2, "iteration_s");
}

// The whole-iteration comparison of the two: sc / lb-asc = 1.462735227904e-2 / 4.60076130304e-3.
TEST(HandAlphaBeta, ScVersusLbAscIterationOnTheTinyConfiguration) {
  const Cluster c = round_cluster();
  const Breakdown sc =
      simulate(four_matrices(), make(plan::Strategy::kSc, 4, 1), c, two_micro_batches(4));
  const Breakdown lb =
      simulate(four_matrices(), make(plan::Strategy::kLbAsc, 4, 1), c, two_micro_batches(4));
  expect_close(sc.iteration_s / lb.iteration_s, 1.462735227904e-2 / 4.60076130304e-3, "ratio");
  // Optimizer step: 4 tasks vs 1 task.
  expect_close(sc.optimizer_step_s / lb.optimizer_step_s, 4.0, "optimizer step ratio");
}

// lb-asc on DP=1 x TP=2: the four tasks are hosted two per TP rank in one micro group (8 MiB per
// host, far below C_max = 512 MiB); one fused All-to-All gathers, one scatters.
TEST(HandAlphaBeta, LbAscTp2AllToAllOfOneMicroGroup) {
  const plan::Plan p = make(plan::Strategy::kLbAsc, 1, 2);
  expect_one_bucket(p, 2);
  ASSERT_EQ(p.stages[0].groups.size(), 1u);
  ASSERT_EQ(p.stages[0].groups[0].size(), 1u);
  int on_host0 = 0;
  for (const auto& t : p.stages[0].tasks) on_host0 += t.host == 0;
  ASSERT_EQ(on_host0, 2);

  for (bool pipelined : {true, false}) {
    Workload w = two_micro_batches(1);
    w.tp_pipeline = pipelined;
    const Breakdown r = simulate(four_matrices(), p, round_cluster(), w);
    // TP halves the forward-backward: 2 * 5.1539607552e-4 / 2 = 5.1539607552e-4 s.
    expect_close(r.fwd_bwd_s, 2 * kMicroBatchS / 2, "fwd_bwd_s");
    EXPECT_EQ(r.dp_comm_exposed_s, 0.0);  // p = 1: no DP collective
    // Each host receives half of each of its two full fp32 matrices and sends half of each of
    // the other host's two: 2 * 4,194,304 / 2 = 4,194,304 B either way. p = 2 on NVLink:
    //   (2-1) * 10e-6 + 4,194,304 / 1e11 = 1e-5 + 4.194304e-5 = 5.194304e-5 s.
    const double all_to_all = (2 - 1) * kAlphaNv + (2 * kMatrixBytes / 2) / kBetaNv;
    expect_close(all_to_all, 5.194304e-5, "all-to-all by hand");
    // One group: gather, two tasks per host, scatter; nothing to overlap with.
    expect_close(r.optimizer_s, 2 * kTaskS, "optimizer_s");  // 6.642450944e-3 s
    expect_close(r.tp_comm_s, 2 * all_to_all, "tp_comm_s");  // 1.0388608e-4 s
    expect_close(r.tp_comm_pipelined_s, 2 * all_to_all, "tp_comm_pipelined_s");
    expect_close(r.tp_comm_sequential_s, 2 * all_to_all, "tp_comm_sequential_s");
    EXPECT_EQ(r.micro_groups, 1);
    // 5.1539607552e-4 + 6.642450944e-3 + 1.0388608e-4 = 7.26173309952e-3 s.
    expect_close(r.iteration_s, 7.26173309952e-3, "iteration_s");
  }
}

// sc on DP=1 x TP=2: every TP rank ring-All-Gathers each TP-split gradient (p = 2) and computes
// all four tasks itself.
TEST(HandAlphaBeta, ScTp2RingAllGatherPerTask) {
  const plan::Plan p = make(plan::Strategy::kSc, 1, 2);
  expect_one_bucket(p, 2);
  const Breakdown r = simulate(four_matrices(), p, round_cluster(), two_micro_batches(1));
  // (2-1)/2 * 4,194,304 / 1e11 + (2-1) * 10e-6 = 2.097152e-5 + 1e-5 = 3.097152e-5 s per task.
  const double all_gather = (2.0 - 1) / 2 * kMatrixBytes / kBetaNv + (2 - 1) * kAlphaNv;
  expect_close(all_gather, 3.097152e-5, "all-gather by hand");
  expect_close(r.tp_comm_s, 4 * all_gather, "tp_comm_s");  // 1.2388608e-4 s
  expect_close(r.optimizer_s, 4 * kTaskS, "optimizer_s");  // 1.3284901888e-2 s
  // 5.1539607552e-4 + 1.3284901888e-2 + 1.2388608e-4 = 1.392418404352e-2 s.
  expect_close(r.iteration_s, 1.392418404352e-2, "iteration_s");
}

// DP=4 x TP=4 is 16 GPUs, two nodes: the DP ring runs over InfiniBand (α = 20 µs, β = 1e10),
// the TP All-to-All over NVLink. Each DP rank owns one matrix, hosted on one of its TP ranks.
TEST(HandAlphaBeta, LbAscDp4Tp4DpRingCrossesNodes) {
  const plan::Plan p = make(plan::Strategy::kLbAsc, 4, 4);
  expect_one_bucket(p, 4);
  for (int d = 0; d < 4; ++d) {
    ASSERT_EQ(p.stages[0].groups[d].size(), 1u) << "dp rank " << d;
    ASSERT_EQ(p.stages[0].groups[d][0].tasks.size(), 1u) << "dp rank " << d;
  }
  const Breakdown r = simulate(four_matrices(), p, round_cluster(), two_micro_batches(4));
  // Local bucket N/4 = 1,048,576 elements in equal DP shards. Reduce-Scatter, p = 4 on IB:
  //   3/4 * 4,194,304 B / 1e10 + 3 * 20e-6 = 3.145728e-4 + 6e-5 = 3.745728e-4 s;
  // All-Gather in bf16: 3/4 * 2,097,152 / 1e10 + 6e-5 = 1.572864e-4 + 6e-5 = 2.172864e-4 s.
  const double reduce_scatter = (4.0 - 1) / 4 * (kN / 4 * 4) / kBetaIb + (4 - 1) * kAlphaIb;
  const double all_gather = (4.0 - 1) / 4 * (kN / 4 * 2) / kBetaIb + (4 - 1) * kAlphaIb;
  expect_close(reduce_scatter, 3.745728e-4, "reduce-scatter by hand");
  expect_close(all_gather, 2.172864e-4, "all-gather by hand");
  expect_close(r.dp_comm_exposed_s, reduce_scatter + all_gather, "dp_comm_exposed_s");
  // The host receives 3/4 of its matrix (3,145,728 B); the others send 1/4 each. p = 4 on
  // NVLink: 3 * 10e-6 + 3,145,728 / 1e11 = 3e-5 + 3.145728e-5 = 6.145728e-5 s, gather and
  // scatter.
  const double all_to_all = (4 - 1) * kAlphaNv + (kMatrixBytes * 3 / 4) / kBetaNv;
  expect_close(all_to_all, 6.145728e-5, "all-to-all by hand");
  expect_close(r.tp_comm_s, 2 * all_to_all, "tp_comm_s");
  expect_close(r.optimizer_s, kTaskS, "optimizer_s");
  // One task on one of 16 GPUs: max 3.321225472e-3 s, mean a quarter of it.
  expect_close(r.optimizer_rank_max_s, kTaskS, "optimizer_rank_max_s");
  expect_close(r.optimizer_rank_mean_s, kTaskS / 4, "optimizer_rank_mean_s");
  // 2.5769803776e-4 (2 micro batches / tp 4) + 5.918592e-4 + 3.321225472e-3 + 1.2291456e-4
  // = 4.29369726976e-3.
  expect_close(r.iteration_s, 4.29369726976e-3, "iteration_s");
}

}  // namespace
}  // namespace canzona::sim
