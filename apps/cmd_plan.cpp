// `canzona plan`: plans a model for a DP x TP x PP grid and prints the balance before (asc, no
// balancing) and after (lb-asc as published, and ours), like the paper's Figure 3. With
// --from-plan OLD.json it re-plans for minimum state movement from the plan OLD.json records
// (plan/replan.h) and reports the bytes that move against the from-scratch plan.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <type_traits>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/cost/calibration.h"
#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/plan/peer_rule.h"
#include "canzona/plan/plan_report.h"
#include "canzona/plan/replan.h"
#include "command.h"
#include "planning_flags.h"

namespace canzona::apps {
namespace {

struct PlanFlags : PlanningFlags {
  std::string model;
  std::string strategy = "lb-asc";
  cost::OptimizerFlags optimizer_flags;  // unset: the optimizer's own defaults
  std::string json, svg, dump_params;
  bool json_given = false, svg_given = false, dump_params_given = false;  // even when empty
  // --from-plan OLD.json (given, even when empty) and --move-tolerance.
  std::string from_plan;
  bool from_plan_given = false;
  plan::ReplanOptions replan;
};

// Reading OLD.json (--from-plan). The file is not parsed into a Plan: its recorded options re-make
// the plan (make_plan and replan are deterministic; a min-movement plan records the recipe of the
// plan it was made from under "replan"/"from", re-made first), and its plan_hash must match the
// re-made one. Every malformed input is a one-line UsageError naming the file and the key.
template <typename T>
T json_key(const nlohmann::json& j, const std::string& path, const char* key) {
  const auto it = j.find(key);
  CANZONA_REQUIRE(it != j.end(), path, ": missing key '", key, "'");
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>)
    ok = it->is_boolean();
  else if constexpr (std::is_same_v<T, std::string>)
    ok = it->is_string();
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    ok = it->is_number_unsigned();
  else if constexpr (std::is_integral_v<T>)
    ok = it->is_number_integer() && it->get<std::int64_t>() >= std::numeric_limits<T>::min() &&
         it->get<std::int64_t>() <= std::numeric_limits<T>::max();
  else if constexpr (std::is_same_v<T, nlohmann::json>)
    ok = it->is_object();
  else
    ok = it->is_number();
  CANZONA_REQUIRE(ok, path, ": key '", key, "' has the wrong type or range (", it->type_name(),
                  ")");
  return it->get<T>();
}

// Runs `parse` and prefixes any UsageError with the file and key it came from.
template <typename F>
auto from_key(const std::string& path, const std::string& what, F parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw UsageError(str(path, ": ", what, ": ", e.what()));
  }
}

struct OldPlan {
  model::ModelSpec model;
  plan::Plan plan;
  nlohmann::json recipe;  // the keys that re-make it (replan.from of the next plan)
};

// The keys of a plan JSON that re-make its plan: the options, the model build flags, the hash and,
// for a min-movement plan, "replan": {"move_tolerance", "from": the recipe of its old plan}.
constexpr const char* kRecipeKeys[] = {"model",
                                       "strategy",
                                       "planner",
                                       "layerwise_tp",
                                       "layerwise_buckets",
                                       "bucket_order",
                                       "optimizer",
                                       "cost",
                                       "dp",
                                       "tp",
                                       "pp",
                                       "pp_layout",
                                       "ep",
                                       "etp",
                                       "alpha",
                                       "cmax_mb",
                                       "bucket_size",
                                       "param_align",
                                       "pad_bucket_end",
                                       "asc_group_tasks",
                                       "optimizer_options",
                                       "split_qkv",
                                       "split_fc1",
                                       "zero_stage",
                                       "precision",
                                       "grad_reduce_in_fp32",
                                       "plan_hash"};
// Re-plans nest this deep at most (each --from-plan of a min-movement plan adds one level).
constexpr int kMaxReplanDepth = 64;

