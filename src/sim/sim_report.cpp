// Table and JSON views of simulated iterations (report.h).
#include "canzona/sim/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "canzona/common/error.h"

namespace canzona::sim {

namespace {

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, value);
  return buffer;
}

std::string pad(const std::string& s, std::size_t width, bool left = false) {
  if (s.size() >= width) return s;
  std::string fill(width - s.size(), ' ');
  return left ? s + fill : fill + s;
}

// num / den; throws Error naming `what` when the quotient is not finite (den == 0 or a
// non-finite input: simulate() never returns one, so this is a bug, not bad input).
double ratio(double num, double den, const char* what) {
  const double q = num / den;
  if (!std::isfinite(q)) {
    throw Error(str("simulate: internal error: ", what, " = ", num, " / ", den, " is not finite"));
  }
  return q;
}

// The width of the strategy column: the longest name and two spaces, at least 10.
std::size_t name_width(const std::vector<Breakdown>& results) {
  std::size_t width = 10;
  for (const auto& r : results)
    width = std::max(width, std::string(plan::to_string(r.strategy)).size() + 2);
  return width;
}

double balance(const Breakdown& r) {
  return r.optimizer_rank_mean_s > 0
             ? ratio(r.optimizer_rank_max_s, r.optimizer_rank_mean_s, "optimizer_balance")
             : 1.0;
}

}  // namespace

double iteration_speedup(const Breakdown& base, const Breakdown& r) {
  return ratio(base.iteration_s, r.iteration_s, "iter-speedup");
}

nlohmann::json to_json(const Breakdown& r) {
  nlohmann::json j = {{"strategy", plan::to_string(r.strategy)},
                      {"iteration_s", r.iteration_s},
                      {"fwd_bwd_s", r.fwd_bwd_s},
                      {"dp_comm_exposed_s", r.dp_comm_exposed_s},
                      {"optimizer_s", r.optimizer_s},
                      {"tp_comm_s", r.tp_comm_s},
                      {"param_sync_s", r.param_sync_s},
                      {"dp_exchange_s", r.dp_exchange_s},
                      {"ep_comm_s", r.ep_comm_s},
                      {"optimizer_step_s", r.optimizer_step_s},
                      {"expert_step_s", r.expert_step_s},
                      {"param_gather_total_s", r.param_gather_total_s},
                      {"param_gather_exposed_s", r.param_gather_exposed_s},
                      {"tp_comm_sequential_s", r.tp_comm_sequential_s},
                      {"tp_comm_pipelined_s", r.tp_comm_pipelined_s},
                      {"dp_comm_total_s", r.dp_comm_total_s},
                      {"optimizer_rank_max_s", r.optimizer_rank_max_s},
                      {"optimizer_rank_mean_s", r.optimizer_rank_mean_s},
                      {"optimizer_balance", balance(r)},
                      {"fwd_bwd_flops", r.fwd_bwd_flops},
                      {"micro_batches", r.micro_batches},
                      {"critical_stage", r.critical_stage},
                      {"micro_groups", r.micro_groups}};
  if (r.stages.size() > 1) {
    j["pipeline_p2p_s"] = r.pipeline_p2p_s;
    j["stages"] = nlohmann::json::array();
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
      const StageTimes& t = r.stages[s];
      j["stages"].push_back({{"stage", s},
                             {"fwd_bwd_s", t.fwd_bwd_s},
                             {"bubble_s", t.bubble_s},
                             {"dp_comm_exposed_s", t.dp_comm_exposed_s},
                             {"optimizer_step_s", t.optimizer_step_s},
                             {"end_s", t.end_s}});
    }
  }
  return j;
}

nlohmann::json to_json(const std::vector<Breakdown>& results) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : results) out[plan::to_string(r.strategy)] = to_json(r);
  return out;
}

