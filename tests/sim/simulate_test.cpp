// simulate() on small hand-built plans whose every phase can be computed by hand (simulate.h).
//
// The model: two 1024 x 1024 matrices (one column-, one row-parallel) and a 1024-element norm in
// one layer. The cluster has round numbers and no latency: forward-backward 5e13 FLOP/s,
// optimizer 1e13 FLOP/s, factorizations 1e12 FLOP/s, 1e11 B/s inside a node, 1e12 B/s HBM.
#include "canzona/sim/simulate.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/sim/sim_report.h"

namespace canzona::sim {
namespace {

constexpr std::int64_t kM = 1024 * 1024;

model::ModelSpec tiny_model() {
  model::ModelSpec m;
  m.name = "tiny";
  m.params.push_back(
      {"decoder.layers.0.a.weight", {1024, 1024}, 0, model::OptimizerClass::kMatrix, 0, -1, {}});
  m.params.push_back(
      {"decoder.layers.0.b.weight", {1024, 1024}, 1, model::OptimizerClass::kMatrix, 0, -1, {}});
  m.params.push_back(
      {"decoder.layers.0.norm.weight", {1024}, -1, model::OptimizerClass::kElementwise, 0, -1, {}});
  return m;
}

Cluster round_cluster() {
  Cluster c;
  c.name = "round";
  c.gpus_per_node = 8;
  c.intra_node = {100.0, 0.0};
  c.inter_node = {10.0, 0.0};
  c.device = {"round", 100.0, 10.0, 1.0, 1000.0, 0.5, 1.0, Precision::kTf32, 0.0, 1.0};
  return c;
}

plan::Task task(int param, double flops, int dp_owner, int host, std::int64_t gather_bytes = 0) {
  plan::Task t;
  t.param = param;
  t.rows = t.cols = 1024;
  t.flops = flops;
  t.dp_owner = dp_owner;
  t.host = host;
  t.gather_bytes = gather_bytes;
  return t;
}

// One stage, one bucket in buffer order norm, b, a (TP-local sizes for `tp`).
plan::Plan tiny_plan(plan::Strategy strategy, int dp, int tp) {
  plan::Plan p;
  p.options.strategy = strategy;
  p.options.dims.dp = dp;
  p.options.dims.tp = tp;
  plan::StagePlan s;
  s.params = {0, 1, 2};
  layout::Bucket b;
  b.slots = {{2, 0, 1024}, {1, 1024, kM / tp}, {0, 1024 + kM / tp, kM / tp}};
  b.numel = 1024 + 2 * kM / tp;
  s.layout.buckets = {b};
  s.layout.numel = b.numel;
  p.stages = {s};
  return p;
}

Workload two_micro_batches(int dp) {
  Workload w;
  w.seq_len = 4096;
  w.micro_batch = 1;
  w.tokens = 4096 * 2 * dp;
  return w;
}

// 6 * 2 * 1024^2 FLOPs per token * 4096 tokens / 5e13 FLOP/s.
constexpr double kMicroBatchS = 6.0 * 2 * kM * 4096 / 5e13;

TEST(Simulate, LbAscOnTwoDpRanksMatchesHandValues) {
  plan::Plan p = tiny_plan(plan::Strategy::kLbAsc, 2, 1);
  auto& s = p.stages[0];
  s.cuts = {{0, 1024 + kM, 1024 + 2 * kM}};  // rank 0: norm + b, rank 1: a
  s.owner = {1, 0, plan::kDivided};
  s.tasks = {task(0, 2e10, 1, plan::kAllTp), task(1, 1e10, 0, plan::kAllTp)};

  Breakdown r = simulate(tiny_model(), p, round_cluster(), two_micro_batches(2));
  EXPECT_EQ(r.micro_batches, 2);
  EXPECT_DOUBLE_EQ(r.fwd_bwd_s, 2 * kMicroBatchS);
  // Grouped Reduce-Scatter-v (n - min shard = 1024 + 2^20 fp32 elements on the busiest link) and
  // All-Gather-v of the same in bf16, each fully exposed: one bucket, ready at the end of
  // backward and needed at the start of forward.
  const double rs = (1024.0 + kM) * 4 / 1e11, ag = (1024.0 + kM) * 2 / 1e11;
  EXPECT_NEAR(r.dp_comm_exposed_s, rs + ag, 1e-15);
  EXPECT_NEAR(r.dp_comm_total_s, rs + ag, 1e-15);
  EXPECT_DOUBLE_EQ(r.optimizer_s, 2e-3);  // rank 1: 2e10 / 1e13
  EXPECT_EQ(r.tp_comm_s, 0.0);
  EXPECT_EQ(r.param_sync_s, 0.0);
  EXPECT_DOUBLE_EQ(r.optimizer_rank_max_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.optimizer_rank_mean_s, 1.5e-3);
  EXPECT_NEAR(r.iteration_s, 2 * kMicroBatchS + rs + ag + 2e-3, 1e-15);
  EXPECT_DOUBLE_EQ(r.fwd_bwd_flops, 6.0 * 2 * kM * 4096 * 2 * 2);

  // Padded: (p-1) * largest shard, here the same shard.
  Workload padded = two_micro_batches(2);
  padded.var_collective = VarCollective::kPadded;
  EXPECT_NEAR(simulate(tiny_model(), p, round_cluster(), padded).dp_comm_exposed_s, rs + ag, 1e-15);
}

TEST(Simulate, SynchronousComputeAllReducesAndComputesEverything) {
  plan::Plan p = tiny_plan(plan::Strategy::kSc, 2, 1);
  auto& s = p.stages[0];
  s.owner = {plan::kEveryone, plan::kEveryone, plan::kEveryone};
  s.tasks = {task(0, 2e10, plan::kEveryone, plan::kAllTp),
             task(1, 1e10, plan::kEveryone, plan::kAllTp)};
  Breakdown r = simulate(tiny_model(), p, round_cluster(), two_micro_batches(2));
  // Ring All-Reduce: 2 (p-1)/p n/β with n the whole fp32 bucket.
  EXPECT_NEAR(r.dp_comm_exposed_s, (1024.0 + 2 * kM) * 4 / 1e11, 1e-15);
  // Both tasks plus the norm's AdamW (1024 elements * 30 B / 1e12 B/s).
  EXPECT_NEAR(r.optimizer_s, 3e-3 + 1024 * 30 / 1e12, 1e-15);
}

TEST(Simulate, LayerwiseGathersOwnedParamsInsideTheStep) {
  plan::Plan p = tiny_plan(plan::Strategy::kLayerwisePaper, 2, 1);
  auto& s = p.stages[0];
  s.owner = {1, 0, plan::kEveryone};
  s.tasks = {task(0, 2e10, 1, plan::kAllTp), task(1, 1e10, 0, plan::kAllTp)};
  Breakdown r = simulate(tiny_model(), p, round_cluster(), two_micro_batches(2));
  EXPECT_NEAR(r.dp_comm_exposed_s, (1024.0 + 2 * kM) * 4 / 1e11, 1e-15);
  // Grouped All-Gather-v of 2^20 bf16 elements owned by each rank: n - min = 2^20 * 2 bytes.
  EXPECT_NEAR(r.param_sync_s, kM * 2 / 1e11, 1e-15);
  EXPECT_NEAR(r.optimizer_s, 2e-3 + 1024 * 30 / 1e12, 1e-15);
  EXPECT_NEAR(r.optimizer_step_s, r.optimizer_s + r.param_sync_s, 1e-15);
}

// dp = 1, tp = 2: task a on host 0 in group 0, task b on host 1 in group 1; each gathers
// 1e9 B (each rank moves 5e8 B each way: 5e-3 s) and computes for 1e-2 s.
plan::Plan hosted_plan() {
  plan::Plan p = tiny_plan(plan::Strategy::kLbAsc, 1, 2);
  auto& s = p.stages[0];
  s.cuts = {{0, s.layout.buckets[0].numel}};
  s.owner = {0, 0, plan::kDivided};
  s.tasks = {task(0, 1e11, 0, 0, 1000000000), task(1, 1e11, 0, 1, 1000000000)};
  s.tasks[0].group = 0;
  s.tasks[1].group = 1;
  plan::MicroGroup g0, g1;
  g0.tasks = {0};
  g1.tasks = {1};
  s.groups = {{g0, g1}};
  return p;
}

TEST(Simulate, TpMicroGroupsSequentialAndPipelined) {
  const double adamw = 1024 * 30 / 1e12;
  Workload w = two_micro_batches(1);
  w.tp_pipeline = false;
  Breakdown seq = simulate(tiny_model(), hosted_plan(), round_cluster(), w);
  EXPECT_EQ(seq.micro_groups, 2);
  EXPECT_NEAR(seq.optimizer_s, 0.02 + adamw, 1e-12);
  EXPECT_NEAR(seq.tp_comm_s, 0.02, 1e-12);  // 4 collectives of 5e-3 s, none hidden
  EXPECT_NEAR(seq.tp_comm_sequential_s, 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(seq.fwd_bwd_s, kMicroBatchS);  // tp halves the work, 2 micro batches

  w.tp_pipeline = true;
  Breakdown pipe = simulate(tiny_model(), hosted_plan(), round_cluster(), w);
  // Host 1 computes group 1 while host 0 computes group 0: compute 1e-2 s; G0, S1 and part of
  // S0 stay exposed: total 2.5e-2 s.
  EXPECT_NEAR(pipe.optimizer_s, 0.01 + adamw, 1e-12);
  EXPECT_NEAR(pipe.tp_comm_s, 0.015, 1e-12);
  EXPECT_NEAR(pipe.tp_comm_pipelined_s, 0.015, 1e-12);
  EXPECT_NEAR(pipe.tp_comm_sequential_s, 0.02, 1e-12);
  EXPECT_LT(pipe.iteration_s, seq.iteration_s);
}

TEST(Simulate, RedundantTpGathersEveryTask) {
  plan::Plan p = tiny_plan(plan::Strategy::kSc, 1, 2);
  auto& s = p.stages[0];
  s.owner = {plan::kEveryone, plan::kEveryone, plan::kEveryone};
  s.tasks = {task(0, 1e11, plan::kEveryone, plan::kAllTp, 1000000000),
             task(1, 1e11, plan::kEveryone, plan::kAllTp, 1000000000)};
  Breakdown r = simulate(tiny_model(), p, round_cluster(), two_micro_batches(1));
  EXPECT_NEAR(r.tp_comm_s, 2 * (0.5 * 1e9 / 1e11), 1e-12);  // ring All-Gather per task, p = 2
  EXPECT_NEAR(r.optimizer_s, 0.02 + 1024 * 30 / 1e12, 1e-12);
}

TEST(Simulate, MicroGroupsMustHoldEveryHostedTask) {
  plan::Plan p = hosted_plan();
  p.stages[0].groups[0].pop_back();
  EXPECT_THROW(simulate(tiny_model(), p, round_cluster(), two_micro_batches(1)), Error);
}

TEST(Simulate, RejectsBadWorkloadAndOversizedTp) {
  plan::Plan p = hosted_plan();
  Workload w = two_micro_batches(1);
  w.tokens = 0;
  EXPECT_THROW(simulate(tiny_model(), p, round_cluster(), w), UsageError);
  p.options.dims.tp = 16;
  EXPECT_THROW(simulate(tiny_model(), p, round_cluster(), two_micro_batches(1)), UsageError);
}

// Hostile workloads: out of the documented limits, or tokens per DP step overflowing.
TEST(Simulate, RejectsWorkloadsOutsideTheLimits) {
  const plan::Plan p = hosted_plan();
  auto expect_usage = [&](const Workload& w, const char* words) {
    try {
      simulate(tiny_model(), p, round_cluster(), w);
      ADD_FAILURE() << "accepted " << words;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Workload w = two_micro_batches(1);
  w.tokens = std::numeric_limits<std::int64_t>::max();
  expect_usage(w, "--tokens = 9223372036854775807 must lie in [1, 1099511627776] (kMaxTokens)");
  w = two_micro_batches(1);
  w.seq_len = kMaxSeqLen + 1;
  expect_usage(w, "(kMaxSeqLen)");
  w = two_micro_batches(1);
  w.micro_batch = -3;
  expect_usage(w, "--micro-batch must be positive");
  w = two_micro_batches(1);
  w.grad_bytes = std::numeric_limits<double>::quiet_NaN();
  expect_usage(w, "(kMaxBytesPerElement)");
  plan::Plan wide = tiny_plan(plan::Strategy::kSc, 1 << 20, 1);
  w = two_micro_batches(1);
  w.seq_len = kMaxSeqLen;
  w.micro_batch = kMaxMicroBatch;
  try {
    simulate(tiny_model(), wide, round_cluster(), w);
    ADD_FAILURE() << "2^64 tokens per DP step accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("overflows a 64-bit integer"), std::string::npos)
        << e.what();
  }
}

// A non-finite time from a cluster that bypassed cluster_from_json is an internal Error naming
// the field, never printed; so is a speedup of zero over zero in the table.
TEST(Simulate, NonFiniteResultsAreInternalErrorsNamingTheField) {
  Cluster c = round_cluster();
  c.device.bf16_tflops = 0.0;
  try {
    simulate(tiny_model(), hosted_plan(), c, two_micro_batches(1));
    ADD_FAILURE() << "infinite fwd_bwd_s accepted";
  } catch (const UsageError& e) {
    ADD_FAILURE() << "an internal failure reported as bad input: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fwd_bwd_s"), std::string::npos) << e.what();
  }
  try {
    format_table({Breakdown{}});
    ADD_FAILURE() << "0 / 0 speedup printed";
  } catch (const UsageError& e) {
    ADD_FAILURE() << "an internal failure reported as bad input: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("speedup"), std::string::npos) << e.what();
  }
}

// A bar of `iteration` seconds: 1 s forward-backward, the rest optimizer.
Breakdown bar(plan::Strategy strategy, double iteration) {
  Breakdown b;
  b.strategy = strategy;
  b.iteration_s = iteration;
  b.fwd_bwd_s = 1.0;
  b.optimizer_s = b.optimizer_step_s = iteration - 1.0;
  return b;
}

std::size_t occurrences(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

// A bar more than twice every other (sc's 16 s against 1.4 - 2.2 s) gets a second panel without
// it; each bar carries its time and its speedup over the first strategy, as the table prints it;
// bars within 2x of each other share one panel.
TEST(SimulateSvg, ADominantBarGetsASecondPanelWithoutItAndEveryBarItsNumbers) {
  using S = plan::Strategy;
  const std::vector<Breakdown> paper{bar(S::kSc, 16.0), bar(S::kLayerwise, 1.86), bar(S::kAsc, 2.2),
                                     bar(S::kLbAsc, 1.4)};
  const std::string svg = render_svg("t", {{"", paper}});
  EXPECT_EQ(occurrences(svg, "without sc, on its own scale"), 1u);
  EXPECT_EQ(occurrences(svg, "class=\"bar-time\""), 4u + 3u);  // sc once, the others twice
  for (const char* text :
       {">16 s<", ">1.86 s<", ">2.2 s<", ">1.4 s<", ">1.00x<", ">8.60x<", ">7.27x<", ">11.43x<"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  const std::string table = format_table(paper);
  for (const char* speedup : {"8.60x", "7.27x", "11.43x"})
    EXPECT_NE(table.find(speedup), std::string::npos) << speedup;  // the same numbers

  const std::vector<Breakdown> close{bar(S::kSc, 3.0), bar(S::kLbAsc, 1.6)};
  const std::string one = render_svg("t", {{"", close}});
  EXPECT_EQ(one.find("on its own scale"), std::string::npos);
  EXPECT_EQ(occurrences(one, "class=\"bar-time\""), 2u);
  // Two strategies above the drop: both left out of the second panel.
  const std::vector<Breakdown> two{bar(S::kSc, 20.0), bar(S::kAsc, 18.0), bar(S::kLbAsc, 2.0)};
  EXPECT_NE(render_svg("t", {{"", two}}).find("without sc, asc, on its own scale"),
            std::string::npos);
}

// Names as long as layerwise-paper keep their columns apart in both tables.
TEST(SimulateSvg, TablesAlignTheLongestStrategyName) {
  using S = plan::Strategy;
  const std::vector<Breakdown> results{bar(S::kSc, 3.0), bar(S::kLayerwisePaper, 2.0)};
  const std::string table = format_table(results);
  const auto row = table.find("layerwise-paper");
  ASSERT_NE(row, std::string::npos);
  // "iteration" ends where the rows' iteration column ends.
  const std::size_t header_col = table.find("iteration") + std::string("iteration").size();
  const std::size_t row_col = table.find(" s", row) + 2 - row;
  EXPECT_EQ(row_col, header_col) << table;
  EXPECT_NE(table.find("layerwise-paper "), std::string::npos) << table;  // a space after it
  const std::string sweep = format_sweep_table("tp", {{"2", results}, {"8", results}});
  EXPECT_NE(sweep.find("layerwise-paper iter  "), std::string::npos) << sweep;
}

// sc: every DP rank computes everything, so max / mean is exactly 1 even where sum / count
// rounds (3 x 0.1 s / 3 = 0.10000000000000002).
TEST(Simulate, EqualLoadsHaveBalanceExactlyOne) {
  plan::Plan p = tiny_plan(plan::Strategy::kSc, 3, 1);
  auto& s = p.stages[0];
  s.owner = {plan::kEveryone, plan::kEveryone, plan::kEveryone};
  s.tasks = {task(0, 1e12, plan::kEveryone, plan::kAllTp)};  // 0.1 s at 1e13 FLOP/s
  Breakdown r = simulate(tiny_model(), p, round_cluster(), two_micro_batches(3));
  EXPECT_EQ(r.optimizer_rank_max_s, 0.1);
  EXPECT_EQ(r.optimizer_rank_mean_s, r.optimizer_rank_max_s);
  EXPECT_EQ(to_json(r)["optimizer_balance"].get<double>(), 1.0);
}

TEST(Simulate, MoreBandwidthIsNeverSlower) {
  for (bool pipelined : {false, true}) {
    Workload w = two_micro_batches(1);
    w.tp_pipeline = pipelined;
    Cluster c = round_cluster();
    double previous = simulate(tiny_model(), hosted_plan(), c, w).iteration_s;
    for (int i = 0; i < 4; ++i) {
      c.intra_node.bandwidth_GBps *= 2;
      c.inter_node.bandwidth_GBps *= 2;
      double t = simulate(tiny_model(), hosted_plan(), c, w).iteration_s;
      EXPECT_LE(t, previous);
      previous = t;
    }
  }
}

TEST(TaskSeconds, FactorizationsRunAtTheirOwnRate) {
  cost::CostOptions options;
  options.optimizer_options = {{"max_precond_dim", 10000}, {"precondition_frequency", 10}};
  plan::Task t = task(0, 1e10, 0, plan::kAllTp);
  t.rows = 1000;
  t.cols = 20000;  // not preconditioned: only the 1000 side is factorized
  options.matrix_optimizer = "shampoo";
  EXPECT_DOUBLE_EQ(factorization_flops(options.matrix_optimizer, 1000, 20000, options), 9e8);
  // (1e10 - 9e8) / 1e13 + 9e8 / 1e12
  EXPECT_DOUBLE_EQ(task_seconds(t, options, round_cluster().device), 9.1e-4 + 9e-4);
  options.matrix_optimizer = "soap";
  EXPECT_DOUBLE_EQ(factorization_flops(options.matrix_optimizer, 1000, 20000, options),
                   4.0 / 3.0 * 1e8);
  options.matrix_optimizer = "muon";
  options.optimizer_options = nlohmann::json::object();
  EXPECT_EQ(factorization_flops(options.matrix_optimizer, 1000, 1000, options), 0.0);
  Device d = round_cluster().device;
  d.optimizer_task_overhead_us = 50;
  EXPECT_DOUBLE_EQ(task_seconds(t, options, d), 1e-3 + 50e-6);
}

TEST(StageFlops, TiedEmbeddingCountsAsLogitsOnTheLastStage) {
  model::ModelSpec m;
  m.arch.num_heads = 2;
  m.arch.head_dim = 32;
  m.params.push_back({"embedding.word_embeddings.weight",
                      {1000, 64},
                      0,
                      model::OptimizerClass::kElementwise,
                      -1,
                      -1,
                      {}});
  m.params.push_back(
      {"decoder.layers.0.w.weight", {64, 64}, 0, model::OptimizerClass::kMatrix, 0, -1, {}});
  m.params.push_back(
      {"decoder.layers.1.w.weight", {64, 64}, 0, model::OptimizerClass::kMatrix, 1, -1, {}});
  m.params.push_back({"decoder.final_layernorm.weight",
                      {64},
                      -1,
                      model::OptimizerClass::kElementwise,
                      -1,
                      -1,
                      {}});
  plan::Plan p;
  p.stages.resize(2);
  p.stages[0].params = {0, 1};
  p.stages[1].params = {2, 3};
  Workload w;
  w.seq_len = 4096;
  const double attention = 6.0 * 4096 * 64;  // per layer per token
  auto flops = stage_flops_per_token(m, p, w);
  ASSERT_EQ(flops.size(), 2u);
  EXPECT_DOUBLE_EQ(flops[0], 6.0 * 64 * 64 + attention);
  EXPECT_DOUBLE_EQ(flops[1], 6.0 * (64 * 64 + 64000) + attention);

  // Untied: the output layer is an ordinary matmul and the embedding still counts nothing.
  m.params.push_back(
      {"output_layer.weight", {1000, 64}, 0, model::OptimizerClass::kElementwise, -1, -1, {}});
  p.stages[1].params.push_back(4);
  w.attention_flops = false;
  flops = stage_flops_per_token(m, p, w);
  EXPECT_DOUBLE_EQ(flops[0], 6.0 * 64 * 64);
  EXPECT_DOUBLE_EQ(flops[1], 6.0 * (64 * 64 + 64000));

  // Mixture of experts, top-1 of 4: each expert's matmul serves a quarter of the tokens. Stage 0
  // gains two experts of 64 x 32 (2 x 2048 / 4 = 1024 params per token) and a router [4, 64]
  // (a matmul of its own, every token).
  m.arch.num_experts = 4;
  m.arch.experts_per_token = 1;
  for (int e = 0; e < 2; ++e) {
    m.params.push_back(
        {"decoder.layers.0.mlp.experts.local_experts." + std::to_string(e) + ".linear_fc1.weight",
         {64, 32},
         -1,
         model::OptimizerClass::kMatrix,
         0,
         -1,
         {}});
    p.stages[0].params.push_back(static_cast<int>(m.params.size()) - 1);
  }
  m.params.push_back({"decoder.layers.0.mlp.router.weight",
                      {4, 64},
                      -1,
                      model::OptimizerClass::kElementwise,
                      0,
                      -1,
                      {}});
  p.stages[0].params.push_back(static_cast<int>(m.params.size()) - 1);
  flops = stage_flops_per_token(m, p, w);
  EXPECT_DOUBLE_EQ(flops[0], 6.0 * (64 * 64 + 1024 + 256));
  EXPECT_DOUBLE_EQ(flops[1], 6.0 * (64 * 64 + 64000));
}

// qwen3-moe-cpu (4 layers, hidden 256, 8 experts of FFN 512, top-2, untied 4096 x 256 output).
// Per token: each layer's qkv 384 x 256, proj 256 x 256, router 8 x 256 and 2 of its 8 experts
// (fc1 1024 x 256, fc2 256 x 512): 98,304 + 65,536 + 2,048 + 2 x 393,216 = 952,320; 4 layers and
// the output layer: 4,857,856 params, x 6, plus attention 6 x 128 x 256 per layer. The count does
// not depend on where the experts live (EP 1: each rank holds all 8; EP 2: 4 each, times 2).
TEST(Simulate, MoeFlopsAndTheEpTokenExchangeByHand) {
  const model::ModelSpec m = model::build_transformer(model::preset("qwen3-moe-cpu"), {.tp = 1});
  Workload w;
  w.seq_len = 128;
  w.micro_batch = 1;
  w.tokens = 512;  // 2 micro batches of 128 tokens per DP rank
  const double per_token = 6.0 * 4857856 + 6.0 * 128 * 256 * 4;
  plan::PlanOptions o;
  o.dims.dp = 2;
  for (int ep : {1, 2}) {
    o.dims.ep = ep;
    const plan::Plan p = plan::make_plan(m, o);
    ASSERT_TRUE(p.expert);
    EXPECT_DOUBLE_EQ(stage_flops_per_token(m, p, w)[0], per_token) << "ep " << ep;
    const Breakdown b = simulate(m, p, round_cluster(), w);
    EXPECT_DOUBLE_EQ(b.fwd_bwd_flops, per_token * 512) << "ep " << ep;
    // Dispatch and combine, forward and backward, in each of 4 layers and 2 micro batches: each
    // rank sends half of its 128 tokens' 2 x 256 bf16 hidden values to the other EP rank.
    const double a2a = all_to_all_s(round_cluster().intra_node, 2, 128.0 * 2 * 256 * 2 / 2);
    EXPECT_DOUBLE_EQ(b.ep_comm_s, ep == 1 ? 0.0 : 4 * 4 * 2 * a2a) << "ep " << ep;
    EXPECT_GT(b.expert_step_s, 0.0);
    EXPECT_LT(b.expert_step_s, b.optimizer_step_s);
    EXPECT_NEAR(b.iteration_s, b.fwd_bwd_s + b.ep_comm_s + b.dp_comm_exposed_s + b.optimizer_step_s,
                1e-12);
  }
}

}  // namespace
}  // namespace canzona::sim