// Re-makes the plan `j` records; `where` names it in messages ("OLD.json" or
// "OLD.json (replan.from)").
OldPlan remake_plan(const nlohmann::json& j, const std::string& where, const PlanFlags& f,
                    const model::ModelSpec& model, const cost::Calibration* calibration,
                    int depth) {
  CANZONA_REQUIRE(j.is_object(), where,
                  ": not a plan JSON object (written by canzona plan --json)");
  CANZONA_REQUIRE(depth < kMaxReplanDepth, where, ": re-plans nested more than ", kMaxReplanDepth,
                  " deep");
  const std::string& path = where;
  const auto name = json_key<std::string>(j, path, "model");
  CANZONA_REQUIRE(name == model.name, path, ": key 'model' is '", name, "' but --model gives '",
                  model.name, "'");
  plan::PlanOptions o;
  o.strategy = from_key(path, "key 'strategy'", [&] {
    return plan::parse_strategy(json_key<std::string>(j, path, "strategy"));
  });
  o.variant = from_key(path, "key 'planner'", [&] {
    return plan::parse_variant(json_key<std::string>(j, path, "planner"));
  });
  // Plans written before these options existed were made with today's defaults for layerwise's TP
  // mode and with buckets kept in Megatron order.
  o.layerwise_tp = from_key(path, "key 'layerwise_tp'", [&] {
    return plan::parse_layerwise_tp(j.value("layerwise_tp", std::string("duplicated")));
  });
  // Layer-wise plans written before the soft-minimum buckets had the fixed ones.
  o.layerwise_buckets = from_key(path, "key 'layerwise_buckets'", [&] {
    return plan::parse_layerwise_buckets(j.value("layerwise_buckets", std::string("fixed")));
  });
  o.reorder_buckets = from_key(path, "key 'bucket_order'", [&] {
    return plan::parse_bucket_order(j.value("bucket_order", std::string("keep")));
  });
  o.cost.kind = from_key(path, "key 'cost'", [&] {
    return cost::parse_cost_kind(json_key<std::string>(j, path, "cost"));
  });
  o.dims.dp = json_key<int>(j, path, "dp");
  o.dims.tp = json_key<int>(j, path, "tp");
  o.dims.pp = json_key<int>(j, path, "pp");
  // Plans of even stages record no layout.
  if (j.contains("pp_layout")) {
    CANZONA_REQUIRE(j.at("pp_layout").is_array(), path, ": key 'pp_layout' is not an array");
    for (const nlohmann::json& n : j.at("pp_layout")) {
      CANZONA_REQUIRE(
          n.is_number_integer() && n.get<std::int64_t>() >= 1 && n.get<std::int64_t>() <= (1 << 20),
          path, ": key 'pp_layout' holds ", n.dump(), ", not a layer count");
      o.pp_layout.push_back(n.get<int>());
    }
  }
  // Plans written before expert parallelism had none.
  o.dims.ep = j.contains("ep") ? json_key<int>(j, path, "ep") : 1;
  o.dims.etp = j.contains("etp") ? json_key<int>(j, path, "etp") : 1;
  o.alpha = json_key<double>(j, path, "alpha");
  o.cmax_mb = json_key<double>(j, path, "cmax_mb");
  o.layout.bucket_size = json_key<std::int64_t>(j, path, "bucket_size");
  o.layout.param_align = json_key<std::int64_t>(j, path, "param_align");
  o.layout.pad_bucket_end = json_key<bool>(j, path, "pad_bucket_end");
  o.asc_group_tasks = json_key<int>(j, path, "asc_group_tasks");
  o.cost.matrix_optimizer = json_key<std::string>(j, path, "optimizer");
  o.cost.optimizer_options = json_key<nlohmann::json>(j, path, "optimizer_options");
  // Plans written before the JSON recorded them were ZeRO-1 and fp32.
  if (j.contains("zero_stage")) {
    const int stage = json_key<int>(j, path, "zero_stage");
    o.layout.zero_stage =
        from_key(path, "key 'zero_stage'", [&] { return parse_zero_stage(stage, "zero_stage"); });
    o.cost.zero_stage = o.layout.zero_stage;
  }
  if (j.contains("precision")) {
    const std::string precision = json_key<std::string>(j, path, "precision");
    o.cost.precision =
        from_key(path, "key 'precision'", [&] { return parse_precision(precision, "precision"); });
  }
  if (j.contains("grad_reduce_in_fp32"))
    o.cost.grad_reduce_in_fp32 = json_key<bool>(j, path, "grad_reduce_in_fp32");
  o.cost.calibration = calibration;
  from_key(path, "recorded options", [&] {
    check_bucket_size(o.layout.bucket_size);
    plan::validate_options(o);
    return 0;
  });
  CANZONA_REQUIRE(o.cost.kind != cost::CostKind::kCalibrated || calibration != nullptr, path,
                  ": was planned with --cost calibrated; give the same --calibration FILE");
  PlanningFlags old_flags = f;
  old_flags.dims.tp = o.dims.tp;
  old_flags.split_qkv = json_key<std::string>(j, path, "split_qkv");
  old_flags.split_fc1 = json_key<bool>(j, path, "split_fc1");
  const std::uint64_t recorded = json_key<std::uint64_t>(j, path, "plan_hash");
  OldPlan old;
  old.model = from_key(path, "key 'split_qkv'",
                       [&] { return model::load_model(f.model, to_build_options(old_flags)); });
  for (const char* key : kRecipeKeys)
    if (j.contains(key)) old.recipe[key] = j.at(key);
  if (j.contains("replan")) {
    const nlohmann::json& r = j["replan"];
    CANZONA_REQUIRE(r.is_object(), path, ": key 'replan' has the wrong type or range (",
                    r.type_name(), ")");
    const std::string inner = path + " (replan)";
    plan::ReplanOptions ro;
    ro.tolerance = json_key<double>(r, inner, "move_tolerance");
    from_key(inner, "key 'move_tolerance'", [&] {
      plan::validate_replan_options(ro);
      return 0;
    });
    CANZONA_REQUIRE(r.contains("from"), inner, ": missing key 'from'");
    const OldPlan from =
        remake_plan(r["from"], path + " (replan.from)", f, model, calibration, depth + 1);
    old.plan = from_key(path, "recorded options",
                        [&] { return plan::replan(old.model, o, from.plan, ro); });
    old.recipe["replan"] = {{"move_tolerance", ro.tolerance}, {"from", from.recipe}};
  } else {
    old.plan = from_key(path, "recorded options", [&] { return plan::make_plan(old.model, o); });
  }
  const std::uint64_t remade = plan::plan_hash(old.plan);
  char hashes[160];
  std::snprintf(hashes, sizeof(hashes),
                "plan_hash 0x%016llx does not match the plan its recorded options give (0x%016llx)",
                static_cast<unsigned long long>(recorded), static_cast<unsigned long long>(remade));
  CANZONA_REQUIRE(recorded == remade, path, ": ", hashes,
                  "; was it made with another model or flags?");
  return old;
}

