// The Engine without MPI: every rank a thread of this process (include/canzona/comm/thread.h),
// each with its own Grid of in-process communicators. Checks the gradient-ready protocol (a
// bucket's collective is posted when, and only when, its last param is ready; marking twice or
// finishing early is an error), the 1/DP scaling of each bucket before its collective (against a
// hand-computed rank-order sum), main-param state access, and every strategy bitwise equal to the
// single-process reference on DP >= 3 grids (run_strategies with --verify).
#include "canzona/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/runner.h"
#include "canzona/runtime/session.h"
#include "synthetic.h"

namespace canzona::runtime {
namespace {

using plan::Strategy;

RunOptions quick(int dp, int tp, const std::string& optimizer) {
  RunOptions o;
  o.model = "qwen3-tiny";
  o.dims.dp = dp;
  o.dims.tp = tp;
  o.optimizer = optimizer;
  o.qkv_split = model::QkvSplit::kQkv;
  o.split_fc1 = true;
  o.bucket_size = 100000;
  o.steps = 2;
  o.warmup = 1;
  o.compute_scale = 0.0;
  return o;
}

plan::Plan make(const model::ModelSpec& m, const RunOptions& o, Strategy s) {
  return plan::make_plan(m, plan_options(o, s));
}

// Every strategy on a thread grid, verified against the single-process reference bitwise, every
// element of the model compared (params and last reduced gradients).
void expect_bitwise(int dp, int tp, const std::string& optimizer,
                    plan::LayerwiseTp layerwise_tp = plan::LayerwiseTp::kDuplicated,
                    DType precision = DType::kF32, bool grad_reduce_in_fp32 = false) {
  RunOptions o = quick(dp, tp, optimizer);
  o.layerwise_tp = layerwise_tp;
  o.precision = precision;
  o.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  const model::ModelSpec m = load_model(o);
  std::mutex mutex;
  CompareResult result;
  comm::run_on_thread_grid({dp, tp, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    SessionOptions session;
    session.verify = true;
    CompareResult r =
        run_strategies(g, m, o,
                       {Strategy::kSc, Strategy::kLayerwise, Strategy::kLayerwisePaper,
                        Strategy::kAsc, Strategy::kLbAsc, Strategy::kFsdpA2a},
                       session);
    if (g.world().rank() != 0) return;
    std::lock_guard<std::mutex> lock(mutex);
    result = std::move(r);
  });
  EXPECT_TRUE(result.verify.bitwise) << result.verify.first_mismatch;
  EXPECT_TRUE(result.verify.passed) << result.verify.first_mismatch;
  EXPECT_EQ(result.verify.elements, m.total_numel());
  EXPECT_EQ(result.verify.grad_elements, m.total_numel());
  ASSERT_EQ(result.strategies.size(), 6u);
  for (const StrategyResult& s : result.strategies)
    EXPECT_EQ(s.params_hash, result.strategies[0].params_hash) << plan::to_string(s.strategy);
}

TEST(EngineThreads, Dp3Tp1EveryStrategyBitwiseMuon) {
  expect_bitwise(3, 1, "muon");
}
TEST(EngineThreads, Dp3Tp2EveryStrategyBitwiseSoap) {
  expect_bitwise(3, 2, "soap");
}
TEST(EngineThreads, Dp3Tp2LayerShardedLayerwiseBitwiseMuon) {
  expect_bitwise(3, 2, "muon", plan::LayerwiseTp::kLayerSharded);
}
TEST(EngineThreads, Dp2Tp2EveryStrategyBitwiseShampoo) {
  expect_bitwise(2, 2, "shampoo");
}
// bf16 params and gradients with fp32 main params: every strategy bitwise equal to the reference
// that models a bf16 run on its own (src/runtime/reference.cpp), and to each other.
TEST(EngineThreads, Dp3Tp2EveryStrategyBitwiseBf16Muon) {
  expect_bitwise(3, 2, "muon", plan::LayerwiseTp::kDuplicated, DType::kBF16);
}
TEST(EngineThreads, Dp2Tp2LayerShardedBitwiseBf16Soap) {
  expect_bitwise(2, 2, "soap", plan::LayerwiseTp::kLayerSharded, DType::kBF16);
}
TEST(EngineThreads, Dp3Tp2EveryStrategyBitwiseBf16GradReduceInFp32Shampoo) {
  expect_bitwise(3, 2, "shampoo", plan::LayerwiseTp::kDuplicated, DType::kBF16, true);
}

// Bytes under bf16: every collective of the DP and TP phases moves 2-byte elements, so each
// strategy's bytes are exactly half of its fp32 run's; with --grad-reduce-in-fp32 the gradient
// sync keeps fp32's bytes and only the param sync halves. (The per-dtype counters themselves:
// Bf16Collectives.* and ThreadComm.Bf16SumsRoundOnceAndMoveHalfTheBytes.)
TEST(EngineThreads, Bf16HalvesTheBytesOfEveryPhase) {
  const std::vector<Strategy> all = {
      Strategy::kSc,  Strategy::kLayerwise, Strategy::kLayerwisePaper,
      Strategy::kAsc, Strategy::kLbAsc,     Strategy::kFsdpA2a};
  const auto run = [&](DType precision, bool fp32_grads) {
    RunOptions o = quick(2, 2, "muon");
    o.precision = precision;
    o.grad_reduce_in_fp32 = fp32_grads;
    const model::ModelSpec m = load_model(o);
    std::mutex mutex;
    CompareResult result;
    comm::run_on_thread_grid({2, 2, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
      CompareResult r = run_strategies(g, m, o, all, SessionOptions{});
      if (g.world().rank() != 0) return;
      std::lock_guard<std::mutex> lock(mutex);
      result = std::move(r);
    });
    return result;
  };
  const CompareResult fp32 = run(DType::kF32, false);
  const CompareResult bf16 = run(DType::kBF16, false);
  const CompareResult mixed = run(DType::kBF16, true);
  ASSERT_EQ(bf16.strategies.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const StrategyResult &f = fp32.strategies[i], &b = bf16.strategies[i], &x = mixed.strategies[i];
    const std::string name = plan::to_string(all[i]);
    EXPECT_GT(f.dp_phase_bytes.total(), 0) << name;
    EXPECT_EQ(2 * b.dp_phase_bytes.grad_sync, f.dp_phase_bytes.grad_sync) << name;
    EXPECT_EQ(2 * b.dp_phase_bytes.param_sync, f.dp_phase_bytes.param_sync) << name;
    EXPECT_EQ(2 * b.dp_phase_bytes.optimizer, f.dp_phase_bytes.optimizer) << name;
    EXPECT_EQ(2 * b.tp_phase_bytes.total(), f.tp_phase_bytes.total()) << name;
    EXPECT_EQ(x.dp_phase_bytes.grad_sync, f.dp_phase_bytes.grad_sync) << name;
    EXPECT_EQ(2 * x.dp_phase_bytes.param_sync, f.dp_phase_bytes.param_sync) << name;
  }
}

// ZeRO-3 in bf16 is bitwise ZeRO-1 in bf16: the engine driven directly the way a training loop
// drives it (gather each bucket before use, release it after, in the forward and again in the
// backward), three steps of synthetic gradients of o.precision's model. drive_engine returns
// every rank's params FNV (gathered one bucket at a time under ZeRO-3) and, when asked, the param
// bytes each rank keeps (ZeRO-3: only its shard of each bucket, at the dtype's size).
std::vector<std::uint64_t> drive_engine(const model::ModelSpec& m, const RunOptions& o,
                                        Strategy strategy, ZeroStage stage,
                                        std::vector<std::int64_t>* params_bytes = nullptr) {
  RunOptions run = o;
  run.zero_stage = stage;
  const plan::Plan plan = make(m, run, strategy);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(o.dims.world()));
  if (params_bytes) params_bytes->assign(hashes.size(), 0);
  std::mutex mutex;
  comm::run_on_thread_grid(o.dims, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    engine::Trace trace(false);
    engine::Engine e(g, m, plan, engine_options(run), trace);
    const int tp = g.dims().tp, tp_rank = g.coord().tp, dp_rank = g.coord().dp;
    for (int p : e.stage().params) fill_init_typed(m.params[p], p, tp, tp_rank, o.seed, e.param(p));
    e.init_main_params();
    const auto& buckets = e.stage().layout.buckets;
    const int n = static_cast<int>(buckets.size());
    for (int step = 1; step <= 3; ++step) {
      e.zero_grads();
      for (int b = n - 1; b >= 0; --b) {  // forward: the last bucket holds the first layers
        e.wait_param_sync(b);
        e.release_params(b);
      }
      for (int b = 0; b < n; ++b) {  // backward
        e.wait_param_sync(b);
        for (const layout::Slot& slot : buckets[b].slots)
          fill_grad_typed(m.params[slot.param], slot.param, tp, tp_rank, o.seed, step, dp_rank,
                          o.precision, e.grad(slot.param));
        for (const layout::Slot& slot : buckets[b].slots) e.grad_ready(slot.param);
        e.release_params(b);
      }
      e.finish_grad_sync();
      e.step();
      e.start_param_sync();
    }
    e.finish();
    if (e.state_bytes() > 0) {
      EXPECT_EQ(e.step_count(), 3);  // 0 on a rank that updates nothing
    }
    const std::int64_t held = e.memory_held().params_bytes;
    const std::uint64_t h = e.params_fnv();
    std::lock_guard<std::mutex> lock(mutex);
    hashes[static_cast<std::size_t>(g.world().rank())] = h;
    if (params_bytes) (*params_bytes)[static_cast<std::size_t>(g.world().rank())] = held;
  });
  return hashes;
}

