#include "canzona/plan/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

#include "canzona/common/error.h"
#include "canzona/common/svg.h"

namespace canzona::plan {
namespace {

std::string fixed(double value, int digits = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

// `value` with a k/M/G/T suffix and 3 significant digits from 1000 on ("69.3G"), else whole.
std::string compact(double value) {
  const char* suffix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (value >= 999.5 && i < 5) value /= 1000.0, ++i;
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), i == 0 ? "%.0f%s" : "%.3g%s", value, suffix[i]);
  return buffer;
}

std::string task_name(const model::ModelSpec& model, const plan::Task& t) {
  const model::ParamSpec& p = model.params[t.param];
  return t.piece < 0 ? p.name : p.name + ":" + p.pieces[t.piece].name;
}

nlohmann::json ratio_json(const plan::Ratio& r) {
  return {{"memory", r.memory}, {"flops", r.flops}};
}

std::vector<plan::RankLoad> flatten(const plan::Metrics& m) {
  std::vector<plan::RankLoad> out;
  for (const auto& stage : m.loads) out.insert(out.end(), stage.cells.begin(), stage.cells.end());
  return out;
}

// Throws Error "<label>: <what> is <value>, not a finite number" unless `value` is finite.
// `what` is a string or a callable returning one, called only on failure: a plan for 2^20 ranks
// checks millions of values, and formatting each one's name would dominate the time.
template <typename What>
void finite(const PlanRun& run, double value, const What& what) {
  if (std::isfinite(value)) return;
  std::string name;
  if constexpr (std::is_invocable_v<What>)
    name = what();
  else
    name = what;
  throw Error(str("plan '", run.label, "': ", name, " is ", value,
                  ", not a finite number (internal error; please report it)"));
}

}  // namespace

void require_finite(const PlanRun& run) {
  const plan::Metrics& m = run.metrics;
  finite(run, run.plan_ms, "plan time");
  const std::pair<const char*, const plan::Ratio*> ratios[] = {
      {"dp", &m.dp},
      {"tp", &m.tp},
      {"grid", &m.grid},
      {"tp_worst_group", &m.tp_worst_group},
      {"lower_bound.dp", &m.lower_bound_dp},
      {"lower_bound.tp", &m.lower_bound_tp},
      {"lower_bound.grid", &m.lower_bound_grid}};
  for (const auto& [name, ratio] : ratios) {
    finite(run, ratio->memory, str(name, " memory ratio"));
    finite(run, ratio->flops, str(name, " FLOPs ratio"));
  }
  finite(run, m.max_rank.flops, "max rank FLOPs");
  finite(run, m.max_rank.memory, "max rank memory");
  finite(run, m.mean_rank.flops, "mean rank FLOPs");
  finite(run, m.mean_rank.memory, "mean rank memory");
  finite(run, m.group_makespan_sum, "sum of group makespans");
  finite(run, m.bucket_comm_imbalance, "bucket shard max/mean");
  for (std::size_t b = 0; b < m.bucket_shard_ratio.size(); ++b)
    finite(run, m.bucket_shard_ratio[b], [&] { return str("bucket ", b, " shard ratio"); });
  for (std::size_t s = 0; s < m.loads.size(); ++s)
    for (int d = 0; d < m.loads[s].dp; ++d)
      for (int t = 0; t < m.loads[s].tp; ++t) {
        auto where = [&](const char* what) {
          return [&, what] { return str("stage ", s, " rank (dp ", d, ", tp ", t, ") ", what); };
        };
        finite(run, m.loads[s].at(d, t).flops, where("FLOPs"));
        finite(run, m.loads[s].at(d, t).memory, where("memory"));
      }
  for (const plan::StagePlan& stage : run.plan.stages) {
    for (std::size_t i = 0; i < stage.tasks.size(); ++i) {
      const plan::Task& t = stage.tasks[i];
      auto where = [&](const char* what) {
        return [&, what] { return str("stage ", stage.stage, " task ", i, " ", what); };
      };
      finite(run, t.cost, where("cost"));
      finite(run, t.flops, where("FLOPs"));
      finite(run, t.state_bytes, where("state bytes"));
    }
    for (const auto& groups : stage.groups)
      for (std::size_t g = 0; g < groups.size(); ++g)
        finite(run, groups[g].makespan,
               [&] { return str("stage ", stage.stage, " micro group ", g, " makespan"); });
  }
  if (run.plan.expert && m.expert) {
    finite(run, m.whole_grid.memory, "whole grid memory ratio");
    finite(run, m.whole_grid.flops, "whole grid FLOPs ratio");
    require_finite(
        PlanRun{run.label + " expert buffer", run.plan.expert->plan, *m.expert, run.plan_ms});
  }
}

