// run_strategies: every strategy in one launch on the same data (session.h).
#include "canzona/runtime/session.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "canzona/comm/communicator.h"
#include "canzona/common/faults.h"
#include "canzona/common/fnv.h"
#include "canzona/plan/metrics.h"
#include "canzona/runtime/reference.h"
#include "canzona/runtime/run_settings.h"
#include "verify.h"

namespace canzona::runtime {
namespace {

constexpr std::array<double engine::StepTimes::*, 10> kFields = {
    &engine::StepTimes::step,      &engine::StepTimes::forward,    &engine::StepTimes::backward,
    &engine::StepTimes::grad_sync, &engine::StepTimes::opt,        &engine::StepTimes::opt_compute,
    &engine::StepTimes::opt_comm,  &engine::StepTimes::param_sync, &engine::StepTimes::opt_cpu,
    &engine::StepTimes::busy_cpu};

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

comm::CommBytes per_step(comm::CommBytes b, int steps) {
  b.reduce_scatter /= steps;
  b.all_gather /= steps;
  b.all_reduce /= steps;
  b.all_to_all /= steps;
  b.p2p /= steps;
  return b;
}

PhaseBytes per_step(PhaseBytes b, int steps) {
  b.grad_sync /= steps;
  b.optimizer /= steps;
  b.param_sync /= steps;
  return b;
}

// One rank's statistics as they travel to world rank 0: this fixed header, then `steps`
// StepTimes. Both are plain trivially copyable structs, copied byte for byte (every rank runs the
// same binary) and read back by field.
struct RankStats {
  std::int64_t steps = 0;    // timed steps (StepTimes) that follow the header
  double state_bytes = 0.0;  // StrategyRunner::state_bytes()
  comm::CommBytes dp_bytes;  // on the DP / TP communicator, summed over the timed steps
  comm::CommBytes tp_bytes;
  PhaseBytes dp_phase;  // the same bytes by phase
  PhaseBytes tp_phase;
};
static_assert(std::is_trivially_copyable_v<RankStats> &&
              std::is_trivially_copyable_v<engine::StepTimes>);

std::string pack(const RankStats& stats, const std::vector<engine::StepTimes>& steps) {
  std::string blob(sizeof(RankStats) + steps.size() * sizeof(engine::StepTimes), '\0');
  std::memcpy(blob.data(), &stats, sizeof(RankStats));
  if (!steps.empty())
    std::memcpy(blob.data() + sizeof(RankStats), steps.data(),
                steps.size() * sizeof(engine::StepTimes));
  return blob;
}

// Reads what pack() wrote; throws canzona::Error when the size does not match its header.
RankStats unpack(const std::string& blob, std::vector<engine::StepTimes>& steps) {
  RankStats stats;
  CANZONA_CHECK(blob.size() >= sizeof(RankStats), "rank statistics of ", blob.size(), " bytes");
  std::memcpy(&stats, blob.data(), sizeof(RankStats));
  CANZONA_CHECK(stats.steps >= 0, "rank statistics of ", stats.steps, " steps");
  CANZONA_CHECK_EQ(blob.size(), sizeof(RankStats) + static_cast<std::size_t>(stats.steps) *
                                                        sizeof(engine::StepTimes));
  steps.resize(static_cast<std::size_t>(stats.steps));
  if (!steps.empty())
    std::memcpy(steps.data(), blob.data() + sizeof(RankStats),
                steps.size() * sizeof(engine::StepTimes));
  return stats;
}

std::uint64_t world_params_hash(comm::Communicator& world, std::uint64_t params_fnv) {
  const std::vector<std::uint64_t> ranks = world.all_gather_u64(params_fnv);
  return fnv1a(ranks.data(), ranks.size() * sizeof(std::uint64_t));
}

// Gathers every rank's timed steps, CPU times, state and bytes to world rank 0 and reduces them.
// `dp_phase` / `tp_phase` are this rank's bytes by phase summed over the timed steps.
void summarize(comm::Grid& grid, const std::vector<engine::StepTimes>& steps, double state_bytes,
               const comm::CommBytes& dp_bytes, const comm::CommBytes& tp_bytes,
               const PhaseBytes& dp_phase, const PhaseBytes& tp_phase, StrategyResult& out) {
  const RankStats mine{.steps = std::ssize(steps),
                       .state_bytes = state_bytes,
                       .dp_bytes = dp_bytes,
                       .tp_bytes = tp_bytes,
                       .dp_phase = dp_phase,
                       .tp_phase = tp_phase};
  const std::vector<std::string> all = comm::gather_bytes_to_root(grid.world(), pack(mine, steps));
  if (all.empty()) return;
  const std::size_t n = steps.size();
  std::vector<RankStats> ranks;
  std::vector<std::vector<engine::StepTimes>> times(all.size());  // (ranks, n)
  for (std::size_t r = 0; r < all.size(); ++r) {
    ranks.push_back(unpack(all[r], times[r]));
    CANZONA_CHECK_EQ(times[r].size(), n);
  }
  for (auto field : kFields) {
    std::vector<double> critical(n, 0.0);
    for (const auto& t : times)
      for (std::size_t s = 0; s < n; ++s) critical[s] = std::max(critical[s], t[s].*field);
    out.median.*field = median(critical);
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::vector<double> opt_cpu, busy;
    for (const engine::StepTimes& t : times[r]) {
      opt_cpu.push_back(t.opt_cpu);
      busy.push_back(t.busy_cpu);
    }
    out.opt_cpu_ms.push_back(median(opt_cpu));
    out.busy_cpu_ms.push_back(median(busy));
    out.state_mb.push_back(ranks[r].state_bytes / (1024.0 * 1024.0));
    out.dp_bytes += ranks[r].dp_bytes;
    out.tp_bytes += ranks[r].tp_bytes;
    out.dp_phase_bytes += ranks[r].dp_phase;
    out.tp_phase_bytes += ranks[r].tp_phase;
  }
  out.dp_phase_bytes = per_step(out.dp_phase_bytes, static_cast<int>(n));
  out.tp_phase_bytes = per_step(out.tp_phase_bytes, static_cast<int>(n));
  out.dp_bytes = per_step(out.dp_bytes, static_cast<int>(n));
  out.tp_bytes = per_step(out.tp_bytes, static_cast<int>(n));
}

}  // namespace

comm::CommBytes StrategyResult::bytes() const {
  comm::CommBytes b = dp_bytes;
  b += tp_bytes;
  return b;
}

namespace {

// --verify on world rank 0 (VerifyResult's contract); the gathers are collective, so every rank
// calls check() for every strategy.
class Verifier {
 public:
  Verifier(const model::ModelSpec& model, const RunOptions& options, const SessionOptions& session)
      : model_(model),
        options_(options),
        session_(session),
        reference_model_(model::has_experts(model)
                             ? model::executed_model(model, options.dims.ep, options.dims.etp)
                             : model) {
    result_.ran = true;
    result_.expected_elements = model.total_numel();
  }