TEST(EngineThreads, Bf16ZeroThreeIsBitwiseZeroOne) {
  RunOptions o = quick(3, 1, "muon");
  o.precision = DType::kBF16;
  const model::ModelSpec m = load_model(o);
  for (Strategy s : {Strategy::kLbAsc, Strategy::kAsc, Strategy::kFsdpA2a}) {
    std::vector<std::int64_t> one_bytes, three_bytes;
    const auto one = drive_engine(m, o, s, ZeroStage::kOne, &one_bytes);
    const auto three = drive_engine(m, o, s, ZeroStage::kThree, &three_bytes);
    EXPECT_EQ(one, three) << plan::to_string(s);
    // ZeRO-1 keeps the whole buffer on every rank at 2 bytes per element; ZeRO-3's shards
    // partition ZeRO-3's buffer (one layer per bucket): together they hold it once.
    RunOptions z3 = o;
    z3.zero_stage = ZeroStage::kThree;
    const std::int64_t numel_one = make(m, o, s).stages[0].layout.numel;
    const std::int64_t numel_three = make(m, z3, s).stages[0].layout.numel;
    std::int64_t sharded = 0;
    for (std::size_t r = 0; r < one.size(); ++r) {
      EXPECT_EQ(one_bytes[r], 2 * numel_one) << plan::to_string(s) << " rank " << r;
      EXPECT_LT(three_bytes[r], one_bytes[r]) << plan::to_string(s) << " rank " << r;
      sharded += three_bytes[r];
    }
    EXPECT_EQ(sharded, 2 * numel_three) << plan::to_string(s);
  }
  // The bf16 run differs from the fp32 one (the check above is not blind to the dtype).
  RunOptions f = o;
  f.precision = DType::kF32;
  EXPECT_NE(drive_engine(m, f, Strategy::kLbAsc, ZeroStage::kOne),
            drive_engine(m, o, Strategy::kLbAsc, ZeroStage::kOne));
}

