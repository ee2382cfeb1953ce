#include "canzona/plan/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>

#include "canzona/common/error.h"

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

// One panel: bars of `values` for two runs side by side, with mean and lower-bound lines.
void panel(std::ostringstream& svg, double y0, const std::string& title,
           const std::vector<double>& before, const std::vector<double>& after, double bound,
           const std::string& before_label, const std::string& after_label) {
  const double width = 960, height = 220, left = 60;  // plot area; labels to the right
  const std::size_t n = before.size();
  double top = 0.0, mean = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    top = std::max({top, before[i], after[i]});
    mean += after[i];
  }
  mean /= std::max<std::size_t>(1, n);
  top = std::max({top, mean * bound, 1e-30});
  const double bar = (width - left - 20) / std::max<std::size_t>(1, n);
  auto y_of = [&](double v) { return y0 + 30 + height * (1.0 - v / top); };
  svg << "<text x='" << left << "' y='" << y0 + 18 << "' font-size='14'>" << title
      << " per rank (grid order): <tspan fill='#bbb'>" << before_label
      << "</tspan> vs <tspan fill='#2a6'>" << after_label << "</tspan></text>\n";
  char scale[48];
  std::snprintf(scale, sizeof(scale), "%.3g", top);
  svg << "<text x='2' y='" << y_of(top) + 10 << "' font-size='10'>" << scale << "</text>\n";
  svg << "<text x='2' y='" << y_of(0) << "' font-size='10'>0</text>\n";
  for (std::size_t i = 0; i < n; ++i) {
    const double x = left + i * bar;
    svg << "<rect x='" << x << "' y='" << y_of(before[i]) << "' width='" << bar * 0.45
        << "' height='" << y0 + 30 + height - y_of(before[i]) << "' fill='#bbb'/>\n";
    svg << "<rect x='" << x + bar * 0.45 << "' y='" << y_of(after[i]) << "' width='" << bar * 0.45
        << "' height='" << y0 + 30 + height - y_of(after[i]) << "' fill='#2a6'/>\n";
  }
  std::vector<std::tuple<double, const char*, const char*>> lines{{mean, "#06c", "mean"}};
  if (bound > 1.0 + 1e-9)
    lines.emplace_back(mean * bound, "#c30", "lower bound");
  else
    lines.front() = {mean, "#06c", "mean = lower bound"};
  for (auto [value, color, name] : lines) {
    svg << "<line x1='" << left << "' x2='" << width - 20 << "' y1='" << y_of(value) << "' y2='"
        << y_of(value) << "' stroke='" << color << "' stroke-dasharray='6,3'/>\n";
    svg << "<text x='" << width - 18 << "' y='" << y_of(value) + 4 << "' font-size='11' fill='"
        << color << "'>" << name << "</text>\n";
  }
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
     << ", alpha " << o.alpha << ", C_max " << o.cmax_mb << " MiB\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-28s", "max/mean");
  os << line;
  for (const auto& run : runs) {
    std::snprintf(line, sizeof(line), "%18s", run.label.c_str());
    os << line;
  }
  os << "\n";
  auto row = [&](const char* name, auto get) {
    std::snprintf(line, sizeof(line), "%-28s", name);
    os << line;
    for (const auto& run : runs) {
      std::snprintf(line, sizeof(line), "%18s", get(run).c_str());
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

std::string loads_svg(const PlanRun& before, const PlanRun& after) {
  const auto b = flatten(before.metrics);
  const auto a = flatten(after.metrics);
  std::vector<double> bf, af, bm, am;
  for (std::size_t i = 0; i < b.size(); ++i) {
    bf.push_back(b[i].flops);
    af.push_back(a[i].flops);
    bm.push_back(b[i].memory);
    am.push_back(a[i].memory);
  }
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='1060' height='540' "
         "font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  panel(svg, 0, "Optimizer FLOPs", bf, af, after.metrics.lower_bound_grid.flops, before.label,
        after.label);
  panel(svg, 270, "Optimizer-state memory", bm, am, after.metrics.lower_bound_grid.memory,
        before.label, after.label);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace canzona::plan
