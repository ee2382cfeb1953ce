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

namespace {}  // namespace

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

Breakdown simulate(const model::ModelSpec& model, const plan::Plan& plan, const Cluster& cluster,
                   const Workload& workload) {
  check_workload(workload);
  const plan::PlanOptions& options = plan.options;
  const int dp = options.dp;
  const int tp = options.tp;
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

  const Link dp_net = dp_link(cluster, dp, tp);
  const double hbm = cluster.device.hbm_GBps * 1e9;
  double worst = -1.0;
  double rank_sum = 0.0;
  double rank_min = 0.0;
  std::size_t rank_count = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const plan::StagePlan& stage = plan.stages[s];
    const plan::StrategyParts parts = plan::strategy_parts(options.strategy, options.layerwise_tp);
    const detail::DpSync sync = detail::dp_sync(stage, parts, dp, dp_net, compute[s], workload,
                                                options.layout.zero_stage, out.micro_batches);
    const detail::OwnerExchangeTime exchange =
        parts.dp_exchange == plan::DpExchange::kOwnerAllToAll
            ? detail::owner_exchange(model, stage, options, cluster, workload)
            : detail::OwnerExchangeTime{};
    const double param_sync = parts.param_sync == plan::ParamSync::kLayerwiseAllGatherV
                                  ? detail::layerwise_param_sync_s(stage, dp, dp_net, workload)
                                  : 0.0;
    const std::vector<double> elementwise = detail::elementwise_numel(model, stage, dp);
    detail::RankStep slowest;
    for (int d = 0; d < dp; ++d) {
      detail::RankStep step =
          detail::optimizer_step(model, stage, options, d, cluster, workload,
                                 elementwise[d] * workload.adamw_bytes_per_element / hbm);
      for (double h : step.host_task_s) {
        out.optimizer_rank_max_s = std::max(out.optimizer_rank_max_s, h);
        rank_min = rank_count == 0 ? h : std::min(rank_min, h);
        rank_sum += h;
        ++rank_count;
      }
      if (d == 0 || step.total_s > slowest.total_s) slowest = std::move(step);
    }
    const double stage_s = sync.exposed_s + slowest.total_s + exchange.compute_s +
                           exchange.exposed_comm_s + param_sync;
    if (stage_s > worst) {
      worst = stage_s;
      out.critical_stage = static_cast<int>(s);
      out.dp_comm_exposed_s = sync.exposed_s;
      out.dp_comm_total_s = sync.total_s;
      out.optimizer_s = slowest.compute_s + exchange.compute_s;
      out.dp_exchange_s = exchange.exposed_comm_s;
      out.param_gather_total_s = sync.gather_total_s;
      out.param_gather_exposed_s = sync.gather_exposed_s;
      out.tp_comm_s = slowest.total_s - slowest.compute_s;
      out.tp_comm_sequential_s = slowest.tp_comm_sequential_s;
      out.tp_comm_pipelined_s = slowest.tp_comm_pipelined_s;
      out.micro_groups = slowest.micro_groups;
      out.param_sync_s = param_sync;
    }
  }
  // Equal loads give a mean equal to the max exactly (sum / count can round below it).
  out.optimizer_rank_mean_s =
      rank_count == 0 ? 0.0
      : rank_min == out.optimizer_rank_max_s
          ? rank_min
          : std::min(out.optimizer_rank_max_s, rank_sum / static_cast<double>(rank_count));
  out.optimizer_step_s = out.optimizer_s + out.tp_comm_s + out.dp_exchange_s + out.param_sync_s;
  out.iteration_s = out.fwd_bwd_s + out.dp_comm_exposed_s + out.optimizer_step_s;
  check_result(out);
  return out;
}

}  // namespace canzona::sim
