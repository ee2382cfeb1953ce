// One simulated iteration (simulate.h): forward-backward per stage, then per stage the DP sync,
// every DP rank's optimizer step and layerwise's param sync; the slowest stage decides.
#include "canzona/sim/simulate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"
#include "stage_model.h"

namespace canzona::sim {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Throws Error "simulate: internal error: <name> = <value> is not a finite number >= 0".
void require_finite(double value, const char* name) {
  if (!std::isfinite(value) || value < 0.0) {
    throw Error(
        str("simulate: internal error: ", name, " = ", value, " is not a finite number >= 0"));
  }
}

// Phases first, so the message names where a non-finite value entered, not only the total.
void check_result(const Breakdown& b) {
  const std::pair<const char*, double> fields[] = {
      {"fwd_bwd_s", b.fwd_bwd_s},
      {"ep_comm_s", b.ep_comm_s},
      {"expert_step_s", b.expert_step_s},
      {"dp_comm_exposed_s", b.dp_comm_exposed_s},
      {"optimizer_s", b.optimizer_s},
      {"tp_comm_s", b.tp_comm_s},
      {"param_sync_s", b.param_sync_s},
      {"dp_exchange_s", b.dp_exchange_s},
      {"param_gather_total_s", b.param_gather_total_s},
      {"param_gather_exposed_s", b.param_gather_exposed_s},
      {"optimizer_step_s", b.optimizer_step_s},
      {"tp_comm_sequential_s", b.tp_comm_sequential_s},
      {"tp_comm_pipelined_s", b.tp_comm_pipelined_s},
      {"dp_comm_total_s", b.dp_comm_total_s},
      {"optimizer_rank_max_s", b.optimizer_rank_max_s},
      {"optimizer_rank_mean_s", b.optimizer_rank_mean_s},
      {"fwd_bwd_flops", b.fwd_bwd_flops},
      {"iteration_s", b.iteration_s},
  };
  for (const auto& [name, value] : fields) require_finite(value, name);
  require_finite(static_cast<double>(b.micro_batches), "micro_batches");
  require_finite(b.pipeline_p2p_s, "pipeline_p2p_s");
  for (const StageTimes& s : b.stages)
    for (double v : {s.fwd_bwd_s, s.bubble_s, s.dp_comm_exposed_s, s.optimizer_step_s, s.end_s})
      require_finite(v, "stages[].times");
}

}  // namespace

void check_workload(const Workload& w) {
  CANZONA_REQUIRE(w.tokens > 0, "--tokens must be positive (got ", w.tokens, ")");
  CANZONA_REQUIRE(w.seq_len > 0, "--seq-len must be positive (got ", w.seq_len, ")");
  CANZONA_REQUIRE(w.micro_batch > 0, "--micro-batch must be positive (got ", w.micro_batch, ")");
  require_in_range(w.tokens, 1, kMaxTokens, "--tokens", "kMaxTokens");
  require_in_range(w.seq_len, 1, kMaxSeqLen, "--seq-len", "kMaxSeqLen");
  require_in_range(w.micro_batch, 1, kMaxMicroBatch, "--micro-batch", "kMaxMicroBatch");
  for (double bytes : {w.grad_bytes, w.param_bytes, w.adamw_bytes_per_element}) {
    CANZONA_REQUIRE(std::isfinite(bytes) && bytes > 0 && bytes <= kMaxBytesPerElement,
                    "byte sizes per element must lie in (0, ", kMaxBytesPerElement,
                    "] (kMaxBytesPerElement), got ", bytes);
  }
}

