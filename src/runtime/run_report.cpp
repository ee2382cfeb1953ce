#include "canzona/runtime/run_report.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "canzona/common/hex.h"

namespace canzona::runtime {
namespace {

// "fp32", "bf16 params and grads (fp32 main params and state)" or, with --grad-reduce-in-fp32,
// "bf16 params, fp32 grads (fp32 main params and state)".
std::string precision_words(const RunOptions& o) {
  if (o.precision == DType::kF32) return "fp32";
  return o.grad_reduce_in_fp32 ? "bf16 params, fp32 grads (fp32 main params and state)"
                               : "bf16 params and grads (fp32 main params and state)";
}

double mib(std::int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}
double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

const StrategyResult* find(const CompareResult& r, plan::Strategy s) {
  for (const StrategyResult& x : r.strategies)
    if (x.strategy == s) return &x;
  return nullptr;
}

nlohmann::json phase_json(const PhaseBytes& b) {
  return {{"grad_sync", b.grad_sync},
          {"optimizer", b.optimizer},
          {"param_sync", b.param_sync},
          {"total", b.total()}};
}

nlohmann::json bytes_json(const comm::CommBytes& b) {
  return {{"reduce_scatter", b.reduce_scatter},
          {"all_gather", b.all_gather},
          {"all_reduce", b.all_reduce},
          {"all_to_all", b.all_to_all}};
}

std::string line(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

}  // namespace

std::string format_report(const CompareResult& r) {
  const RunOptions& o = r.options;
  std::string out;
  out += line(
      "canzona: %s (%.2fM params), dp %d x tp %d%s%s, %s + adamw, %d timed steps (+%d warmup), "
      "%s, reduce %s, compute scale %g, %d bucket(s), %s\n",
      r.model_name.c_str(), static_cast<double>(r.model_numel) / 1e6, o.dims.dp, o.dims.tp,
      o.dims.pp > 1 ? str(" x pp ", o.dims.pp).c_str() : "",
      o.dims.ep != 1 || o.dims.etp != 1
          ? str(" (experts: ep ", o.dims.ep, " x etp ", o.dims.etp, ")").c_str()
          : "",
      o.optimizer.c_str(), o.steps, o.warmup, precision_words(o).c_str(), to_string(o.reduce_mode),
      o.compute_scale, r.strategies.empty() ? 0 : r.strategies[0].buckets,
      o.pipeline ? "TP pipeline on" : "TP pipeline off (groups one after another)");
  out +=
      "medians over timed steps of the slowest rank, ms; bytes per step summed over ranks, MiB: "
      "DP grad-sync + param-sync = DP total, TP (optimizer)\n";
  const int names = plan::strategy_name_width() + 1;
  out += line("%-*s %8s %8s %8s %9s %8s %8s %8s %8s  %8s %8s %8s %8s\n", names, "strategy", "step",
              "fwd", "bwd", "grad-sync", "opt", "opt-comp", "opt-comm", "par-sync", "DP grad",
              "DP param", "DP total", "TP");
  for (const StrategyResult& s : r.strategies) {
    const engine::StepTimes& m = s.median;
    const PhaseBytes& dp = s.dp_phase_bytes;
    out += line("%-*s %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f %8.2f %8.2f  %8.3f %8.3f %8.3f %8.3f\n",
                names, plan::to_string(s.strategy), m.step, m.forward, m.backward, m.grad_sync,
                m.opt, m.opt_compute, m.opt_comm, m.param_sync, mib(dp.grad_sync),
                mib(dp.param_sync), mib(dp.total()), mib(s.tp_phase_bytes.total()));
  }
  out +=
      "per-rank busy, thread CPU ms per step (optimizer | all compute): max / mean; plan: "
      "optimizer FLOPs max / mean; critical path = max optimizer CPU / the plan's makespan at the "
      "measured mean rate\n";
  for (const StrategyResult& s : r.strategies) {
    const double predicted =
        s.predicted_flops_mean > 0 ? s.predicted_flops_max / s.predicted_flops_mean : 1.0;
    const double mean_cpu = mean_of(s.opt_cpu_ms);
    const double measured = mean_cpu > 0 ? max_of(s.opt_cpu_ms) / mean_cpu : 1.0;
    out += line(
        "%-*s opt %8.2f / %8.2f (x%.3f) | busy %8.2f / %8.2f | plan x%.3f | critical path "
        "%.3f x predicted %.2f ms | %d groups | state %.2f MiB max\n",
        names, plan::to_string(s.strategy), max_of(s.opt_cpu_ms), mean_cpu, measured,
        max_of(s.busy_cpu_ms), mean_of(s.busy_cpu_ms), predicted, measured / predicted,
        mean_cpu * predicted, s.micro_groups, max_of(s.state_mb));
  }
  if (!r.strategies.empty() && r.strategies[0].opt_cpu_ms.size() <= 8) {
    out += "optimizer CPU ms per step, by world rank:\n";
    for (const StrategyResult& s : r.strategies) {
      out += line("%-*s", names, plan::to_string(s.strategy));
      for (std::size_t q = 0; q < s.opt_cpu_ms.size(); ++q)
        out += line(" r%zu %.2f", q, s.opt_cpu_ms[q]);
      out += "\n";
    }
  }
  const StrategyResult* sc = find(r, plan::Strategy::kSc);
  const StrategyResult* lb = find(r, plan::Strategy::kLbAsc);
  if (sc && lb && lb->median.opt > 0) {
    const double sc_dp = static_cast<double>(sc->dp_phase_bytes.total());
    const double lb_dp = static_cast<double>(lb->dp_phase_bytes.total());
    out += line("lb-asc vs sc: optimizer step %.2fx faster (%.2f vs %.2f ms)",
                sc->median.opt / lb->median.opt, lb->median.opt, sc->median.opt);
    if (sc_dp > 0)
      out += line("; DP bytes per step (gradient + parameter sync) %.3fx (%.3f vs %.3f MiB)",
                  lb_dp / sc_dp, lb_dp / 1048576.0, sc_dp / 1048576.0);
    out += "\n";
  }
  if (r.verify.ran) {
    const VerifyResult& v = r.verify;
    if (v.bitwise)
      out += line(
          "verify: bitwise identical to the single-process reference and across the %zu "
          "strateg%s: final params (%lld elements per replica, every DP replica) and the last "
          "reduced gradients (%lld elements)\n",
          r.strategies.size(), r.strategies.size() == 1 ? "y" : "ies",
          static_cast<long long>(v.elements), static_cast<long long>(v.grad_elements));
    else
      out += line(
          "verify: %s; %lld of %lld param and %lld gradient elements compared; max |diff| "
          "params %.3g, gradients %.3g; first mismatch: %s\n",
          v.passed ? str("within bound (max |diff| of the params ", v.max_abs_diff, " of ",
                         v.param_bound,
                         ", every gradient element within its native-reduction bound), not "
                         "bitwise")
                         .c_str()
                   : "FAILED",
          static_cast<long long>(v.elements), static_cast<long long>(v.expected_elements),
          static_cast<long long>(v.grad_elements), v.max_abs_diff, v.grad_max_abs_diff,
          v.first_mismatch.c_str());
  }
  return out;
}

nlohmann::json report_json(const CompareResult& r) {
  const RunOptions& o = r.options;
  nlohmann::json j;
  j["model"] = r.model_name;
  j["dp"] = o.dims.dp;
  j["tp"] = o.dims.tp;
  j["pp"] = o.dims.pp;
  j["ep"] = o.dims.ep;
  j["etp"] = o.dims.etp;
  j["optimizer"] = o.optimizer;
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["reduce_mode"] = to_string(o.reduce_mode);
  j["precision"] = to_string(o.precision);
  j["grad_reduce_in_fp32"] = o.grad_reduce_in_fp32;
  j["pipeline"] = o.pipeline;
  j["compute_scale"] = o.compute_scale;
  nlohmann::json strategies = nlohmann::json::object();
  for (const StrategyResult& s : r.strategies) {
    const engine::StepTimes& m = s.median;
    const std::string hash = hex64(s.plan_hash), params_hash = hex64(s.params_hash);
    strategies[plan::to_string(s.strategy)] = {{"step_ms", m.step},
                                               {"forward_ms", m.forward},
                                               {"backward_ms", m.backward},
                                               {"grad_sync_ms", m.grad_sync},
                                               {"opt_ms", m.opt},
                                               {"opt_compute_ms", m.opt_compute},
                                               {"opt_comm_ms", m.opt_comm},
                                               {"param_sync_ms", m.param_sync},
                                               {"opt_cpu_ms", s.opt_cpu_ms},
                                               {"busy_cpu_ms", s.busy_cpu_ms},
                                               {"state_mb", s.state_mb},
                                               {"bytes", bytes_json(s.bytes())},
                                               {"dp_bytes", bytes_json(s.dp_bytes)},
                                               {"tp_bytes", bytes_json(s.tp_bytes)},
                                               {"dp_phase_bytes", phase_json(s.dp_phase_bytes)},
                                               {"tp_phase_bytes", phase_json(s.tp_phase_bytes)},
                                               {"plan_hash", hash},
                                               {"params_hash", params_hash},
                                               {"buckets", s.buckets},
                                               {"micro_groups", s.micro_groups},
                                               {"predicted_flops_max", s.predicted_flops_max},
                                               {"predicted_flops_mean", s.predicted_flops_mean},
                                               {"predicted_flops", s.predicted_flops}};
  }
  j["strategies"] = strategies;
  j["verify"] = {{"ran", r.verify.ran},
                 {"bitwise", r.verify.bitwise},
                 {"passed", r.verify.passed},
                 {"max_abs_diff", r.verify.max_abs_diff},
                 {"grad_max_abs_diff", r.verify.grad_max_abs_diff},
                 {"elements", r.verify.elements},
                 {"grad_elements", r.verify.grad_elements},
                 {"expected_elements", r.verify.expected_elements},
                 {"first_mismatch", r.verify.first_mismatch}};
  return j;
}

}  // namespace canzona::runtime