// The bucket's collective is posted by the grad_ready of its last param, not before; each rank
// writes g = rank + 1 into every gradient, so the reduced value is sum_r fl((r + 1) * s) in rank
// order, s = float(1 / DP), computed here by hand.
TEST(EngineThreads, LastParamOfABucketPostsItsScaledCollective) {
  for (Strategy strategy : {Strategy::kSc, Strategy::kLbAsc}) {
    SCOPED_TRACE(plan::to_string(strategy));
    const RunOptions o = quick(3, 1, "muon");
    const model::ModelSpec m = load_model(o);
    const plan::Plan plan = make(m, o, strategy);
    const float s = 1.0f / 3.0f;
    const float expected = ((1.0f * s) + (2.0f * s)) + (3.0f * s);
    comm::run_on_thread_grid({3, 1, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
      engine::Trace trace(false);
      engine::Engine engine(g, m, plan, engine_options(o), trace);
      engine.init_main_params();
      const float mine = static_cast<float>(g.coord().dp + 1);
      const auto& buckets = engine.stage().layout.buckets;
      ASSERT_GT(buckets.size(), 1u);
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        const auto& slots = buckets[b].slots;
        for (const layout::Slot& slot : slots) {
          std::span<float> grad = engine.grad(slot.param).as<float>();
          std::fill(grad.begin(), grad.end(), mine);
        }
        const std::int64_t before = g.dp().bytes().total();
        for (std::size_t k = 0; k + 1 < slots.size(); ++k) engine.grad_ready(slots[k].param);
        EXPECT_EQ(g.dp().bytes().total(), before) << "bucket " << b << " posted early";
        engine.grad_ready(slots.back().param);
        EXPECT_GT(g.dp().bytes().total(), before) << "bucket " << b << " not posted";
        EXPECT_THROW(engine.grad_ready(slots.back().param), Error);
      }
      engine.finish_grad_sync();
      std::int64_t checked = 0;
      for (const engine::GradRange& r : engine.reduced_grads()) {
        // Elements of params (padding stays 0: 0 * s summed).
        for (float v : r.values.as<float>()) ASSERT_TRUE(v == expected || v == 0.0f) << v;
        checked += std::ranges::count(r.values.as<float>(), expected);
      }
      EXPECT_GT(checked, 0);
      engine.step();
      engine.start_param_sync();
      engine.finish();
    });
  }
}