  void check(comm::Grid& grid, const plan::Plan& plan, const StrategyRunner& runner) {
    const bool root = grid.world().rank() == 0;
    if (root && !reference_) {
      reference_ = std::make_unique<Reference>(reference_model_, options_);
      reference_->run_until(options_.total_steps());
    }
    const layout::Layout& layout = runner.stage().layout;  // this rank's pipeline stage
    StageLayouts layouts;
    for (const plan::StagePlan& stage : plan.stages) layouts.push_back(&stage.layout);
    const std::string name = plan::to_string(plan.options.strategy);
    std::vector<float> local(static_cast<std::size_t>(runner.params().size()));
    read_f32(runner.params(), local);
    if (faults::fires(faults::Fault::kCorruptParams, grid.world().rank()) &&
        !layout.buckets.empty() && !layout.buckets[0].slots.empty()) {
      float& x = local[static_cast<std::size_t>(layout.buckets[0].offset +
                                                layout.buckets[0].slots[0].offset)];
      std::uint32_t bits = 0;
      std::memcpy(&bits, &x, sizeof(bits));
      bits ^= 1u;
      std::memcpy(&x, &bits, sizeof(bits));
    }
    std::vector<Params> dense, experts;  // root: per replica
    for (int d = 0; d < grid.dims().dp; ++d) {
      Params got = gather_replica(grid, model_, layouts, local, d);
      if (root) dense.push_back(std::move(got));
    }
    // A MoE run's expert engine (member 1 of the engine set) over its expert grid.
    const engine::EngineSet& set = runner.engines();
    const engine::EngineSet::Member* e = set.size() > 1 ? &set.member(1) : nullptr;
    StageLayouts expert_layouts;  // every pipeline stage's expert buffer
    if (e)
      for (const plan::StagePlan& stage : plan.expert->plan.stages)
        expert_layouts.push_back(&stage.layout);
    if (e) {
      comm::Grid& eg = *e->grid;
      std::vector<float> expert_local(static_cast<std::size_t>(e->engine->params().size()));
      read_f32(e->engine->params(), expert_local);
      for (int r = 0; r < eg.dims().dp; ++r) {
        const Params got = gather_replica(eg, *e->model, expert_layouts, expert_local, r);
        Params merged = to_world_root(grid, eg, *set.expert_part(), got);
        if (root) experts.push_back(std::move(merged));
      }
    }
    for (std::size_t r = 0; r < std::max(dense.size(), experts.size()); ++r) {
      Params got = merge(dense, experts, r);
      const std::string where = e ? str(name, ", DP replica ", std::min(r, dense.size() - 1),
                                        " with expert DP replica ", std::min(r, experts.size() - 1))
                                  : str(name, ", DP replica ", r);
      check_params(where + " vs the single-process reference", got, reference_->params());
      if (!first_.empty()) check_params(where + " vs " + first_name_, got, first_);
      if (first_.empty() && r == 0) {
        first_ = std::move(got);
        first_name_ = name;
      }
    }
    // The reduced gradients in fp32 (exact from bf16), beside the ranges that view them (a moved
    // vector keeps its elements where they are).
    std::vector<std::vector<float>> widened;
    const auto widen = [&widened](const std::vector<engine::GradRange>& from) {
      std::vector<std::pair<std::int64_t, std::span<const float>>> out;
      for (const engine::GradRange& g : from) {
        widened.emplace_back(static_cast<std::size_t>(g.values.size()));
        read_f32(g.values, widened.back());
        out.emplace_back(g.offset, widened.back());
      }
      return out;
    };
    const std::vector<std::pair<std::int64_t, std::span<const float>>> ranges =
        widen(runner.reduced_grads());
    const bool sharded = runner.grads_sharded();
    const std::vector<Params> views = gather_reduced_grads(grid, model_, layouts, ranges, sharded);
    std::vector<Params> expert_views;
    if (e) {
      comm::Grid& eg = *e->grid;
      const std::vector<std::pair<std::int64_t, std::span<const float>>> expert_ranges =
          widen(e->engine->reduced_grads());
      const bool expert_sharded = e->engine->grads_sharded();
      const std::vector<Params> got =
          gather_reduced_grads(eg, *e->model, expert_layouts, expert_ranges, expert_sharded);
      // Every EP slice holds as many views (1 sharded, else expert DP): the count is agreed.
      const int count = expert_sharded ? 1 : eg.dims().dp;
      for (int v = 0; v < count; ++v) {
        Params merged =
            to_world_root(grid, eg, *set.expert_part(), eg.world().rank() == 0 ? got[v] : Params{});
        if (root) expert_views.push_back(std::move(merged));
      }
    }
    for (std::size_t v = 0; v < std::max(views.size(), expert_views.size()); ++v) {
      const std::string where = sharded ? str(name, " reduced gradient (DP shards)")
                                        : str(name, " reduced gradient, DP replica ", v);
      check_grads(where, merge(views, expert_views, v));
    }
  }