std::string balance_table(const model::ModelSpec& model, const std::vector<PlanRun>& runs) {
  std::ostringstream os;
  const plan::PlanOptions& o = runs.front().plan.options;
  os << "model " << model.name << " (" << model.params.size() << " params, "
     << fixed(model.total_numel() / 1e9, 3) << "B elements"
     << (model.arch.num_experts > 0 ? str(", ", fixed(model.active_numel() / 1e9, 3),
                                          "B used per token: ", model.arch.experts_per_token,
                                          " of ", model.arch.num_experts, " experts")
                                    : std::string())
     << "), dp=" << o.dims.dp << " tp=" << o.dims.tp << " pp=" << o.dims.pp
     << (runs.front().plan.expert ? str(" ep=", o.dims.ep, " etp=", o.dims.etp, " (expert DP ",
                                        runs.front().plan.expert->edp, ")")
                                  : std::string())
     << ", optimizer " << o.cost.matrix_optimizer << ", cost " << cost::to_string(o.cost.kind)
     << ", alpha " << o.alpha << ", C_max " << o.cmax_mb << " MiB"
     << (o.cost.precision == DType::kBF16
             ? o.cost.grad_reduce_in_fp32 ? ", bf16 params, fp32 grads (memory at those dtypes)"
                                          : ", bf16 params and grads (memory at those dtypes)"
             : "")
     << "\n\n";
  // Each column as wide as its label and two spaces, at least 18.
  std::vector<int> widths;
  for (const auto& run : runs)
    widths.push_back(std::max(18, static_cast<int>(run.label.size()) + 2));
  char line[256];
  std::snprintf(line, sizeof(line), "%-28s", "max/mean");
  os << line;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::snprintf(line, sizeof(line), "%*s", widths[i], runs[i].label.c_str());
    os << line;
  }
  os << "\n";
  auto row = [&](const char* name, auto get) {
    std::snprintf(line, sizeof(line), "%-28s", name);
    os << line;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      std::snprintf(line, sizeof(line), "%*s", widths[i], get(runs[i]).c_str());
      os << line;
    }
    os << "\n";
  };
  auto num = [&](double v, int digits = 3) { return fixed(v, digits); };
  // A ratio over its lower bound: 1.00 = no plan can do better on this axis.
  auto gap = [&](const plan::Ratio& ratio, const plan::Ratio& bound) {
    return num(ratio.memory / bound.memory, 2) + "/" + num(ratio.flops / bound.flops, 2);
  };
  row("DP memory", [&](const PlanRun& r) { return num(r.metrics.dp.memory); });
  row("DP FLOPs", [&](const PlanRun& r) { return num(r.metrics.dp.flops); });
  row("  DP lower bound mem/FLOPs", [&](const PlanRun& r) {
    return num(r.metrics.lower_bound_dp.memory, 2) + "/" + num(r.metrics.lower_bound_dp.flops, 2);
  });
  row("  DP ratio/bound mem/FLOPs",
      [&](const PlanRun& r) { return gap(r.metrics.dp, r.metrics.lower_bound_dp); });
  row("TP memory", [&](const PlanRun& r) { return num(r.metrics.tp.memory); });
  row("TP FLOPs", [&](const PlanRun& r) { return num(r.metrics.tp.flops); });
  row("  TP lower bound mem/FLOPs", [&](const PlanRun& r) {
    return num(r.metrics.lower_bound_tp.memory, 2) + "/" + num(r.metrics.lower_bound_tp.flops, 2);
  });
  row("  TP ratio/bound mem/FLOPs",
      [&](const PlanRun& r) { return gap(r.metrics.tp, r.metrics.lower_bound_tp); });
  row("  worst TP group mem/FLOPs", [&](const PlanRun& r) {
    return num(r.metrics.tp_worst_group.memory, 2) + "/" + num(r.metrics.tp_worst_group.flops, 2);
  });
  row("grid memory", [&](const PlanRun& r) { return num(r.metrics.grid.memory); });
  row("grid FLOPs", [&](const PlanRun& r) { return num(r.metrics.grid.flops); });
  row("  grid lower bound mem/FLOPs", [&](const PlanRun& r) {
    return num(r.metrics.lower_bound_grid.memory, 2) + "/" +
           num(r.metrics.lower_bound_grid.flops, 2);
  });
  row("  grid ratio/bound mem/FLOPs",
      [&](const PlanRun& r) { return gap(r.metrics.grid, r.metrics.lower_bound_grid); });
  row("max rank GFLOP / GiB", [&](const PlanRun& r) {
    return num(r.metrics.max_rank.flops / 1e9, 0) + " / " +
           num(r.metrics.max_rank.memory / (1024.0 * 1024 * 1024), 2);
  });
  row("TP micro groups", [&](const PlanRun& r) { return std::to_string(r.metrics.tp_groups); });
  row("  sum of group makespans", [&](const PlanRun& r) {
    if (r.metrics.group_makespan_sum <= 0) return std::string("-");
    char text[32];
    std::snprintf(text, sizeof(text), "%.3g", r.metrics.group_makespan_sum);
    return std::string(text);
  });
  row("bucket shard max/mean",
      [&](const PlanRun& r) { return num(r.metrics.bucket_comm_imbalance, 2); });
  row("padding elements (% buffer)", [&](const PlanRun& r) {
    const double share = r.metrics.buffer_elements > 0
                             ? 100.0 * static_cast<double>(r.metrics.padding_elements) /
                                   static_cast<double>(r.metrics.buffer_elements)
                             : 0.0;
    return compact(static_cast<double>(r.metrics.padding_elements)) + " (" + num(share, 2) + "%)";
  });
  row("divided element-wise",
      [&](const PlanRun& r) { return std::to_string(r.metrics.divided_params); });
  row("idle ranks", [&](const PlanRun& r) { return std::to_string(r.metrics.idle_ranks); });
  if (runs.front().metrics.expert) {
    // The expert buffer (one EP rank's experts over expert DP x ETP); the rows above are the
    // dense buffer's.
    auto expert = [&](const PlanRun& r) -> const plan::Metrics& { return *r.metrics.expert; };
    row("expert DP memory", [&](const PlanRun& r) { return num(expert(r).dp.memory); });
    row("expert DP FLOPs", [&](const PlanRun& r) { return num(expert(r).dp.flops); });
    row("  expert DP ratio/bound",
        [&](const PlanRun& r) { return gap(expert(r).dp, expert(r).lower_bound_dp); });
    row("expert TP memory/FLOPs", [&](const PlanRun& r) {
      return num(expert(r).tp.memory, 2) + "/" + num(expert(r).tp.flops, 2);
    });
    row("expert grid memory/FLOPs", [&](const PlanRun& r) {
      return num(expert(r).grid.memory, 2) + "/" + num(expert(r).grid.flops, 2);
    });
    row("whole grid memory/FLOPs", [&](const PlanRun& r) {
      return num(r.metrics.whole_grid.memory, 2) + "/" + num(r.metrics.whole_grid.flops, 2);
    });
    row("expert TP micro groups",
        [&](const PlanRun& r) { return std::to_string(expert(r).tp_groups); });
  }
  row("plan time (ms)", [&](const PlanRun& r) { return num(r.plan_ms, 2); });
  os << "\nstandard ZeRO-1 equal chunks would split " << runs.front().metrics.split_tensors
     << " tensors across DP ranks (no matrix optimizer can run on those without communication)\n";
  if (runs.front().metrics.expert)
    os << "mixture of experts: the DP, TP and grid rows are the dense buffer (dp x tp); the expert "
          "rows the expert buffer of one EP rank (expert DP x ETP); whole grid: each rank's dense "
          "plus expert load\n";
  if (runs.back().metrics.idle_ranks > 0)
    os << "note: " << runs.back().metrics.idle_ranks
       << " ranks own no optimizer work in the last plan (more ranks than tasks)\n";
  return os.str();
}

