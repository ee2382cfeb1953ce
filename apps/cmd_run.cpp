// `canzona run` (one strategy) and `canzona compare` (several strategies on the same data), both
// under mpirun: real ranks, real collectives, real optimizer steps (docs/runtime.md).
//
// Errors. Bad flags, option values, models and unusable --json/--trace paths are found before MPI
// starts; alone the process exits 2 with one line, under a launcher the ranks start MPI only to
// agree on it (launch::agree_on_launch_error: one line from the lowest failing rank, every rank
// exits 2). Then, before the first collective of the grid, every
// rank's effective configuration is compared (launch::check_agreement). After that, every error
// ends the job through comm::end_job: raised by every rank at the same point (a setting ranks
// disagree on, world size, plan mismatch), it is printed once and every rank exits 2 without an
// abort banner; raised by one rank while the others wait in a collective, that rank's line and
// MPI_Abort end the job. --verify failing exits 1 on every rank.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/comm/timeout.h"
#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/common/json_io.h"
#include "canzona/model/load.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/run_report.h"
#include "canzona/runtime/run_settings.h"
#include "canzona/runtime/session.h"
#include "command.h"
#include "launch.h"
#include "planning_flags.h"

namespace canzona::apps {
namespace {

// The planning flags (PlanningFlags) and the rest of RunOptions (`options`, bound directly).
struct RunFlags : PlanningFlags {
  runtime::RunOptions options;
  std::string strategies;  // run: one name; compare: comma list or "all"
  std::string reduce_mode = "deterministic";
  std::string optimizer_options = "{}";
  std::string seed = "1";  // parse_seed
  double collective_timeout = comm::kDefaultCollectiveTimeoutS;
  bool no_pipeline = false;
  bool verify = false;
  int perturb_plan_rank = -1, corrupt_rank = -1;  // faults (common/faults.h); -1 = off
  std::string trace, json;
  CLI::Option* trace_flag = nullptr;  // given, even as "" (refused by check_output_path)
  CLI::Option* json_flag = nullptr;
};

// Everything that can be checked without MPI; throws UsageError.
runtime::RunOptions resolve(RunFlags& f) {
  runtime::RunOptions o = f.options;
  std::vector<std::set<std::string>> keys;  // per open object: the keys seen so far
  const auto reject_duplicates = [&keys](int, nlohmann::json::parse_event_t event,
                                         nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      throw UsageError(str("--optimizer-options: duplicate key '", parsed.get<std::string>(),
                           "' in one object"));
    return true;
  };
  try {
    o.optimizer_options = nlohmann::json::parse(f.optimizer_options, reject_duplicates);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str("--optimizer-options is not valid JSON: ", e.what()));
  }
  apply_planning_flags(f, "run/compare", o);  // after the options: --ns-* join them
  o.reduce_mode = comm::parse_reduce_mode(f.reduce_mode);
  comm::set_collective_timeout(f.collective_timeout);
  o.pipeline = !f.no_pipeline;
  o.seed = parse_seed(f.seed);
  runtime::validate(o);
  const std::int64_t ranks = o.dims.world();
  require_in_range(f.perturb_plan_rank, -1, ranks - 1, "--test-perturb-plan-rank",
                   "-1 or a world rank");
  require_in_range(f.corrupt_rank, -1, ranks - 1, "--test-corrupt-rank", "-1 or a world rank");
  if (f.perturb_plan_rank >= 0) faults::arm(faults::Fault::kPerturbPlan, {f.perturb_plan_rank});
  if (f.corrupt_rank >= 0) faults::arm(faults::Fault::kCorruptParams, {f.corrupt_rank});
  return o;
}

// Everything a launch needs that is checked before MPI starts.
struct Launch {
  runtime::RunOptions options;
  std::vector<plan::Strategy> strategies;
  model::ModelSpec model;
  runtime::SessionOptions session;
  launch::Settings settings;
};

Launch prepare(RunFlags& flags) {
  Launch l;
  l.options = resolve(flags);
  l.strategies = plan::parse_strategy_list(flags.strategies);
  if (flags.json_flag->count() > 0) check_output_path(flags.json, "--json");
  if (flags.trace_flag->count() > 0) check_output_path(flags.trace, "--trace");
  l.model = launch::load_model(l.options);
  if (l.options.dims.pp > 1) {
    // The stages are checked here, before MPI starts, so every rank fails alike.
    const std::vector<int> stage_of =
        model::assign_stages(l.model, l.options.dims.pp, l.options.pp_layout);
    for (int s = 0; s < l.options.dims.pp; ++s)
      CANZONA_REQUIRE(std::find(stage_of.begin(), stage_of.end(), s) != stage_of.end(), "--pp ",
                      l.options.dims.pp, ": stage ", s, " of model '", l.model.name,
                      "' holds no params");
  }
  l.session.verify = flags.verify;
  // A native bf16 reduction may round a gradient element to a neighbouring bf16 value: AdamW
  // turns that into a different step when the element is near zero, and a bf16 param moves by a
  // whole ulp (2^-8 of it) when its main param crosses a rounding boundary. No bound on the final
  // params would be both tight and safe, so the check is refused rather than run loosely.
  CANZONA_REQUIRE(!(flags.verify && l.options.precision == DType::kBF16 &&
                    l.options.reduce_mode == comm::ReduceMode::kNative),
                  "--verify with --precision bf16 needs --reduce-mode deterministic (a native bf16 "
                  "run differs from the reference by rounding that no tight bound covers)");
  l.session.trace_path = flags.trace;
  l.settings = runtime::launch_settings(l.options, l.session, l.strategies, l.model);
  l.settings.push_back({"--json", flags.json});
  return l;
}

int execute(RunFlags& flags) {
  Launch launch;
  LaunchSteps steps;
  steps.prepare = [&] {
    launch = prepare(flags);
    return launch.settings;
  };
  steps.grid_dims = [&] { return launch.options.dims; };
  steps.reduce_mode = [&] { return launch.options.reduce_mode; };
  steps.run = [&](comm::Grid& grid) {
    // A MoE model's expert groups (Megatron's expert DP, EP and expert TP), collective.
    comm::ExpertGroups experts;
    if (model::has_experts(launch.model))
      experts = comm::make_mpi_expert_groups(grid, launch.options.reduce_mode);
    const runtime::CompareResult result =
        runtime::run_strategies(grid, launch.model, launch.options, launch.strategies,
                                launch.session, experts.grid ? &experts : nullptr);
    if (grid.world().rank() == 0) {
      std::cout << runtime::format_report(result) << std::flush;
      if (!flags.json.empty()) write_json_file(flags.json, runtime::report_json(result));
      if (!flags.trace.empty()) std::cout << "trace: " << flags.trace << "\n";
    }
    const int exit_code = result.verify.ran && !result.verify.passed ? 1 : 0;
    grid.world().barrier();
    return exit_code;
  };
  return run_launched(steps);
}

void add_flags(CLI::App* sub, RunFlags& f, bool compare) {
  runtime::RunOptions& o = f.options;
  sub->add_option("--model", o.model,
                  "Preset (qwen3-tiny, qwen3-mini, ...), HF config.json or param-list JSON")
      ->capture_default_str();
  add_planning_flags(sub, f, PlanningCommand::kRun);
  if (compare) {
    f.strategies = "all";
    sub->add_option("--strategy,--strategies", f.strategies,
                    "Comma list of sc, layerwise, layerwise-paper, asc, lb-asc, fsdp-a2a, or all")
        ->capture_default_str();
  } else {
    f.strategies = "lb-asc";
    sub->add_option("--strategy", f.strategies, "sc | layerwise | layerwise-paper | asc | lb-asc")
        ->capture_default_str();
  }
  sub->add_option("--optimizer-options", f.optimizer_options,
                  "JSON object of the matrix optimizer's options, e.g. '{\"lr\":0.02}'")
      ->capture_default_str();
  sub->add_option("--steps", o.steps, "Timed steps")->capture_default_str();
  sub->add_option("--warmup", o.warmup, "Untimed steps before them")->capture_default_str();
  sub->add_option("--compute-scale", o.compute_scale,
                  "Simulated forward/backward: fraction of 6 x params x tokens FLOPs")
      ->capture_default_str();
  sub->add_option("--tokens", o.tokens, "Tokens per simulated batch")->capture_default_str();
  sub->add_option("--reduce-mode", f.reduce_mode, "deterministic | native")->capture_default_str();
  sub->add_option("--seed", f.seed, "Synthetic init and gradients")->capture_default_str();
  sub->add_option("--collective-timeout", f.collective_timeout,
                  "Seconds one collective or message may take before the rank ends (exit 2)")
      ->capture_default_str();
  sub->add_flag("--no-pipeline", f.no_pipeline,
                "Run TP micro groups one after another (no gather/compute overlap)");
  sub->add_flag("--verify", f.verify,
                "Compare final params bitwise with a single-process reference"
                " and across strategies");
  f.trace_flag = sub->add_option("--trace", f.trace, "Write a Chrome trace (Perfetto) to FILE");
  f.json_flag =
      sub->add_option("--json", f.json, "Write timings, bytes and verification as JSON to FILE");
  sub->add_option("--test-perturb-plan-rank", f.perturb_plan_rank)->group("");
  sub->add_option("--test-corrupt-rank", f.corrupt_rank)->group("");
}

}  // namespace

bool is_launch_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    return arg == "run" || arg == "compare";
  }
  return false;
}

void add_run_commands(CLI::App& app, int& exit_code) {
  auto run_flags = std::make_shared<RunFlags>();
  auto* run = app.add_subcommand("run", "Run one strategy for real under mpirun");
  add_flags(run, *run_flags, false);
  run->callback([run_flags, &exit_code] { exit_code = execute(*run_flags); });

  auto compare_flags = std::make_shared<RunFlags>();
  auto* compare = app.add_subcommand(
      "compare", "Run sc, layerwise, asc and lb-asc on the same data under mpirun");
  add_flags(compare, *compare_flags, true);
  compare->callback([compare_flags, &exit_code] { exit_code = execute(*compare_flags); });
}

}  // namespace canzona::apps