  // The result, agreed on every rank (collective).
  VerifyResult finish(comm::Communicator& world) {
    VerifyResult& v = result_;
    const bool complete =
        v.elements == v.expected_elements && v.grad_elements == v.expected_elements;
    const bool native = options_.reduce_mode == comm::ReduceMode::kNative;
    v.bitwise = complete && !worst_.found && bitwise_native_;
    v.passed = complete && !worst_.found && !params_beyond_tolerance_ && (native || v.bitwise);
    v.param_bound = session_.verify_tolerance;
    if (worst_.found)
      v.first_mismatch = worst_where_ + ": " + worst_.describe();
    else if (!complete)
      v.first_mismatch = str("compared ", v.elements, " param and ", v.grad_elements,
                             " gradient elements per replica; the model has ", v.expected_elements);
    else if (params_beyond_tolerance_)
      v.first_mismatch = params_beyond_where_;
    else if (!v.bitwise)
      v.first_mismatch = first_difference_;
    v.bitwise = agreed(world, v.bitwise);
    v.passed = agreed(world, v.passed);
    return v;
  }

 private:
  // World rank 0's value of `flag`, on every rank.
  static bool agreed(comm::Communicator& world, bool flag) {
    return world.all_gather_u64(flag ? 1 : 0)[0] != 0;
  }

  void note(const std::string& where, const Mismatch& m) {
    if (m.found && !worst_.found) {
      worst_ = m;
      worst_where_ = where;
    }
  }