nlohmann::json movement_json(const plan::PlanRun& run, const plan::Movement& m) {
  const plan::Metrics& x = run.metrics;
  return {
      {"plan_hash", plan::plan_hash(run.plan)},
      {"plan_ms", run.plan_ms},
      {"balance",
       {{"dp", {{"flops", x.dp.flops}, {"memory", x.dp.memory}}},
        {"tp", {{"flops", x.tp.flops}, {"memory", x.tp.memory}}},
        {"grid", {{"flops", x.grid.flops}, {"memory", x.grid.memory}}}}},
      {"moved_state_bytes", m.moved_state_bytes},
      {"moved_matrix_bytes", m.moved_matrix_bytes},
      {"moved_elementwise_bytes", m.moved_elementwise_bytes},
      {"total_state_bytes", m.total_state_bytes},
      {"moved_fraction", m.total_state_bytes > 0 ? m.moved_state_bytes / m.total_state_bytes : 0.0},
      {"kept_tasks", m.kept_tasks},
      {"moved_tasks", m.moved_tasks}};
}

std::string movement_report(const plan::PlanRun& scratch, const plan::Movement& ms,
                            const plan::PlanRun& kept, const plan::Movement& mk,
                            const PlanFlags& f) {
  std::string out = str("\nre-plan from ", f.from_plan, " (move tolerance ", f.replan.tolerance,
                        "): optimizer state each plan makes ranks receive\n");
  char line[256];
  std::snprintf(line, sizeof(line), "%-28s%18s%18s\n", "", "from scratch", "min movement");
  out += line;
  auto row = [&](const char* name, double a, double b, int digits) {
    std::snprintf(line, sizeof(line), "%-28s%18.*f%18.*f\n", name, digits, a, digits, b);
    out += line;
  };
  row("DP FLOPs max/mean", scratch.metrics.dp.flops, kept.metrics.dp.flops, 3);
  row("DP memory max/mean", scratch.metrics.dp.memory, kept.metrics.dp.memory, 3);
  row("TP FLOPs max/mean", scratch.metrics.tp.flops, kept.metrics.tp.flops, 3);
  row("grid FLOPs max/mean", scratch.metrics.grid.flops, kept.metrics.grid.flops, 3);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  row("state moved (GiB)", ms.moved_state_bytes / kGiB, mk.moved_state_bytes / kGiB, 2);
  auto pct = [](const plan::Movement& m) {
    return m.total_state_bytes > 0 ? 100.0 * m.moved_state_bytes / m.total_state_bytes : 0.0;
  };
  row("state moved (% of total)", pct(ms), pct(mk), 1);
  std::snprintf(line, sizeof(line), "%-28s%18s%18s\n", "matrix tasks kept",
                str(ms.kept_tasks, "/", ms.kept_tasks + ms.moved_tasks).c_str(),
                str(mk.kept_tasks, "/", mk.kept_tasks + mk.moved_tasks).c_str());
  out += line;
  row("plan time (ms)", scratch.plan_ms, kept.plan_ms, 2);
  return out;
}

