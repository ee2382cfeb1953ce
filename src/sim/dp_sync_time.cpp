// DP-side costs of one stage: gradient sync per bucket, ZeRO-1 param gather, layerwise's in-step
// param All-Gather-v, and the element-wise share of each DP rank (stage_model.h).
//
// Bucket order (Megatron): the buffer holds params in reverse registration order, so bucket 0's
// gradients are ready first in backward and its params are needed last in forward.
#include <algorithm>
#include <numeric>

#include "canzona/common/error.h"
#include "canzona/plan/rank_plan.h"
#include "canzona/sim/collectives.h"
#include "stage_model.h"
#include "timeline.h"

namespace canzona::sim::detail {

namespace {

// Elements of bucket b that DP rank r holds under the cuts (the Reduce-Scatter / All-Gather
// count); equal shards when the plan has no cuts for the bucket.
std::int64_t shard_numel(const plan::StagePlan& stage, std::size_t b, int r, int dp) {
  if (b < stage.cuts.size() && stage.cuts[b].size() == static_cast<std::size_t>(dp) + 1) {
    return stage.cuts[b][r + 1] - stage.cuts[b][r];
  }
  return stage.layout.buckets[b].numel / dp;
}

// Bytes of every rank's shard of bucket b, [dp rank].
std::vector<double> shard_bytes(const plan::StagePlan& stage, std::size_t b, int dp,
                                double bytes_per_element) {
  std::vector<double> bytes(dp);
  for (int r = 0; r < dp; ++r) {
    bytes[r] = static_cast<double>(shard_numel(stage, b, r, dp)) * bytes_per_element;
  }
  return bytes;
}

// Calls add(rank, elements) for every element DP rank `rank` updates alone: whole params it owns
// and its part of divided params. `include(param)` filters params. kEveryone params are skipped.
template <typename Include, typename Add>
void for_each_owned(const plan::StagePlan& stage, int dp, Include include, Add add) {
  for (std::size_t b = 0; b < stage.layout.buckets.size(); ++b) {
    const auto& bucket = stage.layout.buckets[b];
    for (const auto& slot : bucket.slots) {
      if (!include(slot.param)) continue;
      CANZONA_CHECK(slot.param >= 0 && static_cast<std::size_t>(slot.param) < stage.owner.size(),
                    "slot param ", slot.param, " has no owner entry");
      if (stage.owner[slot.param] == plan::kEveryone) continue;
      // The decoded owners (plan/rank_plan.h): the owner, or the ranks the cuts divide it over.
      const plan::RankRange ranks = plan::slot_dp_ranks(stage, static_cast<int>(b), slot, dp);
      for (int r = ranks.begin; r < ranks.end; ++r) {
        const auto [first, last] = plan::slot_part(stage, static_cast<int>(b), slot, r);
        if (last > first) add(r, static_cast<double>(last - first));
      }
    }
  }
}

// ZeRO-3 (dp_sync's contract): buckets in forward order are the buffer's in reverse.
DpSync zero3_sync(const plan::StagePlan& stage, int dp, const Link& link,
                  const StageCompute& compute, const Workload& workload, std::int64_t micro_batches,
                  const std::vector<double>& reduce_scatter_s, double total_numel) {
  const auto& buckets = stage.layout.buckets;
  const std::size_t n = buckets.size();
  std::vector<double> fwd_c(n), fwd_g(n), bwd_c(n), bwd_g(n), none(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t b = n - 1 - i;  // forward order
    const double share = total_numel > 0 ? static_cast<double>(buckets[b].numel) / total_numel : 0;
    fwd_c[i] = compute.first_forward_s() * share;
    fwd_g[i] = all_gather_v_s(link, shard_bytes(stage, b, dp, workload.param_bytes),
                              workload.var_collective);
  }
  for (std::size_t b = 0; b < n; ++b) {  // backward order; bucket 0 ended the forward
    const double share = total_numel > 0 ? static_cast<double>(buckets[b].numel) / total_numel : 0;
    bwd_c[b] = compute.last_backward_s() * share;
    bwd_g[b] = b == 0 ? 0.0 : fwd_g[n - 1 - b];
  }
  const PassTimeline fwd = run_prefetched_pass(fwd_c, fwd_g, none);
  const PassTimeline bwd = run_prefetched_pass(bwd_c, bwd_g, none);
  const PassTimeline last = run_prefetched_pass(bwd_c, bwd_g, reduce_scatter_s);
  const double m = static_cast<double>(micro_batches);
  const double fwd_stall = fwd.compute_end_s - fwd.compute_s;
  const double bwd_stall = bwd.compute_end_s - bwd.compute_s;
  const double last_stall = last.compute_end_s - last.compute_s;
  DpSync out;
  out.gather_exposed_s = m * fwd_stall + (m - 1.0) * bwd_stall + last_stall;
  out.gather_total_s = m * (std::accumulate(fwd_g.begin(), fwd_g.end(), 0.0) +
                            std::accumulate(bwd_g.begin(), bwd_g.end(), 0.0));
  out.exposed_s = out.gather_exposed_s + std::max(0.0, last.stream_end_s - last.compute_end_s);
  out.total_s =
      out.gather_total_s + std::accumulate(reduce_scatter_s.begin(), reduce_scatter_s.end(), 0.0);
  return out;
}

}  // namespace

DpSync dp_sync(const plan::StagePlan& stage, const plan::StrategyParts& parts, int dp,
               const Link& link, const StageCompute& compute, const Workload& workload,
               ZeroStage zero_stage, std::int64_t micro_batches) {
  const auto& buckets = stage.layout.buckets;
  const bool all_reduce = parts.dp_sync == plan::DpSync::kAllReduce;
  double total_numel = 0.0;
  for (const auto& b : buckets) total_numel += static_cast<double>(b.numel);

  std::vector<double> ready, grad_comm, need, gather_comm;
  double done = 0.0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const double numel = static_cast<double>(buckets[b].numel);
    done += numel;
    ready.push_back(total_numel > 0 ? compute.last_backward_s() * done / total_numel : 0.0);
    if (all_reduce) {
      grad_comm.push_back(
          all_reduce_s(link, dp, numel * workload.grad_bytes, workload.var_collective));
    } else {
      grad_comm.push_back(reduce_scatter_v_s(link, shard_bytes(stage, b, dp, workload.grad_bytes),
                                             workload.var_collective));
    }
  }
  DpSync out;
  if (zero_stage == ZeroStage::kThree && !all_reduce)
    return zero3_sync(stage, dp, link, compute, workload, micro_batches, grad_comm, total_numel);
  out.exposed_s = exposed_after_window(ready, grad_comm, compute.last_backward_s());
  out.total_s = std::accumulate(grad_comm.begin(), grad_comm.end(), 0.0);
  if (all_reduce) return out;