  // Bitwise under kDeterministic. Under kNative bits may differ: the worst |difference| must stay
  // within verify_tolerance, and size mismatches still fail.
  void check_params(const std::string& where, const std::vector<std::vector<float>>& got,
                    const std::vector<std::vector<float>>& want) {
    const Mismatch m = compare_params(model_, got, want);
    result_.elements = params_compared_ ? std::min(result_.elements, m.elements) : m.elements;
    params_compared_ = true;
    result_.max_abs_diff = std::max(result_.max_abs_diff, m.max_abs_diff);
    if (options_.reduce_mode == comm::ReduceMode::kDeterministic || !m.problem.empty()) {
      note(where, m);
      return;
    }
    if (m.found && bitwise_native_) {
      bitwise_native_ = false;
      first_difference_ = str(where, ": ", m.describe());
    }
    if (m.max_abs_diff > session_.verify_tolerance && !params_beyond_tolerance_) {
      params_beyond_tolerance_ = true;
      params_beyond_where_ = str(where, ": max |diff| ", m.max_abs_diff, " > tolerance ",
                                 session_.verify_tolerance, "; first differing ", m.describe());
    }
  }

  void check_grads(const std::string& where, const std::vector<std::vector<float>>& got) {
    Tolerance tolerance;
    if (options_.reduce_mode == comm::ReduceMode::kNative) {
      tolerance.scale = &reference_->grad_abs_sums();
      tolerance.factor = native_sum_factor(options_.dims.dp);
    }
    const Mismatch m = compare_params(model_, got, reference_->grads(), tolerance);
    result_.grad_elements =
        grads_compared_ ? std::min(result_.grad_elements, m.elements) : m.elements;
    grads_compared_ = true;
    result_.grad_max_abs_diff = std::max(result_.grad_max_abs_diff, m.max_abs_diff);
    if (m.found) {
      note(where + " vs the reference", m);
    } else if (m.not_bitwise > 0 && bitwise_native_) {
      bitwise_native_ = false;  // within the bound, but not bit for bit
      first_difference_ = str(where, ": ", m.not_bitwise, " elements differ within the bound");
    }
  }

  using Params = std::vector<std::vector<float>>;  // [model param] global row-major

  // Replica r of the dense buffer with replica r of the expert buffer's params filled in (the
  // last replica of a buffer with fewer).
  static Params merge(const std::vector<Params>& dense, const std::vector<Params>& experts,
                      std::size_t r) {
    Params out = dense.empty() ? Params{} : dense[std::min(r, dense.size() - 1)];
    if (experts.empty()) return out;
    const Params& e = experts[std::min(r, experts.size() - 1)];
    out.resize(e.size());
    for (std::size_t p = 0; p < e.size(); ++p)
      if (!e[p].empty()) out[p] = e[p];
    return out;
  }

  // Collective over the world: each EP slice's expert-grid root sends `got` (its experts, indexed
  // by part.model) to world rank 0, which returns them at their model indices.
  Params to_world_root(comm::Grid& grid, comm::Grid& expert_grid, const model::ExpertPart& part,
                       const Params& got) {
    std::string bytes;
    if (expert_grid.world().rank() == 0)
      for (std::size_t i = 0; i < got.size() && i < part.source.size(); ++i) {
        if (got[i].empty()) continue;
        const std::int64_t header[2] = {part.source[i], static_cast<std::int64_t>(got[i].size())};
        bytes.append(reinterpret_cast<const char*>(header), sizeof(header));
        bytes.append(reinterpret_cast<const char*>(got[i].data()), got[i].size() * sizeof(float));
      }
    const std::vector<std::string> blobs = comm::gather_bytes_to_root(grid.world(), bytes);
    Params out;
    if (blobs.empty()) return out;
    out.resize(model_.params.size());
    for (const std::string& blob : blobs) {
      std::size_t at = 0;
      while (at < blob.size()) {
        std::int64_t header[2];
        CANZONA_CHECK(at + sizeof(header) <= blob.size(), "truncated expert params");
        std::memcpy(header, blob.data() + at, sizeof(header));
        at += sizeof(header);
        CANZONA_CHECK(header[0] >= 0 && header[0] < std::ssize(model_.params) && header[1] >= 0 &&
                          at + header[1] * sizeof(float) <= blob.size(),
                      "bad expert params record");
        std::vector<float>& v = out[header[0]];
        v.resize(static_cast<std::size_t>(header[1]));
        std::memcpy(v.data(), blob.data() + at, v.size() * sizeof(float));
        at += v.size() * sizeof(float);
      }
    }
    return out;
  }