// Median of five planning runs of `options` (the plan itself is deterministic).
plan::PlanRun timed_plan(const model::ModelSpec& model, const plan::PlanOptions& options,
                         std::string label) {
  plan::PlanRun run;
  run.label = std::move(label);
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run.plan = plan::make_plan(model, options);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (ms.back() > 200.0) break;  // large plans: one timing is enough
  }
  std::sort(ms.begin(), ms.end());
  run.plan_ms = ms[ms.size() / 2];
  run.metrics = plan::compute_metrics(model, run.plan);
  return run;
}

int run_plan(const PlanFlags& f) {
  // Unusable output paths (empty, a directory, a missing or read-only directory) are found before
  // any work, so a long plan is never thrown away at the end.
  if (f.json_given) check_output_path(f.json, "--json");
  if (f.svg_given) check_output_path(f.svg, "--svg");
  if (f.dump_params_given) check_output_path(f.dump_params, "--dump-params");
  plan::PlanOptions options = to_plan_options(f);
  options.strategy = plan::parse_strategy(f.strategy);
  plan::check_zero_stage(options.layout.zero_stage, std::span(&options.strategy, 1));
  options.cost.kind = cost::parse_cost_kind(f.cost);
  cost::set_matrix_optimizer(options.cost, f.optimizer, f.optimizer_flags);
  // Flags first (plan::validate_options: grid, alpha, C_max, cost), then the files they name.
  plan::validate_options(options);
  CANZONA_REQUIRE(options.cost.kind != cost::CostKind::kCalibrated || !f.calibration.empty(),
                  "--cost calibrated needs --calibration FILE (written by canzona bench-kernels)");
  plan::validate_replan_options(f.replan);
  const model::ModelSpec model = model::load_model(f.model, to_build_options(f));

  cost::Calibration calibration;
  if (!f.calibration.empty()) {
    calibration = cost::Calibration::read(f.calibration);
    options.cost.calibration = &calibration;
  }
  OldPlan old;
  if (f.from_plan_given)
    old = remake_plan(read_json_file(f.from_plan), f.from_plan, f, model,
                      f.calibration.empty() ? nullptr : &calibration, 0);

  // Before: asc (start-index, round-robin). After: the requested strategy; for lb-asc with our
  // planner also the peers it must beat, each at its strongest: Megatron-LM's layer-wise optimizer
  // as shipped, the paper's algorithms as written and the authors' Megatron-Canzona code.
  std::vector<plan::PlanRun> runs;
  plan::PlanOptions before = options;
  before.strategy = plan::Strategy::kAsc;
  runs.push_back(timed_plan(model, before, "asc"));
  if (options.strategy == plan::Strategy::kLbAsc &&
      options.variant == plan::PlannerVariant::kCanzona) {
    plan::PlanOptions peer = options;
    peer.strategy = plan::Strategy::kLayerwise;
    runs.push_back(timed_plan(model, peer, "layerwise"));
    peer.strategy = plan::Strategy::kLbAsc;
    peer.variant = plan::PlannerVariant::kPaper;
    runs.push_back(timed_plan(model, peer, "lb-asc (paper)"));
    peer.variant = plan::PlannerVariant::kMegatronCanzona;
    runs.push_back(timed_plan(model, peer, "lb-asc (megatron-canzona)"));
  }
  const std::size_t peer_end = runs.size();  // runs[1, peer_end): the peers
  if (options.strategy != plan::Strategy::kAsc) {
    std::string label = plan::to_string(options.strategy);
    if (options.strategy == plan::Strategy::kLbAsc)
      label += str(" (", plan::to_string(options.variant), ")");
    runs.push_back(timed_plan(model, options, label));
  }
  std::string movement;
  nlohmann::json replan_json;
  if (f.from_plan_given) {
    const plan::PlanRun& scratch = runs.back();
    plan::PlanRun kept;
    kept.label = "min-movement";
    const auto start = std::chrono::steady_clock::now();
    kept.plan = plan::replan(model, options, old.plan, f.replan);
    kept.plan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    kept.metrics = plan::compute_metrics(model, kept.plan);
    const plan::Movement ms = plan::state_movement(model, old.plan, scratch.plan);
    const plan::Movement mk = plan::state_movement(model, old.plan, kept.plan);
    movement = movement_report(scratch, ms, kept, mk, f);
    replan_json = {{"from_plan", f.from_plan},
                   {"from_plan_hash", plan::plan_hash(old.plan)},
                   {"move_tolerance", f.replan.tolerance},
                   {"from", old.recipe},
                   {"from_scratch", movement_json(scratch, ms)},
                   {"min_movement", movement_json(kept, mk)}};
    runs.push_back(std::move(kept));
  }
  for (const plan::PlanRun& run : runs) plan::require_finite(run);
  std::cout << plan::balance_table(model, runs) << movement;
  if (options.alpha != 1.0 && options.variant == plan::PlannerVariant::kCanzona)
    std::cout << "note: --alpha shapes Algorithm 1 (--planner paper); our planner places params by "
                 "load, so it ignores alpha\n";
  if (f.dump_params_given) model::write_param_list(f.dump_params, model);
  if (f.json_given) {
    nlohmann::json j = plan::plan_json(model, runs.back());
    j["split_qkv"] = f.split_qkv;  // model build options, so --from-plan can re-make the plan
    j["split_fc1"] = f.split_fc1;
    if (f.from_plan_given) j["replan"] = std::move(replan_json);
    write_json_file(f.json, j);
  }
  if (f.svg_given) {
    // Ours beside the strongest peer the plan computed (the never-behind rule, peer_rule.h);
    // without peers beside asc, and asc alone.
    std::vector<plan::Peer> peers;
    for (std::size_t i = 1; i < peer_end; ++i)
      peers.push_back({&runs[i].metrics,
                       runs[i].plan.options.strategy == plan::Strategy::kLayerwise &&
                           runs[i].plan.options.layerwise_tp == plan::LayerwiseTp::kDuplicated});
    const std::size_t peer = peers.empty() ? 0 : 1 + plan::strongest_peer(peers);
    const plan::PlanRun* drawn = runs.size() > 1 ? &runs[peer] : nullptr;
    write_text_file(f.svg, plan::loads_svg(model, drawn, runs.back(), !peers.empty()));
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  auto* sub = app.add_subcommand("plan", "Plan DP cuts, TP hosts and micro groups; print balance");
  sub->add_option("--model", flags->model,
                  "Preset name (qwen3-0.6b ... qwen3-32b, qwen3-tiny, qwen3-mini), a Hugging "
                  "Face config.json, or a param-list JSON")
      ->required();
  sub->add_option("--strategy", flags->strategy, "sc | layerwise | layerwise-paper | asc | lb-asc")
      ->capture_default_str();
  add_planning_flags(sub, *flags, PlanningCommand::kPlan);
  sub->add_option("--ns-steps", flags->optimizer_flags.ns_steps,
                  "Muon Newton-Schulz steps (cost model; default " +
                      cost::default_option("muon", "ns_steps") + ")");
  sub->add_option("--precondition-frequency", flags->optimizer_flags.precondition_frequency,
                  "Shampoo/SOAP preconditioner refresh interval (cost model; default " +
                      cost::default_option("shampoo", "precondition_frequency") + ")");
  sub->add_option("--max-precond-dim", flags->optimizer_flags.max_precond_dim,
                  "Shampoo/SOAP: sides above this are not preconditioned (default " +
                      cost::default_option("shampoo", "max_precond_dim") + ")");
  auto* json = sub->add_option("--json", flags->json, "Write the plan and its metrics as JSON");
  auto* svg = sub->add_option(
      "--svg", flags->svg,
      "Write per-rank optimizer FLOPs and memory as SVG, beside the strongest peer");
  auto* dump =
      sub->add_option("--dump-params", flags->dump_params, "Write the model's param list as JSON");
  auto* from = sub->add_option("--from-plan", flags->from_plan,
                               "Re-plan for minimum state movement from a plan JSON written by "
                               "`canzona plan --json` (same --model)");
  sub->add_option("--move-tolerance", flags->replan.tolerance,
                  "With --from-plan: allowed DP/TP load max above the from-scratch plan, as a "
                  "fraction in [0, 10]")
      ->capture_default_str();
  sub->callback([flags, json, svg, dump, from, &exit_code] {
    flags->from_plan_given = from->count() > 0;
    flags->json_given = json->count() > 0;
    flags->svg_given = svg->count() > 0;
    flags->dump_params_given = dump->count() > 0;
    exit_code = run_plan(*flags);
  });
}

}  // namespace canzona::apps