namespace {

// Each stage's buckets (cuts, params, owners), tasks, micro groups and per-rank loads.
nlohmann::json stages_json(const model::ModelSpec& model, const plan::Plan& p,
                           const plan::Metrics& m) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const plan::StagePlan& stage = p.stages[s];
    nlohmann::json js;
    js["stage"] = stage.stage;
    nlohmann::json buckets = nlohmann::json::array();
    for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
      const auto& bucket = stage.layout.buckets[b];
      nlohmann::json jb;
      jb["offset"] = bucket.offset;
      jb["numel"] = bucket.numel;
      jb["cuts"] = stage.cuts.empty() ? nlohmann::json::array() : nlohmann::json(stage.cuts[b]);
      nlohmann::json params = nlohmann::json::array();
      for (const auto& slot : bucket.slots) {
        const int owner = stage.owner[slot.param];
        params.push_back({{"name", model.params[slot.param].name},
                          {"offset", slot.offset},
                          {"numel", slot.numel},
                          {"owner", owner == plan::kDivided    ? nlohmann::json("divided")
                                    : owner == plan::kEveryone ? nlohmann::json("all")
                                                               : nlohmann::json(owner)}});
      }
      jb["params"] = std::move(params);
      buckets.push_back(std::move(jb));
    }
    js["buckets"] = std::move(buckets);
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& t : stage.tasks)
      tasks.push_back({{"name", task_name(model, t)},
                       {"shape", {t.rows, t.cols}},
                       {"dp_owner", t.dp_owner},
                       {"host", t.host},
                       {"group", t.group},
                       {"cost", t.cost}});
    js["tasks"] = std::move(tasks);
    nlohmann::json groups = nlohmann::json::array();
    for (std::size_t d = 0; d < stage.groups.size(); ++d)
      for (std::size_t g = 0; g < stage.groups[d].size(); ++g) {
        const auto& group = stage.groups[d][g];
        nlohmann::json jt = nlohmann::json::array();
        for (int t : group.tasks)
          jt.push_back({{"name", task_name(model, stage.tasks[t])}, {"host", stage.tasks[t].host}});
        groups.push_back({{"dp", d},
                          {"index", g},
                          {"makespan", group.makespan},
                          {"max_host_bytes", group.max_host_bytes},
                          {"tasks", std::move(jt)}});
      }
    js["micro_groups"] = std::move(groups);
    js["loads"] = nlohmann::json::array();
    for (int d = 0; d < m.loads[s].dp; ++d) {
      nlohmann::json jr = nlohmann::json::array();
      for (int t = 0; t < m.loads[s].tp; ++t) {
        const plan::RankLoad& l = m.loads[s].at(d, t);
        jr.push_back({{"flops", l.flops}, {"memory", l.memory}});
      }
      js["loads"].push_back(std::move(jr));
    }
    stages.push_back(std::move(js));
  }
  return stages;
}

}  // namespace

