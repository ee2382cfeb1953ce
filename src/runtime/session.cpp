// run_strategies: every strategy in one launch on the same data (session.h).
#include "canzona/runtime/session.h"

#include <algorithm>
#include <array>
#include <memory>

#include "canzona/plan/metrics.h"
#include "canzona/runtime/reference.h"
#include "canzona/runtime/verify.h"
#include "gather_bytes.h"

namespace canzona::runtime {
namespace {

constexpr std::array<double StepTimes::*, 10> kFields = {
    &StepTimes::step,    &StepTimes::forward,     &StepTimes::backward, &StepTimes::grad_sync,
    &StepTimes::opt,     &StepTimes::opt_compute, &StepTimes::opt_comm, &StepTimes::param_sync,
    &StepTimes::opt_cpu, &StepTimes::busy_cpu};

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<double> bytes_values(const comm::CommBytes& b) {
  return {static_cast<double>(b.reduce_scatter), static_cast<double>(b.all_gather),
          static_cast<double>(b.all_reduce), static_cast<double>(b.all_to_all)};
}

comm::CommBytes bytes_from(const std::vector<double>& v, std::size_t at) {
  comm::CommBytes b;
  b.reduce_scatter = static_cast<std::int64_t>(v[at]);
  b.all_gather = static_cast<std::int64_t>(v[at + 1]);
  b.all_reduce = static_cast<std::int64_t>(v[at + 2]);
  b.all_to_all = static_cast<std::int64_t>(v[at + 3]);
  return b;
}

comm::CommBytes per_step(comm::CommBytes b, int steps) {
  b.reduce_scatter /= steps;
  b.all_gather /= steps;
  b.all_reduce /= steps;
  b.all_to_all /= steps;
  return b;
}

// Gathers every rank's timed steps, CPU times, state and bytes to world rank 0 and reduces them.
void summarize(comm::Grid& grid, const std::vector<StepTimes>& steps, double state_bytes,
               const comm::CommBytes& dp_bytes, const comm::CommBytes& tp_bytes,
               StrategyResult& out) {
  std::vector<double> mine;
  for (const StepTimes& t : steps)
    for (auto field : kFields) mine.push_back(t.*field);
  mine.push_back(state_bytes);
  for (double v : bytes_values(dp_bytes)) mine.push_back(v);
  for (double v : bytes_values(tp_bytes)) mine.push_back(v);
  const std::vector<std::string> all = gather_bytes_to_root(grid.world(), pack_doubles(mine));
  if (all.empty()) return;
  const std::size_t n = steps.size();
  const std::size_t f = kFields.size();
  std::vector<std::vector<double>> ranks;
  for (const std::string& blob : all) ranks.push_back(unpack_doubles(blob));
  for (std::size_t k = 0; k < f; ++k) {
    std::vector<double> critical(n, 0.0);
    for (const auto& r : ranks)
      for (std::size_t s = 0; s < n; ++s) critical[s] = std::max(critical[s], r[s * f + k]);
    out.median.*kFields[k] = median(critical);
  }
  for (const auto& r : ranks) {
    std::vector<double> opt_cpu, busy;
    for (std::size_t s = 0; s < n; ++s) {
      opt_cpu.push_back(r[s * f + 8]);
      busy.push_back(r[s * f + 9]);
    }
    out.opt_cpu_ms.push_back(median(opt_cpu));
    out.busy_cpu_ms.push_back(median(busy));
    out.state_mb.push_back(r[n * f] / (1024.0 * 1024.0));
    out.dp_bytes += bytes_from(r, n * f + 1);
    out.tp_bytes += bytes_from(r, n * f + 5);
  }
  out.dp_bytes = per_step(out.dp_bytes, static_cast<int>(n));
  out.tp_bytes = per_step(out.tp_bytes, static_cast<int>(n));
}

// World rank 0's value of `flag`, on every rank.
bool agreed_flag(comm::Communicator& world, bool flag) {
  return world.all_gather_u64(flag ? 1 : 0)[0] != 0;
}

}  // namespace

comm::CommBytes StrategyResult::bytes() const {
  comm::CommBytes b = dp_bytes;
  b += tp_bytes;
  return b;
}

CompareResult run_strategies(comm::Grid& grid, const model::ModelSpec& model,
                             const RunOptions& options,
                             const std::vector<plan::Strategy>& strategies,
                             const SessionOptions& session) {
  validate(options);
  comm::Communicator& world = grid.world();
  const bool root = world.rank() == 0;
  CompareResult result;
  result.options = options;
  result.model_name = model.name;
  result.model_numel = model.total_numel();
  result.verify.ran = session.verify;
  Trace trace(!session.trace_path.empty());
  world.barrier();
  trace.reset_epoch();

  std::unique_ptr<Reference> reference;
  std::vector<std::vector<float>> first;  // root: replica 0 of the first strategy
  std::string first_name;
  Mismatch worst;
  std::string worst_where;
  for (plan::Strategy strategy : strategies) {
    plan::PlanOptions plan_opts = plan_options(options, strategy);
    if (world.rank() == options.perturb_plan_rank)
      plan_opts.variant = plan_opts.variant == plan::PlannerVariant::kCanzona
                              ? plan::PlannerVariant::kPaper
                              : plan::PlannerVariant::kCanzona;
    const plan::Plan plan = plan::make_plan(model, plan_opts);
    validate_plan(model, plan, grid.shape());
    check_plan_agreement(world, plan);

    StrategyResult sr;
    sr.strategy = strategy;
    sr.plan_hash = plan::plan_hash(plan);
    sr.buckets = static_cast<int>(plan.stages[0].layout.buckets.size());
    for (const auto& groups : plan.stages[0].groups)
      sr.micro_groups += static_cast<int>(groups.size());
    const plan::Metrics metrics = plan::compute_metrics(model, plan);
    sr.predicted_flops_max = metrics.max_rank.flops;
    sr.predicted_flops_mean = metrics.mean_rank.flops;
    for (const auto& dp_loads : metrics.loads[0])
      for (const plan::RankLoad& load : dp_loads) sr.predicted_flops.push_back(load.flops);

    StrategyRunner runner(grid, model, plan, options, trace);
    world.barrier();
    std::vector<StepTimes> timed;
    comm::CommBytes dp0, tp0;
    for (int s = 1; s <= options.total_steps(); ++s) {
      if (s == options.warmup + 1) {
        dp0 = grid.dp().bytes();
        tp0 = grid.tp().bytes();
      }
      const StepTimes t = runner.step(s);
      if (s > options.warmup) timed.push_back(t);
    }
    runner.finish();
    summarize(grid, timed, static_cast<double>(runner.state_bytes()), grid.dp().bytes() - dp0,
              grid.tp().bytes() - tp0, sr);

    if (session.verify) {
      if (root && !reference) {
        reference = std::make_unique<Reference>(model, options);
        reference->run_until(options.total_steps());
      }
      for (int d = 0; d < options.dp; ++d) {
        std::vector<std::vector<float>> got =
            gather_replica(grid, model, plan.stages[0].layout, runner.params(), d);
        if (!root) continue;
        const std::string where = str(plan::to_string(strategy), ", DP replica ", d);
        const Mismatch vs_ref = compare_params(model, got, reference->params());
        result.verify.elements = vs_ref.elements;
        if (vs_ref.found && !worst.found) {
          worst = vs_ref;
          worst_where = where + " vs the single-process reference";
        }
        worst.max_abs_diff = std::max(worst.max_abs_diff, vs_ref.max_abs_diff);
        if (!first.empty()) {
          const Mismatch vs_first = compare_params(model, got, first);
          if (vs_first.found && !worst.found) {
            worst = vs_first;
            worst_where = where + " vs " + first_name;
          }
          worst.max_abs_diff = std::max(worst.max_abs_diff, vs_first.max_abs_diff);
        }
        if (first.empty() && d == 0) {
          first = std::move(got);
          first_name = plan::to_string(strategy);
        }
      }
    }
    result.strategies.push_back(std::move(sr));
  }
  if (session.verify) {
    VerifyResult& v = result.verify;
    v.bitwise = !worst.found;
    v.max_abs_diff = worst.max_abs_diff;
    if (worst.found) v.first_mismatch = worst_where + ": " + worst.describe();
    v.passed = v.bitwise || (options.reduce_mode == comm::ReduceMode::kNative &&
                             v.max_abs_diff <= session.verify_tolerance);
    v.bitwise = agreed_flag(world, v.bitwise);
    v.passed = agreed_flag(world, v.passed);
  }
  if (!session.trace_path.empty()) write_chrome_trace(grid, trace, session.trace_path);
  return result;
}

}  // namespace canzona::runtime
