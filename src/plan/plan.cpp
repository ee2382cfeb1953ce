// make_plan: ties model, layout, cost and the strategies' stage planners together per pipeline
// stage, and the plan's hash.
#include "canzona/plan/plan.h"

#include <cmath>
#include <map>
#include <utility>

#include "algorithms/stage_common.h"
#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/cost/cost.h"
#include "canzona/model/load.h"
#include "canzona/plan/rank_plan.h"
#include "strategies/strategies.h"

namespace canzona::plan {

using detail::kMiB;

// Each message names the flag the field maps to (CLI flags map one-to-one onto PlanOptions) and
// the limit (plan.h). NaN fails every comparison, so each test is written to reject it.
void validate_options(const PlanOptions& o) {
  o.dims.check();
  CANZONA_REQUIRE(std::isfinite(o.alpha) && o.alpha >= 0.0 && o.alpha <= 1.0,
                  "--alpha must be in [0, 1] and finite (got ", o.alpha, ")");
  CANZONA_REQUIRE(!std::isnan(o.cmax_mb) && o.cmax_mb > 0.0,
                  "--cmax-mb must be positive and finite (got ", o.cmax_mb, ")");
  CANZONA_REQUIRE(o.cmax_mb * kMiB >= 1.0 && o.cmax_mb <= kMaxCmaxMb, "--cmax-mb must be between ",
                  1.0 / kMiB, " (one byte) and ", kMaxCmaxMb, " MiB (kMaxCmaxMb; got ", o.cmax_mb,
                  ")");
  CANZONA_REQUIRE(o.asc_group_tasks >= 0, "asc group size must be >= 0 (got ", o.asc_group_tasks,
                  ")");
  cost::check_options(o.cost);
}

namespace detail {

StagePlan plan_stage(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  if (strategy_parts(o.strategy, o.layerwise_tp).dp_sync == DpSync::kReduceScatter) {
    const auto buckets = static_cast<std::int64_t>(stage.layout.buckets.size());
    // buckets <= params <= 2^20 and dp <= 2^20: the product fits int64.
    CANZONA_REQUIRE((o.dims.dp + std::int64_t{1}) * buckets <= kMaxCutPoints, "stage ", stage.stage,
                    ": ", buckets, " buckets x (--dp ", o.dims.dp,
                    " + 1) = ", (o.dims.dp + std::int64_t{1}) * buckets,
                    " DP cut points is more than ", kMaxCutPoints,
                    " (kMaxCutPoints); use a larger --bucket-size or fewer DP ranks");
  }
  StagePlanner planner = nullptr;
  switch (o.strategy) {
    case Strategy::kSc:
      planner = plan_sc;
      break;
    case Strategy::kLayerwise:
      planner = plan_layerwise;
      break;
    case Strategy::kLayerwisePaper:
      planner = plan_layerwise_paper;
      break;
    case Strategy::kAsc:
      planner = plan_asc;
      break;
    case Strategy::kLbAsc:
      planner = plan_lb_asc;
      break;
    case Strategy::kFsdpA2a:
      planner = plan_fsdp_a2a;
      break;
  }
  CANZONA_CHECK(planner != nullptr, "unknown strategy ", static_cast<int>(o.strategy));
  return planner(model, std::move(stage), o);
}

}  // namespace detail

namespace {

// The optimizer's price of a rows x cols task: cost, FLOPs, state bytes.
struct TaskPrice {
  double cost = 0.0, flops = 0.0, state_bytes = 0.0;
};
// Prices by shape within one stage: a model repeats few shapes (every head of a per-head split),
// and each price re-reads the optimizer's options.
using PriceCache = std::map<std::pair<std::int64_t, std::int64_t>, TaskPrice>;

// Matrix tasks of one param: the whole matrix or one per piece, full (un-TP-split) shapes.
void add_tasks(const model::ParamSpec& p, int index, const PlanOptions& o, PriceCache& prices,
               std::vector<Task>& tasks) {
  auto what = [&] { return str("param '", p.name, "': fp32 gradient bytes"); };
  auto add = [&](int piece, std::int64_t rows, std::int64_t cols) {
    Task t;
    t.param = index;
    t.piece = piece;
    t.rows = rows;
    t.cols = cols;
    auto [it, fresh] = prices.try_emplace({rows, cols});
    if (fresh)
      it->second = {cost::task_cost(o.cost.matrix_optimizer, rows, cols, o.cost),
                    cost::optimizer_flops(o.cost.matrix_optimizer, rows, cols, o.cost),
                    cost::state_bytes(o.cost.matrix_optimizer, rows, cols, o.cost)};
    t.cost = it->second.cost;
    t.flops = it->second.flops;
    t.state_bytes = it->second.state_bytes;
    CANZONA_REQUIRE(std::isfinite(t.cost) && std::isfinite(t.flops) && std::isfinite(t.state_bytes),
                    "param '", p.name, "': optimizer cost of a ", rows, " x ", cols,
                    " matrix is not a finite number (shape too large)");
    t.gather_bytes =
        checked_mul(checked_mul(rows, cols, what), static_cast<std::int64_t>(sizeof(float)), what);
    tasks.push_back(t);
  };
  if (p.pieces.empty()) {
    add(-1, p.rows(), p.cols());
    return;
  }
  for (std::size_t k = 0; k < p.pieces.size(); ++k)
    add(static_cast<int>(k), p.pieces[k].rows(), p.cols());
}

// What every strategy's plan of a stage starts from: Megatron's layout and the matrix tasks
// (neither depends on the strategy or the planner), no owner yet.
StagePlan stage_base(const model::ModelSpec& model, std::vector<int> params, int stage_index,
                     const PlanOptions& o) {
  StagePlan stage;
  stage.stage = stage_index;
  stage.params = std::move(params);
  stage.layout = layout::build_layout(model, stage.params, detail::stage_layout_options(o));
  PriceCache prices;
  for (int p : stage.params)
    if (model.params[p].is_matrix()) add_tasks(model.params[p], p, o, prices, stage.tasks);
  // Bounds every sum of gather bytes the TP planners form (a host's bytes in a group).
  auto what = [&] { return str("stage ", stage_index, ": fp32 gradient bytes of all matrices"); };
  std::int64_t stage_bytes = 0;
  for (const Task& t : stage.tasks) stage_bytes = checked_add(stage_bytes, t.gather_bytes, what);
  stage.owner.assign(model.params.size(), -1);
  return stage;
}

template <typename T>
void hash_value(std::uint64_t& h, const T& value) {
  fnv1a_mix(h, &value, sizeof(value));
}

}  // namespace

namespace {

// The stages of the params `keep` selects, planned over options.dims.dp x options.dims.tp.
Plan plan_buffer(const model::ModelSpec& model, const PlanOptions& options,
                 const std::vector<bool>& keep) {
  const std::vector<int> stage_of = model::assign_stages(model, options.dims.pp, options.pp_layout);
  std::vector<std::vector<int>> stage_params(options.dims.pp);
  for (std::size_t p = 0; p < model.params.size(); ++p)
    if (keep[p]) stage_params[stage_of[p]].push_back(static_cast<int>(p));
  Plan plan;
  plan.options = options;
  if (options.dims.pp > 1) {
    const int tied = tied_embedding_param(model);
    if (tied >= 0 && keep[static_cast<std::size_t>(tied)]) {
      plan.tied_embedding = tied;
      stage_params.back().push_back(tied);  // the last stage's copy, where its output layer is
    }
  }
  for (int s = 0; s < options.dims.pp; ++s)
    plan.stages.push_back(detail::plan_stage(
        model, stage_base(model, std::move(stage_params[s]), s, options), options));
  return plan;
}

}  // namespace

Plan make_plan(const model::ModelSpec& model, const PlanOptions& options) {
  validate_options(options);
  model::validate(model, options.dims.tp);
  if (!model::has_experts(model)) {
    CANZONA_REQUIRE(options.dims.ep == 1 && options.dims.etp == 1, "--ep ", options.dims.ep,
                    " and --etp ", options.dims.etp, " need a mixture-of-experts model (model '",
                    model.name, "' has no experts)");
    return plan_buffer(model, options, std::vector<bool>(model.params.size(), true));
  }
  auto expert = std::make_shared<ExpertPlan>();
  model::ExpertPart part = model::expert_part(model, options.dims.ep, options.dims.etp, 0);
  expert->ep = options.dims.ep;
  expert->etp = options.dims.etp;
  expert->edp = options.dims.edp();
  expert->model = std::move(part.model);
  expert->source = std::move(part.source);
  model::validate(expert->model, options.dims.etp);
  PlanOptions eo = options;
  eo.dims.dp = expert->edp;
  eo.dims.tp = expert->etp;
  eo.dims.ep = 1;
  eo.dims.etp = 1;
  expert->plan =
      plan_buffer(expert->model, eo, std::vector<bool>(expert->model.params.size(), true));
  std::vector<bool> dense(model.params.size());
  for (std::size_t p = 0; p < model.params.size(); ++p)
    dense[p] = !model::is_expert_param(model.params[p]);
  Plan plan = plan_buffer(model, options, dense);
  plan.expert = std::move(expert);
  return plan;
}

int tied_embedding_param(const model::ModelSpec& model) {
  if (!model.arch.tied_embeddings) return -1;
  for (std::size_t p = 0; p < model.params.size(); ++p)
    if (model.params[p].name == "embedding.word_embeddings.weight") return static_cast<int>(p);
  return -1;
}

std::uint64_t plan_hash(const Plan& plan) {
  std::uint64_t h = kFnvOffset;
  const PlanOptions& o = plan.options;
  for (int v :
       {static_cast<int>(o.strategy), static_cast<int>(o.variant), o.dims.dp, o.dims.tp, o.dims.pp})
    hash_value(h, v);
  // ep and etp are mixed in only when they are not 1, so dense plans keep their hashes.
  if (o.dims.ep != 1 || o.dims.etp != 1)
    for (int v : {o.dims.ep, o.dims.etp}) hash_value(h, v);
  for (const StagePlan& stage : plan.stages) {
    for (int p : stage.params) hash_value(h, p);
    for (const auto& bucket : stage.layout.buckets)
      for (const auto& slot : bucket.slots) {
        hash_value(h, slot.offset);
        hash_value(h, slot.numel);
      }
    for (const auto& c : stage.cuts)
      for (std::int64_t v : c) hash_value(h, v);
    for (int v : stage.owner) hash_value(h, v);
    for (const Task& t : stage.tasks)
      for (int v : {t.param, t.piece, t.dp_owner, t.host, t.group}) hash_value(h, v);
    for (const auto& groups : stage.groups)
      for (const auto& g : groups)
        for (int t : g.tasks) hash_value(h, t);
    for (const auto& batch : stage.owner_batches) {
      hash_value(h, batch.size());
      for (int p : batch) hash_value(h, p);
    }
  }
  if (plan.tied_embedding >= 0) hash_value(h, plan.tied_embedding);  // PP > 1 only
  if (plan.expert) {
    const std::uint64_t expert = plan_hash(plan.expert->plan);
    hash_value(h, expert);
  }
  return h;
}

}  // namespace canzona::plan
