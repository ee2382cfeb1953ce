// Progress lines, summary, JSON (train_report.h).
#include "train_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "canzona/common/error.h"
#include "canzona/common/hex.h"
#include "canzona/optim/bf16_products.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer_spec.h"
#include "canzona/train/memory.h"

namespace canzona::apps {
namespace {

std::string fmt(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string rss_text(std::int64_t bytes) {
  return bytes < 0 ? std::string("?") : train::format_bytes(static_cast<double>(bytes));
}

// The Newton-Schulz options Muon runs with ("" for another optimizer): coefficient set and steps,
// where the products run, the iteration and its restarts.
std::string ns_line(const train::TrainOptions& o) {
  if (o.all_adamw || o.job.optimizer != "muon") return "";
  const nlohmann::json e = optim::effective_options("muon", o.job.optimizer_options);
  optim::NewtonSchulzOptions ns;
  ns.coefficients = optim::parse_ns_coefficients(e.at("ns_coefficients"));
  ns.steps = e.at("ns_steps");
  ns.dtype = optim::parse_ns_dtype(e.at("ns_dtype"));
  ns.algorithm = optim::parse_ns_algorithm(e.at("ns_algorithm"));
  std::ostringstream out;
  out << "Newton-Schulz: " << optim::to_string(ns.coefficients) << " x " << ns.steps
      << " | products " << optim::to_string(ns.dtype) << " on "
      << (ns.dtype == optim::NsDtype::kBF16 ? optim::bf16_backend_report() : "OpenBLAS")
      << " | iteration " << optim::to_string(ns.algorithm);
  if (ns.algorithm == optim::NsAlgorithm::kGram) {
    // The options were read already: an unstable set is refused there (muon_spec.cpp).
    out << " (restarts at";
    for (int i : optim::gram_restarts(ns)) out << " " << i;
    out << "; standard where it saves under "
        << static_cast<int>(100 * (1 - optim::kGramMaxFlopRatio) + 0.5) << "% of the FLOPs)";
  }
  out << "\n";
  return out.str();
}

}  // namespace

std::string format_header(const TrainHeader& h, const train::TrainOptions& o) {
  std::ostringstream out;
  out << "model " << h.model << ": " << h.params << " params";
  if (h.ep > 0) out << " (" << h.active_params << " active per token)";
  out << " | DP " << h.dp << " x TP " << h.tp;
  if (h.pp > 1) out << " x PP " << h.pp << " (1F1B, " << o.grad_accum << " micro-batches)";
  if (h.ep > 0) out << " | experts: EP " << h.ep << ", expert DP " << h.dp * h.tp / h.ep;
  out << " | optimizer " << h.optimizer << " (matrices), adamw (the rest)\n";
  out << "data " << h.data << " | train " << h.train_tokens << " tokens, val " << h.val_tokens
      << " | vocab " << h.vocab << " | unigram entropy " << fmt("%.4f", h.unigram_entropy)
      << " nats/token\n";
  out << "steps " << o.steps << " | " << o.tokens_per_step() << " tokens/step (seq " << o.seq_len
      << " x micro-batch " << o.micro_batch << " x accum " << o.grad_accum << " x DP " << h.dp
      << ") | schedule " << train::to_string(o.schedule.schedule) << ", warmup "
      << o.schedule.warmup << " | sgemm " << fmt("%.1f", h.sgemm_gflops) << " GFLOP/s\n";
  if (o.job.precision == DType::kBF16)
    out << "precision bf16: bf16 params, activations and gradients (reduced in "
        << (o.job.grad_reduce_in_fp32 ? "fp32" : "bf16")
        << "), fp32 main params and optimizer state | bf16 "
        << (h.bf16_native.empty() ? "emulated (no native bf16 instructions on this CPU)"
                                  : "native (" + h.bf16_native + ")")
        << " | bf16 matmul " << fmt("%.1f", h.bf16_gflops) << " GFLOP/s\n";
  out << ns_line(o);
  out << "BLAS core " << h.blas_core << " (" << h.blas_core_source << ") | memory per rank: about "
      << train::format_bytes(h.memory.total()) << " estimated ("
      << train::format_bytes(h.memory.activations_bytes) << " activations), "
      << (h.memory_available >= 0 ? train::format_bytes(h.memory_available) : std::string("?"))
      << " available for " << h.ranks_on_node << (h.ranks_on_node == 1 ? " rank" : " ranks")
      << " on this node\n";
  if (h.pp > 1) {
    out << "memory estimate per pipeline stage:";
    for (const train::MemoryNeed& m : h.stage_memory)
      out << (m.stage ? ", " : " ") << "stage " << m.stage << " " << train::format_bytes(m.total());
    out << "\n";
  }
  return out.str();
}

std::string format_step(const train::StrategyRun& run, const train::StepRecord& s,
                        std::int64_t steps, bool moe, const train::ValRecord* val) {
  char line[400];
  std::snprintf(line, sizeof line, "%-*s step %5lld/%lld | loss %.4f", plan::strategy_name_width(),
                plan::to_string(run.strategy), static_cast<long long>(s.step),
                static_cast<long long>(steps), s.loss);
  std::string out = line;
  if (val) out += fmt(" | val loss %.4f", val->loss);
  std::snprintf(line, sizeof line,
                " | lr x%.3f | %7.0f tok/s | fwd-bwd %8.1f ms | grad-sync %6.1f ms | optimizer "
                "%7.1f ms | param-sync %6.1f ms | peak %s",
                s.lr_scale, s.tokens_per_s, s.fwd_bwd_ms, s.grad_sync_ms, s.opt_ms, s.param_sync_ms,
                rss_text(s.peak_rss_bytes).c_str());
  out += line;
  if (moe) out += fmt(" | balance %.3f", s.aux_loss);  // the load-balancing loss, top-k when even
  return out + "\n";
}

std::string format_val(const train::StrategyRun& run, const train::ValRecord& v) {
  char line[160];
  std::snprintf(line, sizeof line, "%-*s step %5lld | val loss %.4f\n", plan::strategy_name_width(),
                plan::to_string(run.strategy), static_cast<long long>(v.step), v.loss);
  return line;
}

train::StepRecord median_step(const std::vector<train::StepRecord>& steps) {
  std::vector<double> step, fb, gs, opt, ps, tps, wait;
  for (std::size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i) {
    wait.push_back(steps[i].pipeline_wait_ms);
    step.push_back(steps[i].step_ms);
    fb.push_back(steps[i].fwd_bwd_ms);
    gs.push_back(steps[i].grad_sync_ms);
    opt.push_back(steps[i].opt_ms);
    ps.push_back(steps[i].param_sync_ms);
    tps.push_back(steps[i].tokens_per_s);
  }
  train::StepRecord m;
  m.step_ms = median(step);
  m.fwd_bwd_ms = median(fb);
  m.grad_sync_ms = median(gs);
  m.opt_ms = median(opt);
  m.param_sync_ms = median(ps);
  m.tokens_per_s = median(tps);
  m.pipeline_wait_ms = median(wait);
  return m;
}

double mfu(const TrainHeader& h, const train::TrainOptions& o, const train::StepRecord& m) {
  const double peak = o.job.precision == DType::kBF16 ? h.bf16_gflops : h.sgemm_gflops;
  if (m.fwd_bwd_ms <= 0.0 || peak <= 0.0) return 0.0;
  const double tokens_per_rank = static_cast<double>(o.grad_accum * o.micro_batch * o.seq_len);
  const double flops = 6.0 * static_cast<double>(h.matmul_params) / (h.tp * h.pp) * tokens_per_rank;
  return flops / (m.fwd_bwd_ms / 1000.0) / (peak * 1e9);
}

bool bitwise_identical(const std::vector<train::StrategyRun>& runs) {
  for (const train::StrategyRun& r : runs) {
    const train::StrategyRun& first = runs.front();
    if (r.params_hash != first.params_hash || r.steps.size() != first.steps.size() ||
        r.val.size() != first.val.size())
      return false;
    for (std::size_t i = 0; i < r.steps.size(); ++i)
      if (std::memcmp(&r.steps[i].loss, &first.steps[i].loss, sizeof(double)) != 0) return false;
    for (std::size_t i = 0; i < r.val.size(); ++i)
      if (std::memcmp(&r.val[i].loss, &first.val[i].loss, sizeof(double)) != 0) return false;
  }
  return true;
}

std::string format_summary(const TrainHeader& h, const train::TrainOptions& o,
                           const std::vector<train::StrategyRun>& runs) {
  std::ostringstream out;
  out << "\nper-step breakdown (median over steps 2.., max over ranks), ms; ZeRO-"
      << to_int(o.job.zero_stage) << ", peak resident size per rank:\n";
  char line[288];
  const int names = plan::strategy_name_width();
  std::snprintf(line, sizeof line, "%-*s %9s %9s %9s %9s %10s %9s %7s %10s %10s  %s\n", names,
                "strategy", "step", "fwd-bwd", "grad-sync", "optimizer", "param-sync", "tok/s",
                "MFU", "peak RSS", "final loss", "params hash");
  out << line;
  for (const train::StrategyRun& r : runs) {
    if (r.steps.empty() && r.val.empty()) {
      std::snprintf(line, sizeof line, "%-*s no steps run (resumed at the last step)  %s\n", names,
                    plan::to_string(r.strategy), hex64(r.params_hash).c_str());
      out << line;
      continue;
    }
    const train::StepRecord m = median_step(r.steps);
    const double final_loss = r.val.empty() ? r.steps.back().loss : r.val.back().loss;
    std::snprintf(
        line, sizeof line, "%-*s %9.1f %9.1f %9.1f %9.1f %10.1f %9.0f %6.1f%% %10s %10.4f  %s\n",
        names, plan::to_string(r.strategy), m.step_ms, m.fwd_bwd_ms, m.grad_sync_ms, m.opt_ms,
        m.param_sync_ms, m.tokens_per_s, 100.0 * mfu(h, o, m),
        rss_text(r.memory.peak_rss_bytes).c_str(), final_loss, hex64(r.params_hash).c_str());
    out << line;
  }
  if (runs.size() > 1)
    out << "loss curves and final params bitwise identical across strategies: "
        << (bitwise_identical(runs) ? "yes" : "NO") << "\n";
  return out.str();
}

nlohmann::json train_json(const TrainHeader& h, const train::TrainOptions& o,
                          const std::vector<train::StrategyRun>& runs) {
  nlohmann::json j;
  j["model"] = h.model;
  j["params"] = h.params;
  j["matmul_params"] = h.matmul_params;
  j["dp"] = h.dp;
  j["tp"] = h.tp;
  j["pp"] = h.pp;
  if (h.ep > 0) {
    j["ep"] = h.ep;
    j["active_params"] = h.active_params;
  }
  j["optimizer"] = h.optimizer;
  j["data"] = h.data;
  j["vocab"] = h.vocab;
  j["unigram_entropy"] = h.unigram_entropy;
  j["sgemm_gflops"] = h.sgemm_gflops;
  j["precision"] = to_string(o.job.precision);
  j["grad_reduce_in_fp32"] = o.job.grad_reduce_in_fp32;
  if (o.job.precision == DType::kBF16) {
    j["bf16_gflops"] = h.bf16_gflops;
    j["bf16_native"] = !h.bf16_native.empty();
    j["bf16_instructions"] = h.bf16_native;
  }
  if (!o.all_adamw && o.job.optimizer == "muon") {
    const nlohmann::json e = optim::effective_options("muon", o.job.optimizer_options);
    j["ns_dtype"] = e.at("ns_dtype");
    j["ns_algorithm"] = e.at("ns_algorithm");
    if (e.at("ns_dtype") == "bf16") j["bf16_backend"] = optim::bf16_backend_report();
  }
  j["blas_core"] = h.blas_core;
  j["blas_core_source"] = h.blas_core_source;
  j["memory_estimate"] = {{"params_bytes", h.memory.params_bytes},
                          {"grads_bytes", h.memory.grads_bytes},
                          {"optimizer_state_bytes", h.memory.optimizer_state_bytes},
                          {"buffer_bytes", h.memory.buffer_bytes},
                          {"activations_bytes", h.memory.activations_bytes},
                          {"runtime_bytes", h.memory.runtime_bytes},
                          {"total_bytes", h.memory.total()},
                          {"available_bytes", h.memory_available},
                          {"ranks_on_node", h.ranks_on_node}};
  if (h.pp > 1) {
    j["memory_estimate"]["stages"] = nlohmann::json::array();
    for (const train::MemoryNeed& m : h.stage_memory)
      j["memory_estimate"]["stages"].push_back({{"stage", m.stage},
                                                {"params_bytes", m.params_bytes},
                                                {"optimizer_state_bytes", m.optimizer_state_bytes},
                                                {"activations_bytes", m.activations_bytes},
                                                {"total_bytes", m.total()}});
  }
  j["steps"] = o.steps;
  j["seq_len"] = o.seq_len;
  j["micro_batch"] = o.micro_batch;
  j["grad_accum"] = o.grad_accum;
  j["zero_stage"] = to_int(o.job.zero_stage);
  j["tokens_per_step"] = o.tokens_per_step();
  j["runs"] = nlohmann::json::array();
  for (const train::StrategyRun& r : runs) {
    nlohmann::json run;
    run["strategy"] = plan::to_string(r.strategy);
    run["plan_hash"] = hex64(r.plan_hash);
    run["params_hash"] = hex64(r.params_hash);
    run["state_hash"] = hex64(r.state_hash);
    run["first_step"] = r.first_step;
    run["steps"] = nlohmann::json::array();
    for (const train::StepRecord& s : r.steps)
      run["steps"].push_back(
          {{"step", s.step},
           {"loss", s.loss},
           {"lr_scale", s.lr_scale},
           {"tokens_per_s", s.tokens_per_s},
           {"ms",
            {{"step", s.step_ms},
             {"fwd_bwd", s.fwd_bwd_ms},
             {"grad_sync", s.grad_sync_ms},
             {"optimizer", s.opt_ms},
             {"param_sync", s.param_sync_ms},
             {"pipeline_wait", s.pipeline_wait_ms}}},
           {"peak_rss_bytes", s.peak_rss_bytes},
           {"optimizer_step_bytes", {{"dp", s.opt_dp_bytes}, {"tp", s.opt_tp_bytes}}}});
    if (h.ep > 0)
      for (std::size_t i = 0; i < r.steps.size(); ++i)
        run["steps"][i]["load_balancing_loss"] = r.steps[i].aux_loss;
    run["val"] = nlohmann::json::array();
    for (const train::ValRecord& v : r.val)
      run["val"].push_back({{"step", v.step}, {"loss", v.loss}});
    const train::StepRecord m = median_step(r.steps);
    run["median_ms"] = {{"step", m.step_ms},
                        {"fwd_bwd", m.fwd_bwd_ms},
                        {"grad_sync", m.grad_sync_ms},
                        {"optimizer", m.opt_ms},
                        {"param_sync", m.param_sync_ms},
                        {"pipeline_wait", m.pipeline_wait_ms}};
    run["median_tokens_per_s"] = m.tokens_per_s;
    // PP > 1: each stage's times per step (max over the stage's ranks) and their medians.
    if (!r.stage_steps.empty()) {
      run["stages"] = nlohmann::json::array();
      for (std::size_t st = 0; st < r.stage_steps.size(); ++st) {
        nlohmann::json stage = {{"stage", st}, {"steps", nlohmann::json::array()}};
        std::vector<double> step, fb, opt, wait;
        for (std::size_t i = 0; i < r.stage_steps[st].size(); ++i) {
          const train::StageStep& x = r.stage_steps[st][i];
          stage["steps"].push_back({{"step", x.step_ms},
                                    {"fwd_bwd", x.fwd_bwd_ms},
                                    {"optimizer", x.opt_ms},
                                    {"pipeline_wait", x.pipeline_wait_ms}});
          if (i == 0 && r.stage_steps[st].size() > 1) continue;  // medians over steps 2..
          step.push_back(x.step_ms);
          fb.push_back(x.fwd_bwd_ms);
          opt.push_back(x.opt_ms);
          wait.push_back(x.pipeline_wait_ms);
        }
        stage["median_ms"] = {{"step", median(step)},
                              {"fwd_bwd", median(fb)},
                              {"optimizer", median(opt)},
                              {"pipeline_wait", median(wait)}};
        run["stages"].push_back(stage);
      }
    }
    run["memory"] = {{"params_bytes", r.memory.params_bytes},
                     {"grads_bytes", r.memory.grads_bytes},
                     {"optimizer_state_bytes", r.memory.optimizer_state_bytes},
                     {"activations_bytes", r.memory.activations_bytes},
                     {"peak_rss_bytes", r.memory.peak_rss_bytes},
                     {"base_rss_bytes", r.memory.base_rss_bytes},
                     {"kept_bytes", r.memory.kept_bytes},
                     {"resident_kept_bytes", r.memory.resident_kept_bytes},
                     {"model_total_bytes", r.memory.model_total_bytes}};
    run["mfu"] = mfu(h, o, m);
    j["runs"].push_back(run);
  }
  j["bitwise_identical"] = bitwise_identical(runs);
  return j;
}

}  // namespace canzona::apps