TEST(EngineThreads, StepOrFinishOutOfOrderIsAnError) {
  const RunOptions o = quick(1, 1, "muon");
  const model::ModelSpec m = load_model(o);
  const plan::Plan plan = make(m, o, Strategy::kLbAsc);
  comm::run_on_thread_grid({1, 1, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    engine::Trace trace(false);
    engine::Engine engine(g, m, plan, engine_options(o), trace);
    EXPECT_THROW(engine.step(), Error);  // main params not loaded
    engine.init_main_params();
    EXPECT_THROW(engine.step(), Error);  // gradients not synced
    engine.grad_ready(engine.stage().layout.buckets[0].slots[0].param);
    EXPECT_THROW(engine.finish_grad_sync(), Error);
  });
}

// Main params of the tasks a rank computes are readable and writable by param name; writing one
// and stepping with a zero gradient changes the param buffer through that main param only.
TEST(EngineThreads, MainParamStateIsReadAndWrittenByName) {
  const RunOptions o = quick(1, 1, "muon");
  const model::ModelSpec m = load_model(o);
  const plan::Plan plan = make(m, o, Strategy::kSc);
  comm::run_on_thread_grid({1, 1, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    engine::Trace trace(false);
    engine::Engine engine(g, m, plan, engine_options(o), trace);
    for (int p : engine.stage().params)
      fill_init(m.params[p], p, 1, 0, o.seed, engine.param(p).as<float>());
    engine.init_main_params();
    std::vector<engine::StateTensor> all;
    for (const engine::StateTensor& t : engine.optimizer_state())
      if (t.state == "main") all.push_back(t);
    ASSERT_EQ(static_cast<int>(all.size()), engine.computed_tasks());
    const engine::StateTensor& first = all.front();
    EXPECT_EQ(first.state, "main");
    int p = -1;
    for (std::size_t k = 0; k < m.params.size(); ++k)
      if (m.params[k].name == first.param) p = static_cast<int>(k);
    ASSERT_GE(p, 0);
    if (first.piece < 0) {
      // A whole, un-split param at TP 1: the main param is the param's bytes.
      const std::span<float> values = engine.param(p).as<float>();
      ASSERT_EQ(values.size(), first.values.size());
      EXPECT_TRUE(std::equal(values.begin(), values.end(), first.values.begin()));
    }
    std::vector<float> twos(first.values.size(), 2.0f);
    engine.set_optimizer_state(first.param, "main", first.piece, 0, twos);
    EXPECT_TRUE(
        std::all_of(first.values.begin(), first.values.end(), [](float v) { return v == 2.0f; }));
    EXPECT_THROW(engine.set_optimizer_state(first.param, "main", first.piece, 0, {}), UsageError);
    EXPECT_THROW(engine.set_optimizer_state("no.such.param", "main", -1, 0, twos), UsageError);
  });
}