std::string format_table(const std::vector<Breakdown>& results) {
  const char* headers[] = {"strategy",     "iteration",   "fwd-bwd",  "dp-exposed",  "optimizer",
                           "tp-comm",      "param-sync",  "opt-step", "balance",     "step-speedup",
                           "iter-speedup", "dp-exchange", "gathers",  "gather-stall"};
  bool moe = false;
  for (const auto& r : results) moe = moe || r.expert_step_s > 0 || r.ep_comm_s > 0;
  const std::size_t names = name_width(results);
  std::string out;
  for (std::size_t i = 0; i < std::size(headers); ++i) {
    out += pad(headers[i], i == 0 ? names : 13, i == 0);
  }
  if (moe) out += pad("ep-comm", 13) + pad("expert-step", 13);
  out += "\n";
  for (const auto& r : results) {
    const Breakdown& base = results.front();
    out += pad(plan::to_string(r.strategy), names, true);
    for (double v : {r.iteration_s, r.fwd_bwd_s, r.dp_comm_exposed_s, r.optimizer_s, r.tp_comm_s,
                     r.param_sync_s, r.optimizer_step_s}) {
      out += pad(format("%.4f s", v), 13);
    }
    out += pad(format("%.2f", balance(r)), 13);
    out +=
        pad(format("%.2fx", ratio(base.optimizer_step_s, r.optimizer_step_s, "step-speedup")), 13);
    out += pad(format("%.2fx", iteration_speedup(base, r)), 13);
    for (double v : {r.dp_exchange_s, r.param_gather_total_s, r.param_gather_exposed_s})
      out += pad(format("%.4f s", v), 13);
    if (moe)
      for (double v : {r.ep_comm_s, r.expert_step_s}) out += pad(format("%.4f s", v), 13);
    out += "\n";
  }
  // Pipeline stages: each stage's 1F1B compute and bubble, its own step, and when it is done.
  if (!results.empty() && results.front().stages.size() > 1) {
    out += str("\npipeline stages (1F1B, ", results.front().micro_batches, " micro batches, ",
               format("%.6f", results.front().pipeline_p2p_s), " s per send between stages):\n");
    out += pad("strategy", names, true) + pad("stage", 7) + pad("fwd-bwd", 13) + pad("bubble", 13) +
           pad("bubble/fb", 11) + pad("dp-exposed", 13) + pad("opt-step", 13) + pad("end", 13) +
           "\n";
    for (const auto& r : results)
      for (std::size_t s = 0; s < r.stages.size(); ++s) {
        const StageTimes& t = r.stages[s];
        out += pad(plan::to_string(r.strategy), names, true) + pad(std::to_string(s), 7);
        out += pad(format("%.4f s", t.fwd_bwd_s), 13) + pad(format("%.4f s", t.bubble_s), 13);
        out += pad(format("%.3f", t.fwd_bwd_s > 0 ? t.bubble_s / t.fwd_bwd_s : 0.0), 11);
        for (double v : {t.dp_comm_exposed_s, t.optimizer_step_s, t.end_s})
          out += pad(format("%.4f s", v), 13);
        out += "\n";
      }
  }
  return out;
}

std::string format_sweep_table(const std::string& column, const std::vector<ResultGroup>& groups) {
  std::size_t label_width = std::max<std::size_t>(12, column.size() + 2);
  for (const auto& g : groups) label_width = std::max(label_width, g.label.size() + 2);
  std::string out = pad(column, label_width, true);
  // Each strategy's two columns are as wide as "<name> iter" and two spaces, at least 16.
  std::vector<std::size_t> widths;
  if (!groups.empty()) {
    for (const auto& r : groups.front().results) {
      const std::string name = plan::to_string(r.strategy);
      widths.push_back(std::max<std::size_t>(16, name.size() + 7));
      out += pad(name + " iter", widths.back()) + pad(name + " step", widths.back());
    }
  }
  out += "\n";
  for (const auto& g : groups) {
    out += pad(g.label, label_width, true);
    for (std::size_t i = 0; i < g.results.size(); ++i) {
      const std::size_t w = i < widths.size() ? widths[i] : 16;
      out += pad(format("%.4f s", g.results[i].iteration_s), w) +
             pad(format("%.4f s", g.results[i].optimizer_step_s), w);
    }
    out += "\n";
  }
  return out;
}

}  // namespace canzona::sim