namespace {

// One buffer of a plan (the dense one, or a MoE model's expert buffer) as the simulator prices
// it: its model, its options (its DP and TP degrees) and its DP group's link.
struct BufferModel {
  const model::ModelSpec& model;
  const plan::PlanOptions& options;
  Link dp_net;
};

// One buffer's share of a stage's step: its DP sync, fsdp-a2a's owner exchange, layerwise's param
// sync and each of its DP ranks' optimizer step.
struct BufferStep {
  detail::DpSync sync;
  detail::OwnerExchangeTime exchange;
  double param_sync_s = 0.0;
  std::vector<detail::RankStep> ranks;  // [dp rank of the buffer]
};

BufferStep buffer_step(const BufferModel& b, const plan::StagePlan& stage, const Cluster& cluster,
                       const Workload& workload, const detail::StageCompute& compute,
                       std::int64_t micro_batches, double hbm) {
  const plan::PlanOptions& o = b.options;
  const plan::StrategyParts parts = plan::strategy_parts(o.strategy, o.layerwise_tp);
  BufferStep out;
  out.sync = detail::dp_sync(stage, parts, o.dims.dp, b.dp_net, compute, workload,
                             o.layout.zero_stage, micro_batches);
  if (parts.dp_exchange == plan::DpExchange::kOwnerAllToAll)
    out.exchange = detail::owner_exchange(b.model, stage, o, cluster, workload);
  if (parts.param_sync == plan::ParamSync::kLayerwiseAllGatherV)
    out.param_sync_s = detail::layerwise_param_sync_s(stage, o.dims.dp, b.dp_net, workload);
  const std::vector<double> elementwise = detail::elementwise_numel(b.model, stage, o.dims.dp);
  for (int d = 0; d < o.dims.dp; ++d)
    out.ranks.push_back(
        detail::optimizer_step(b.model, stage, o, d, cluster, workload,
                               elementwise[d] * workload.adamw_bytes_per_element / hbm));
  return out;
}

// The EP token exchange of an iteration: per MoE layer and micro batch, four All-to-Alls over the
// EP group (dispatch and combine, forward and backward), each rank sending its tokens' k hidden
// vectors of activation_bytes per element, (ep - 1) / ep of them off-rank; not overlapped.
double ep_token_exchange_s(const plan::ExpertPlan& e, const Cluster& cluster,
                           const Workload& workload, double rank_tokens,
                           std::int64_t micro_batches) {
  if (e.ep == 1) return 0.0;
  std::set<int> layers;
  double hidden = 0.0;
  for (const model::ParamSpec& p : e.model.params) {
    layers.insert(p.layer);
    if (ends_with(p.name, ".linear_fc1.weight") && p.shape.size() == 2)
      hidden = static_cast<double>(p.shape[1]);
  }
  const double bytes = rank_tokens * e.model.arch.experts_per_token * hidden *
                       workload.activation_bytes * (e.ep - 1) / e.ep;
  // The critical stage holds layers / pp of them; the slowest stage's count is the larger share.
  const double stage_layers =
      std::ceil(static_cast<double>(layers.size()) / static_cast<double>(e.plan.stages.size()));
  return 4.0 * stage_layers * static_cast<double>(micro_batches) *
         all_to_all_s(dp_link(cluster, e.ep, e.etp), e.ep, bytes);
}

}  // namespace

std::vector<double> stage_flops_per_token(const model::ModelSpec& model, const plan::Plan& plan,
                                          const Workload& workload) {
  int embedding = -1;
  bool has_output_layer = false;
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    if (ends_with(model.params[p].name, "word_embeddings.weight")) embedding = static_cast<int>(p);
    if (ends_with(model.params[p].name, "output_layer.weight")) has_output_layer = true;
  }
  const double attn_width = static_cast<double>(model.arch.num_heads) * model.arch.head_dim;

  std::vector<double> flops;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    double matmul_params = 0.0;
    std::set<int> layers;
    for (int p : plan.stages[s].params) {
      const auto& param = model.params[p];
      if (param.layer >= 0) layers.insert(param.layer);
      // An expert's matmul runs for the experts_per_token / num_experts of the tokens routed
      // to it (dropless routing, on average).
      const double share =
          model.arch.num_experts > 0 && model::is_expert_param(param)
              ? static_cast<double>(model.arch.experts_per_token) / model.arch.num_experts
              : 1.0;
      if (param.shape.size() == 2 && p != embedding)
        matmul_params += share * static_cast<double>(param.numel());
    }
    if (plan.expert) {
      // The expert buffer holds one EP rank's experts; the model has ep times as many.
      const plan::ExpertPlan& e = *plan.expert;
      const double share =
          static_cast<double>(e.model.arch.experts_per_token) * e.ep / e.model.arch.num_experts;
      for (int p : e.plan.stages[s].params) {
        const auto& param = e.model.params[p];
        if (param.layer >= 0) layers.insert(param.layer);
        if (param.shape.size() == 2) matmul_params += share * static_cast<double>(param.numel());
      }
    }
    if (s + 1 == plan.stages.size() && embedding >= 0 && !has_output_layer) {
      matmul_params += model.params[embedding].numel();  // tied: logits reuse the embedding
    }
    double attention = workload.attention_flops ? 6.0 * workload.seq_len * attn_width *
                                                      static_cast<double>(layers.size())
                                                : 0.0;
    flops.push_back(6.0 * matmul_params + attention);
  }
  return flops;
}