// Copies B's param buffer, the chosen state tensors and its step count into C.
void restore(engine::Engine& from, engine::Engine& to, bool optimizer_states) {
  for (int p : from.stage().params) {
    copy_cast(from.param(p), to.param(p));
  }
  for (const engine::StateTensor& t : from.optimizer_state())
    if (optimizer_states || t.state == "main")
      to.set_optimizer_state(t.param, t.state, t.piece, t.begin, t.values);
  to.set_step_count(from.step_count());
}

bool same_bytes(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Resume through the state API: A takes steps 1 and 2; B takes step 1, then a fresh C gets B's
// params, every state tensor and the step count and takes step 2: C ends bitwise where A does.
// D gets the params and main params but not the optimizer states and must end elsewhere (the
// states matter, so the check can fail).
void expect_resume_exact(int dp, int tp, const std::string& optimizer, Strategy strategy) {
  const RunOptions o = quick(dp, tp, optimizer);
  const model::ModelSpec m = load_model(o);
  const plan::Plan plan = make(m, o, strategy);
  std::mutex mutex;
  int exact = 0, differ = 0;
  comm::run_on_thread_grid({dp, tp, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    engine::Trace trace(false);
    StrategyRunner a(g, m, plan, o, trace);
    a.step(1);
    a.step(2);
    a.finish();
    StrategyRunner b(g, m, plan, o, trace);
    b.step(1);
    b.finish();
    EXPECT_EQ(b.engine().step_count() > 0,
              b.engine().computed_tasks() > 0 || !b.engine().rank_plan().elementwise.empty());
    StrategyRunner c(g, m, plan, o, trace);
    restore(b.engine(), c.engine(), true);
    c.step(2);
    c.finish();
    StrategyRunner d(g, m, plan, o, trace);
    restore(b.engine(), d.engine(), false);
    d.step(2);
    d.finish();
    std::lock_guard<std::mutex> lock(mutex);
    exact += same_bytes(a.params().as<float>(), c.params().as<float>()) ? 1 : 0;
    differ += same_bytes(a.params().as<float>(), d.params().as<float>()) ? 0 : 1;
  });
  EXPECT_EQ(exact, dp * tp) << "ranks whose resumed params equal the uninterrupted run's";
  EXPECT_GT(differ, 0) << "dropping the optimizer states changed nothing: the check is blind";
}

TEST(EngineThreads, ResumeFromStateIsBitwiseLbAscSoapDp2Tp2) {
  expect_resume_exact(2, 2, "soap", Strategy::kLbAsc);
}
TEST(EngineThreads, ResumeFromStateIsBitwiseScMuonDp3Tp1) {
  expect_resume_exact(3, 1, "muon", Strategy::kSc);
}
TEST(EngineThreads, ResumeFromStateIsBitwiseLayerwiseShampooDp2Tp2) {
  expect_resume_exact(2, 2, "shampoo", Strategy::kLayerwise);
}

// Every optimizer lists its state under fixed names (PyTorch's where they exist) with the sizes
// its shape implies.
TEST(EngineThreads, StateNamesAndShapes) {
  const RunOptions o = quick(1, 1, "soap");
  const model::ModelSpec m = load_model(o);
  const plan::Plan plan = make(m, o, Strategy::kSc);
  comm::run_on_thread_grid({1, 1, 1}, comm::ReduceMode::kDeterministic, [&](comm::Grid& g) {
    engine::Trace trace(false);
    engine::Engine engine(g, m, plan, engine_options(o), trace);
    std::set<std::string> names;
    for (const engine::StateTensor& t : engine.optimizer_state()) {
      names.insert(t.state);
      EXPECT_EQ(static_cast<std::int64_t>(t.values.size()), t.rows * t.cols)
          << t.param << "." << t.state;
      if (t.state == "exp_avg" && t.piece < 0 && t.end == 0) {
        EXPECT_EQ(t.rows * t.cols, static_cast<std::int64_t>(
                                       engine.optimizer_state(t.param, "main")[0].values.size()));
      }
    }
    EXPECT_EQ(names, (std::set<std::string>{"main", "exp_avg", "exp_avg_sq", "GG_left", "GG_right",
                                            "Q_left", "Q_right"}));
  });
}

}  // namespace
}  // namespace canzona::runtime