nlohmann::json plan_json(const model::ModelSpec& model, const PlanRun& run) {
  const plan::Plan& p = run.plan;
  const plan::Metrics& m = run.metrics;
  nlohmann::json j;
  j["plan_ms"] = run.plan_ms;
  j["model"] = model.name;
  j["strategy"] = plan::to_string(p.options.strategy);
  j["planner"] = plan::to_string(p.options.variant);
  j["layerwise_tp"] = plan::to_string(p.options.layerwise_tp);
  j["layerwise_buckets"] = plan::to_string(p.options.layerwise_buckets);
  j["bucket_order"] = p.options.reorder_buckets ? "free" : "keep";
  j["optimizer"] = p.options.cost.matrix_optimizer;
  j["cost"] = cost::to_string(p.options.cost.kind);
  j["zero_stage"] = to_int(p.options.layout.zero_stage);
  j["precision"] = to_string(p.options.cost.precision);
  j["grad_reduce_in_fp32"] = p.options.cost.grad_reduce_in_fp32;
  j["dp"] = p.options.dims.dp;
  j["tp"] = p.options.dims.tp;
  j["pp"] = p.options.dims.pp;
  if (!p.options.pp_layout.empty()) j["pp_layout"] = p.options.pp_layout;
  j["ep"] = p.options.dims.ep;
  j["etp"] = p.options.dims.etp;
  j["alpha"] = p.options.alpha;
  j["cmax_mb"] = p.options.cmax_mb;
  // The remaining PlanOptions make_plan reads, so the plan can be re-made from this file
  // (`canzona plan --from-plan`).
  j["bucket_size"] = p.options.layout.bucket_size;
  j["param_align"] = p.options.layout.param_align;
  j["pad_bucket_end"] = p.options.layout.pad_bucket_end;
  j["asc_group_tasks"] = p.options.asc_group_tasks;
  j["optimizer_options"] = p.options.cost.optimizer_options;
  j["balance"] = {{"dp", ratio_json(m.dp)},
                  {"tp", ratio_json(m.tp)},
                  {"tp_worst_group", ratio_json(m.tp_worst_group)},
                  {"grid", ratio_json(m.grid)}};
  if (m.expert) {
    // The expert buffer over expert DP x ETP, and every rank's dense plus expert load.
    const plan::Metrics& e = *m.expert;
    j["balance"]["expert"] = {{"dp", ratio_json(e.dp)},
                              {"tp", ratio_json(e.tp)},
                              {"tp_worst_group", ratio_json(e.tp_worst_group)},
                              {"grid", ratio_json(e.grid)}};
    j["balance"]["whole_grid"] = ratio_json(m.whole_grid);
  }
  j["lower_bound"] = {{"dp", ratio_json(m.lower_bound_dp)},
                      {"tp", ratio_json(m.lower_bound_tp)},
                      {"grid", ratio_json(m.lower_bound_grid)}};
  // balance / lower_bound per axis: 1 = no plan of this kind can do better.
  auto gap_json = [](const plan::Ratio& ratio, const plan::Ratio& bound) {
    return nlohmann::json{{"memory", ratio.memory / bound.memory},
                          {"flops", ratio.flops / bound.flops}};
  };
  j["gap_to_bound"] = {{"dp", gap_json(m.dp, m.lower_bound_dp)},
                       {"tp", gap_json(m.tp, m.lower_bound_tp)},
                       {"grid", gap_json(m.grid, m.lower_bound_grid)}};
  j["padding_elements"] = m.padding_elements;
  j["buffer_elements"] = m.buffer_elements;
  // "tp" is the degree, so the group count is the flat key "tp.groups".
  j["tp.groups"] = m.tp_groups;
  j["tp_group_makespan_sum"] = m.group_makespan_sum;
  j["split_tensors"] = m.split_tensors;
  j["divided_params"] = m.divided_params;
  j["idle_ranks"] = m.idle_ranks;
  j["bucket_shard_ratio"] = m.bucket_shard_ratio;
  j["plan_hash"] = plan::plan_hash(p);
  j["stages"] = stages_json(model, p, m);
  // Convenience views of stage 0 for single-stage plans.
  j["buckets"] = j["stages"][0]["buckets"];
  j["micro_groups"] = j["stages"][0]["micro_groups"];
  if (p.expert) {
    const plan::ExpertPlan& e = *p.expert;
    const plan::Metrics& em = *m.expert;
    j["expert"] = {{"ep", e.ep},
                   {"etp", e.etp},
                   {"edp", e.edp},
                   {"params", e.model.params.size()},
                   {"lower_bound",
                    {{"dp", ratio_json(em.lower_bound_dp)},
                     {"tp", ratio_json(em.lower_bound_tp)},
                     {"grid", ratio_json(em.lower_bound_grid)}}},
                   {"padding_elements", em.padding_elements},
                   {"buffer_elements", em.buffer_elements},
                   {"tp.groups", em.tp_groups},
                   {"idle_ranks", em.idle_ranks},
                   {"bucket_shard_ratio", em.bucket_shard_ratio},
                   {"stages", stages_json(e.model, e.plan, em)}};
  }
  return j;
}