double task_seconds(const plan::Task& task, const cost::CostOptions& options,
                    const Device& device) {
  const double factor =
      std::min(task.flops,
               cost::factorization_flops(options.matrix_optimizer, task.rows, task.cols, options));
  return (task.flops - factor) / device.optimizer_flops_per_s() +
         (factor > 0 ? factor / (device.factorization_tflops * 1e12) : 0.0) +
         device.optimizer_task_overhead_us * 1e-6;
}

namespace {

// The hidden size: the word embedding's columns (heads x head_dim for a model without one).
std::int64_t hidden_size(const model::ModelSpec& model) {
  for (const model::ParamSpec& p : model.params)
    if (p.name == "embedding.word_embeddings.weight" && p.shape.size() == 2) return p.shape[1];
  return static_cast<std::int64_t>(model.arch.num_heads) * model.arch.head_dim;
}

}  // namespace

Breakdown simulate(const model::ModelSpec& model, const plan::Plan& plan, const Cluster& cluster,
                   const Workload& workload) {
  check_workload(workload);
  const plan::PlanOptions& options = plan.options;
  const int dp = options.dims.dp;
  const int tp = options.dims.tp;
  CANZONA_CHECK(!plan.stages.empty(), "plan without stages");
  tp_link(cluster, tp);  // rejects a TP group larger than a node

  Breakdown out;
  out.strategy = options.strategy;
  const std::int64_t mb_tokens_int =
      checked_mul(workload.seq_len, workload.micro_batch, "--seq-len x --micro-batch");
  const std::int64_t per_replica = checked_mul(mb_tokens_int, dp, "tokens per DP step x dp");
  CANZONA_CHECK(per_replica > 0, "dp ", dp);
  out.micro_batches = workload.tokens / per_replica + (workload.tokens % per_replica != 0 ? 1 : 0);
  const double mb_tokens = static_cast<double>(mb_tokens_int);

  // Forward-backward: 1F1B, the first micro batch crosses every stage, the rest follow at the
  // pace of the slowest stage.
  const std::vector<double> per_token = stage_flops_per_token(model, plan, workload);
  std::vector<detail::StageCompute> compute(plan.stages.size());
  double sum_s = 0.0, max_s = 0.0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    compute[s].per_micro_batch_s =
        per_token[s] * mb_tokens / (tp * cluster.device.fwd_bwd_flops_per_s());
    sum_s += compute[s].per_micro_batch_s;
    max_s = std::max(max_s, compute[s].per_micro_batch_s);
    out.fwd_bwd_flops += per_token[s] * mb_tokens * static_cast<double>(out.micro_batches) * dp;
  }
  out.fwd_bwd_s = sum_s + static_cast<double>(out.micro_batches - 1) * max_s;
  // PP > 1: 1F1B timed with the sends between stages; each stage ends at its own last backward.
  std::vector<double> backward_end(plan.stages.size(), out.fwd_bwd_s);
  detail::PipelineTimes pipeline;
  if (plan.stages.size() > 1) {
    const Link link = pp_link(cluster, dp, tp);
    out.pipeline_p2p_s = link.alpha() + mb_tokens * static_cast<double>(hidden_size(model)) *
                                            workload.activation_bytes / link.beta();
    pipeline = detail::time_pipeline(compute, out.micro_batches, out.pipeline_p2p_s);
    backward_end = pipeline.end_s;
  }

  const double hbm = cluster.device.hbm_GBps * 1e9;
  const plan::ExpertPlan* expert = plan.expert.get();
  const BufferModel dense_buffer{model, options, dp_link(cluster, dp, tp)};
  const BufferModel expert_buffer =
      expert ? BufferModel{expert->model, expert->plan.options,
                           dp_link(cluster, expert->edp, expert->ep * expert->etp)}
             : dense_buffer;
  if (expert) {
    tp_link(cluster, expert->etp);
    out.ep_comm_s =
        ep_token_exchange_s(*expert, cluster, workload, mb_tokens / tp, out.micro_batches);
  }
  double worst = -1.0;
  double rank_sum = 0.0;
  double rank_min = 0.0;
  std::size_t rank_count = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const BufferStep d_step = buffer_step(dense_buffer, plan.stages[s], cluster, workload,
                                          compute[s], out.micro_batches, hbm);
    const BufferStep e_step = expert ? buffer_step(expert_buffer, expert->plan.stages[s], cluster,
                                                   workload, compute[s], out.micro_batches, hbm)
                                     : BufferStep{};
    // Each rank steps its dense buffer, then its expert buffer (Megatron's chained optimizer);
    // the slowest rank decides.
    int slowest_l = -1;
    double slowest_total = 0.0, slowest_compute = 0.0, expert_total = 0.0;
    for (int l = 0; l < dp * tp; ++l) {
      const int d = l / tp, t = l % tp;
      const detail::RankStep& a = d_step.ranks[d];
      double total = a.total_s, compute_s = a.compute_s, host = a.host_task_s[t];
      double e_total = 0.0;
      if (expert) {
        const ExpertCoord c = options.dims.expert_coord(d, t);
        const detail::RankStep& b = e_step.ranks[c.edp];
        total += b.total_s;
        compute_s += b.compute_s;
        host += b.host_task_s[c.etp];
        e_total = b.total_s;
      }
      out.optimizer_rank_max_s = std::max(out.optimizer_rank_max_s, host);
      rank_min = rank_count == 0 ? host : std::min(rank_min, host);
      rank_sum += host;
      ++rank_count;
      if (slowest_l < 0 || total > slowest_total) {
        slowest_l = l;
        slowest_total = total;
        slowest_compute = compute_s;
        expert_total = e_total;
      }
    }
    const detail::RankStep& dense_slowest = d_step.ranks[slowest_l / tp];
    const double step_s = slowest_total + d_step.exchange.compute_s +
                          d_step.exchange.exposed_comm_s + e_step.exchange.compute_s +
                          e_step.exchange.exposed_comm_s + d_step.param_sync_s +
                          e_step.param_sync_s;
    StageTimes times;
    times.fwd_bwd_s = plan.stages.size() > 1 ? pipeline.compute_s[s] : out.fwd_bwd_s;
    times.bubble_s = plan.stages.size() > 1 ? pipeline.bubble_s[s] : 0.0;
    times.dp_comm_exposed_s = d_step.sync.exposed_s + e_step.sync.exposed_s;
    times.optimizer_step_s = step_s;
    times.end_s = backward_end[s] + times.dp_comm_exposed_s + step_s;
    out.stages.push_back(times);
    // The stage that finishes last decides (at PP 1, or with equal ends, the post-backward part).
    const double stage_s = plan.stages.size() > 1 ? times.end_s : times.dp_comm_exposed_s + step_s;
    if (stage_s > worst) {
      worst = stage_s;
      out.critical_stage = static_cast<int>(s);
      if (plan.stages.size() > 1) out.fwd_bwd_s = backward_end[s];
      out.dp_comm_exposed_s = d_step.sync.exposed_s + e_step.sync.exposed_s;
      out.dp_comm_total_s = d_step.sync.total_s + e_step.sync.total_s;
      out.optimizer_s = slowest_compute + d_step.exchange.compute_s + e_step.exchange.compute_s;
      out.dp_exchange_s = d_step.exchange.exposed_comm_s + e_step.exchange.exposed_comm_s;
      out.param_gather_total_s = d_step.sync.gather_total_s + e_step.sync.gather_total_s;
      out.param_gather_exposed_s = d_step.sync.gather_exposed_s + e_step.sync.gather_exposed_s;
      out.tp_comm_s = slowest_total - slowest_compute;
      out.tp_comm_sequential_s = dense_slowest.tp_comm_sequential_s;
      out.tp_comm_pipelined_s = dense_slowest.tp_comm_pipelined_s;
      out.micro_groups = dense_slowest.micro_groups;
      out.param_sync_s = d_step.param_sync_s + e_step.param_sync_s;
      out.expert_step_s = expert_total + e_step.exchange.compute_s +
                          e_step.exchange.exposed_comm_s + e_step.param_sync_s;
      if (expert) {
        const int e = options.dims.expert_coord(slowest_l / tp, slowest_l % tp).edp;
        out.tp_comm_sequential_s += e_step.ranks[e].tp_comm_sequential_s;
        out.tp_comm_pipelined_s += e_step.ranks[e].tp_comm_pipelined_s;
        out.micro_groups += e_step.ranks[e].micro_groups;
      }
    }
  }
  // Equal loads give a mean equal to the max exactly (sum / count can round below it).
  out.optimizer_rank_mean_s =
      rank_count == 0 ? 0.0
      : rank_min == out.optimizer_rank_max_s
          ? rank_min
          : std::min(out.optimizer_rank_max_s, rank_sum / static_cast<double>(rank_count));
  out.optimizer_step_s = out.optimizer_s + out.tp_comm_s + out.dp_exchange_s + out.param_sync_s;
  out.iteration_s = out.fwd_bwd_s + out.ep_comm_s + out.dp_comm_exposed_s + out.optimizer_step_s;
  check_result(out);
  return out;
}

}  // namespace canzona::sim