  // ZeRO-1 param All-Gather-v, posted at the start of forward in the order forward needs it.
  double before = 0.0;
  for (std::size_t i = buckets.size(); i-- > 0;) {
    need.push_back(total_numel > 0 ? compute.first_forward_s() * before / total_numel : 0.0);
    before += static_cast<double>(buckets[i].numel);
    gather_comm.push_back(all_gather_v_s(link, shard_bytes(stage, i, dp, workload.param_bytes),
                                         workload.var_collective));
  }
  out.gather_exposed_s = stall_before_needs(gather_comm, need);
  out.gather_total_s = std::accumulate(gather_comm.begin(), gather_comm.end(), 0.0);
  out.exposed_s += out.gather_exposed_s;
  out.total_s += out.gather_total_s;
  return out;
}

double layerwise_param_sync_s(const plan::StagePlan& stage, int dp, const Link& link,
                              const Workload& workload) {
  std::vector<double> owned(dp, 0.0);
  for_each_owned(
      stage, dp, [](int) { return true; }, [&](int r, double n) { owned[r] += n; });
  for (double& n : owned) n *= workload.param_bytes;
  return all_gather_v_s(link, owned, workload.var_collective);
}

std::vector<double> elementwise_numel(const model::ModelSpec& model, const plan::StagePlan& stage,
                                      int dp) {
  std::vector<double> numel(dp, 0.0);
  auto elementwise = [&](int p) { return !model.params[p].is_matrix(); };
  for_each_owned(stage, dp, elementwise, [&](int r, double n) { numel[r] += n; });
  for (const auto& bucket : stage.layout.buckets) {
    for (const auto& slot : bucket.slots) {
      if (elementwise(slot.param) && stage.owner[slot.param] == plan::kEveryone) {
        for (auto& n : numel) n += static_cast<double>(slot.numel);
      }
    }
  }
  return numel;
}

}  // namespace canzona::sim::detail