  const model::ModelSpec& model_;
  const RunOptions& options_;
  const SessionOptions& session_;
  // The model the reference runs: a MoE model's experts split as the run splits them.
  model::ModelSpec reference_model_;
  std::unique_ptr<Reference> reference_;   // root only
  std::vector<std::vector<float>> first_;  // root: replica 0 of the first strategy
  std::string first_name_;
  Mismatch worst_;  // the first mismatch beyond what the mode allows
  std::string worst_where_;
  bool bitwise_native_ = true;    // kNative: no element differed at all
  std::string first_difference_;  // kNative: where the first allowed difference was
  bool params_beyond_tolerance_ = false;
  std::string params_beyond_where_;
  bool params_compared_ = false;  // result_.elements is the fewest over comparisons
  bool grads_compared_ = false;
  VerifyResult result_;
};

}  // namespace

CompareResult run_strategies(comm::Grid& grid, const model::ModelSpec& model,
                             const RunOptions& options,
                             const std::vector<plan::Strategy>& strategies,
                             const SessionOptions& session, comm::ExpertGroups* experts) {
  validate(options);
  comm::Communicator& world = grid.world();
  launch::check_agreement(world, launch_settings(options, session, strategies, model));
  CompareResult result;
  result.options = options;
  result.model_name = model.name;
  result.model_numel = model.total_numel();
  result.verify.ran = session.verify;
  engine::Trace trace(!session.trace_path.empty());
  world.barrier();
  trace.reset_epoch();

  std::unique_ptr<Verifier> verifier;
  if (session.verify) verifier = std::make_unique<Verifier>(model, options, session);
  for (plan::Strategy strategy : strategies) {
    plan::PlanOptions plan_opts = plan_options(options, strategy);
    if (faults::fires(faults::Fault::kPerturbPlan, world.rank()))
      plan_opts.variant = plan_opts.variant == plan::PlannerVariant::kCanzona
                              ? plan::PlannerVariant::kPaper
                              : plan::PlannerVariant::kCanzona;
    const plan::Plan plan = plan::make_plan(model, plan_opts);
    launch::validate_plan(model, plan, grid.dims());
    if (plan.expert) {
      CANZONA_REQUIRE(experts != nullptr && experts->grid, "model '", model.name,
                      "' is a mixture of experts: this launch has no expert groups");
      launch::validate_plan(
          model::expert_part(model, plan.expert->ep, plan.expert->etp, experts->coord.ep).model,
          plan.expert->plan, experts->grid->dims());
    }
    launch::check_plan_agreement(world, plan);

    StrategyResult sr;
    sr.strategy = strategy;
    sr.plan_hash = plan::plan_hash(plan);
    // Buckets and micro groups of every stage.
    for (const plan::StagePlan& stage : plan.stages) {
      sr.buckets += static_cast<int>(stage.layout.buckets.size());
      for (const auto& groups : stage.groups) sr.micro_groups += static_cast<int>(groups.size());
    }
    const plan::Metrics metrics = plan::compute_metrics(model, plan);
    sr.predicted_flops_max = metrics.max_rank.flops;
    sr.predicted_flops_mean = metrics.mean_rank.flops;
    for (const plan::LoadGrid& stage : metrics.loads)  // world rank order: stage, DP, TP
      for (const plan::RankLoad& load : stage.cells) sr.predicted_flops.push_back(load.flops);

    StrategyRunner runner(grid, model, plan, options, trace, experts);
    world.barrier();
    std::vector<engine::StepTimes> timed;
    comm::CommBytes dp0, tp0;
    PhaseBytes dp_phase, tp_phase;
    for (int s = 1; s <= options.total_steps(); ++s) {
      if (s == options.warmup + 1) {
        dp0 = grid.dp().bytes();
        tp0 = grid.tp().bytes();
      }
      const engine::StepTimes t = runner.step(s);
      if (s <= options.warmup) continue;
      timed.push_back(t);
      dp_phase += runner.last_step_bytes().dp;
      tp_phase += runner.last_step_bytes().tp;
    }
    runner.finish();
    sr.params_hash = world_params_hash(world, runner.params_fnv());
    summarize(grid, timed, static_cast<double>(runner.state_bytes()), grid.dp().bytes() - dp0,
              grid.tp().bytes() - tp0, dp_phase, tp_phase, sr);
    if (verifier) verifier->check(grid, plan, runner);
    result.strategies.push_back(std::move(sr));
  }
  if (verifier) result.verify = verifier->finish(world);
  if (!session.trace_path.empty()) engine::write_chrome_trace(grid, trace, session.trace_path);
  return result;
}

}  // namespace canzona::runtime