namespace {

constexpr const char* kPeerColor = "#bbb";
constexpr const char* kOursColor = "#2a6";
constexpr double kMinWidth = 1100, kLeft = 84, kRight = 20, kPanelH = 200;
constexpr double kHeader = 108;  // above a panel's plot: its title and four legend rows
constexpr double kFooter = 44;   // below it: the DP-rank ticks and the axis label

// One run's per-rank values of one quantity, in grid order (stage, DP rank, TP rank), with the
// max/mean the table prints for it (the grid ratio: the worst stage's).
struct Series {
  const PlanRun* run = nullptr;
  std::vector<double> values;
  std::vector<double> stage_means;  // [stage]
  double max = 0, ratio = 1;
};

Series series(const PlanRun& run, double plan::RankLoad::*field, double plan::Ratio::*ratio) {
  Series out;
  out.run = &run;
  for (const plan::LoadGrid& stage : run.metrics.loads) {
    double sum = 0;
    for (const plan::RankLoad& l : stage.cells) {
      out.values.push_back(l.*field);
      out.max = std::max(out.max, l.*field);
      sum += l.*field;
    }
    out.stage_means.push_back(sum /
                              static_cast<double>(std::max<std::size_t>(1, stage.cells.size())));
  }
  out.ratio = run.metrics.grid.*ratio;
  return out;
}

// "123 TFLOP" in `unit`.
std::string in_unit(double v, const svg::Unit& unit) {
  return svg::sig(v / unit.scale, 3) + " " + std::string(unit.name);
}

// The legend rows of a panel: each series (max, mean at one stage, max/mean), then the lines.
std::vector<std::string> legend_rows(const Series* peer, const Series& ours, double bound,
                                     const svg::Unit& unit) {
  std::vector<std::string> rows;
  const bool staged = ours.stage_means.size() > 1;
  for (const Series* s : {peer, &ours}) {
    if (!s) continue;
    rows.push_back(str(s->run->label, ": max ", in_unit(s->max, unit),
                       staged ? std::string() : str(", mean ", in_unit(s->stage_means[0], unit)),
                       " (max/mean ", svg::fixed(s->ratio, 2), staged ? ", worst stage)" : ")"));
  }
  rows.push_back(str(staged ? "mean per stage, " : "mean, ", ours.run->label));
  rows.push_back(str("lower bound on the busiest rank: max/mean ", svg::fixed(bound, 2),
                     bound > 1.0 + 1e-9 ? "" : " (the mean)",
                     staged ? "" : str(" (", in_unit(ours.stage_means[0] * bound, unit), ")")));
  return rows;
}

// One panel of per-rank bars, the peer's and ours side by side for each rank in grid order, with
// the x-axis in DP ranks (a tick per DP group, stages separated) and the y-axis in `unit`.
void loads_panel(svg::Document& doc, double y0, double width, const std::string& quantity,
                 const Series* peer, const Series& ours, double bound, const svg::Unit& unit,
                 const plan::Metrics& grid) {
  const double top = y0 + kHeader, bottom = top + kPanelH, right = width - kRight;
  const double plot_w = right - kLeft;
  const std::size_t n = ours.values.size();
  double top_value = std::max(ours.max, 1e-30);
  if (peer) top_value = std::max(top_value, peer->max);
  for (double mean : ours.stage_means) top_value = std::max(top_value, mean * bound);
  const svg::Axis axis = svg::make_axis(0, top_value / unit.scale * 1.05);
  const double axis_hi = axis.ticks.empty() ? axis.hi : std::max(axis.hi, axis.ticks.back());
  auto y_of = [&](double v) { return bottom - v / unit.scale / axis_hi * kPanelH; };

  doc.text(kLeft, y0 + 18, quantity + " per rank",
           "class=\"panel-title\" font-size=\"13\" font-weight=\"bold\"");
  const std::vector<std::string> rows = legend_rows(peer, ours, bound, unit);
  double ly = y0 + 36;
  std::size_t row = 0;
  for (const Series* s : {peer, &ours}) {
    if (!s) continue;
    doc.rect(kLeft, ly - 10, 12, 12, str("fill=\"", s == peer ? kPeerColor : kOursColor, "\""));
    doc.text(kLeft + 18, ly, rows[row++], "class=\"legend-label\"");
    ly += 16;
  }
  for (const char* color : {"#06c", "#c30"}) {
    doc.line(kLeft - 6, ly - 4, kLeft + 12, ly - 4,
             str("stroke=\"", color, "\" stroke-dasharray=\"6,3\""));
    doc.text(kLeft + 18, ly, rows[row++], str("class=\"legend-label\" fill=\"", color, "\""));
    ly += 16;
  }

  for (double t : axis.ticks) {
    doc.line(kLeft, y_of(t * unit.scale), right, y_of(t * unit.scale), "stroke=\"#eee\"");
    doc.text(kLeft - 6, y_of(t * unit.scale) + 4, svg::fixed(t, axis.decimals),
             "class=\"tick-y\" text-anchor=\"end\"");
  }
  const std::string lx = svg::px(20), ly_mid = svg::px((top + bottom) / 2);
  doc.text(20, (top + bottom) / 2, std::string(unit.name),
           "class=\"axis-label y-label\" text-anchor=\"middle\" transform=\"rotate(-90 " + lx +
               " " + ly_mid + ")\"");

  const double slot = plot_w / static_cast<double>(std::max<std::size_t>(1, n));
  const double bar = peer ? slot * 0.45 : slot * 0.8;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = kLeft + static_cast<double>(i) * slot;
    if (peer)
      doc.rect(x, y_of(peer->values[i]), bar, bottom - y_of(peer->values[i]),
               str("class=\"bar-peer\" fill=\"", kPeerColor, "\""));
    doc.rect(x + (peer ? bar : 0.0), y_of(ours.values[i]), bar, bottom - y_of(ours.values[i]),
             str("class=\"bar-ours\" fill=\"", kOursColor, "\""));
  }
  // Each stage's mean and lower bound over its own ranks.
  const int dp = grid.loads.front().dp, tp = grid.loads.front().tp;
  const double stage_w = slot * dp * tp;
  for (std::size_t s = 0; s < ours.stage_means.size(); ++s) {
    const double x0 = kLeft + static_cast<double>(s) * stage_w, x1 = x0 + stage_w;
    doc.line(x0, y_of(ours.stage_means[s]), x1, y_of(ours.stage_means[s]),
             "class=\"mean\" stroke=\"#06c\" stroke-dasharray=\"6,3\"");
    if (bound > 1.0 + 1e-9 && ours.stage_means.size() == 1)  // the ratio bounds the worst stage
      doc.line(x0, y_of(ours.stage_means[s] * bound), x1, y_of(ours.stage_means[s] * bound),
               "class=\"lower-bound\" stroke=\"#c30\" stroke-dasharray=\"6,3\"");
    if (s > 0) doc.line(x0, top, x0, bottom + 30, "stroke=\"#555\"");
    if (ours.stage_means.size() > 1)
      doc.text(x0 + 4, top + 12, str("stage ", s), "class=\"stage-label\" fill=\"#555\"");
  }
  doc.line(kLeft, bottom, right, bottom, "stroke=\"black\"");

  // A tick per DP group; labels as dense as 28 px allows.
  const double group_w = slot * tp;
  const int every = std::max(1, static_cast<int>(std::ceil(28.0 / std::max(group_w, 1e-9))));
  for (std::size_t g = 0; g < n / static_cast<std::size_t>(std::max(1, tp)); ++g) {
    const double x = kLeft + static_cast<double>(g) * group_w;
    doc.line(x, bottom, x, bottom + 4, "stroke=\"black\"");
    const int d = static_cast<int>(g % static_cast<std::size_t>(dp));
    if (d % every == 0 && x + group_w / 2 + 10 <= right)
      doc.text(x + group_w / 2, bottom + 16, std::to_string(d),
               "class=\"tick-x\" text-anchor=\"middle\"");
  }
  doc.text((kLeft + right) / 2, bottom + 34,
           tp > 1 ? str("DP rank (each group: TP ranks 0-", tp - 1, " left to right)")
                  : std::string("DP rank"),
           "class=\"axis-label x-label\" text-anchor=\"middle\"");
}

}  // namespace

std::string loads_svg(const model::ModelSpec& model, const PlanRun* peer, const PlanRun& ours,
                      bool strongest_peer) {
  CANZONA_CHECK(!peer || flatten(peer->metrics).size() == flatten(ours.metrics).size());
  const Series of = series(ours, &plan::RankLoad::flops, &plan::Ratio::flops);
  const Series om = series(ours, &plan::RankLoad::memory, &plan::Ratio::memory);
  std::optional<Series> pf, pm;
  if (peer) {
    pf = series(*peer, &plan::RankLoad::flops, &plan::Ratio::flops);
    pm = series(*peer, &plan::RankLoad::memory, &plan::Ratio::memory);
  }
  const plan::PlanOptions& opt = ours.plan.options;
  const std::string title =
      str(model.name, ", DP ", opt.dims.dp, " x TP ", opt.dims.tp,
          opt.dims.pp > 1 ? str(" x PP ", opt.dims.pp) : std::string(),
          ours.plan.expert ? str(" x EP ", opt.dims.ep) : std::string(), ", ",
          opt.cost.matrix_optimizer, ": ", ours.label,
          peer ? str(" beside ", peer->label, strongest_peer ? ", the strongest peer" : "")
               : std::string());
  const svg::Unit flop = svg::flop_unit(std::max(of.max, pf ? pf->max : 0.0));
  const svg::Unit byte = svg::byte_unit(std::max(om.max, pm ? pm->max : 0.0));
  const double flop_bound = ours.metrics.lower_bound_grid.flops;
  const double byte_bound = ours.metrics.lower_bound_grid.memory;
  // Wide enough for the title and every legend row.
  double width = std::max(kMinWidth, kLeft + svg::text_width(title, 14, true) + kRight);
  for (const auto& rows : {legend_rows(pf ? &*pf : nullptr, of, flop_bound, flop),
                           legend_rows(pm ? &*pm : nullptr, om, byte_bound, byte)})
    for (const std::string& row : rows)
      width = std::max(width, kLeft + 18 + svg::text_width(row, 11) + kRight);
  const double caption_h = ours.plan.expert ? 16 : 0;
  const double panel_h = kHeader + kPanelH + kFooter;
  svg::Document doc(std::ceil(width), std::ceil(40 + caption_h + 2 * panel_h + 10));
  doc.text(kLeft, 24, title, "class=\"title\" font-size=\"14\" font-weight=\"bold\"");
  if (ours.plan.expert)
    doc.text(kLeft, 42, "the dense buffer's loads; the expert buffer's: canzona plan --json",
             "class=\"caption\" fill=\"#555\"");
  loads_panel(doc, 40 + caption_h, width, "optimizer FLOPs per step", pf ? &*pf : nullptr, of,
              flop_bound, flop, ours.metrics);
  loads_panel(doc, 40 + caption_h + panel_h, width, "optimizer-state memory", pm ? &*pm : nullptr,
              om, byte_bound, byte, ours.metrics);
  return doc.finish();
}

}  // namespace canzona::plan
