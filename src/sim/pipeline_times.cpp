// The 1F1B forward-backward timed operation by operation (stage_model.h: time_pipeline).
#include <algorithm>

#include "canzona/common/error.h"
#include "canzona/plan/pipeline_schedule.h"
#include "stage_model.h"

namespace canzona::sim::detail {

PipelineTimes time_pipeline(const std::vector<StageCompute>& stages, std::int64_t micro_batches,
                            double p2p_s) {
  const int p = static_cast<int>(stages.size());
  CANZONA_CHECK(p >= 1 && micro_batches >= 1, "pipeline of ", p, " stages, ", micro_batches,
                " micro batches");
  PipelineTimes out;
  out.end_s.assign(static_cast<std::size_t>(p), 0.0);
  out.compute_s.assign(static_cast<std::size_t>(p), 0.0);
  out.bubble_s.assign(static_cast<std::size_t>(p), 0.0);
  double sum = 0.0, slowest = 0.0;
  for (int s = 0; s < p; ++s) {
    const double c = stages[static_cast<std::size_t>(s)].per_micro_batch_s;
    out.compute_s[static_cast<std::size_t>(s)] = static_cast<double>(micro_batches) * c;
    sum += c;
    slowest = std::max(slowest, c);
  }
  if (static_cast<double>(micro_batches) * p > static_cast<double>(kMaxTimedOps)) {
    const double end =
        sum + static_cast<double>(micro_batches - 1) * slowest + 2.0 * (p - 1) * p2p_s;
    for (int s = 0; s < p; ++s) {
      out.end_s[static_cast<std::size_t>(s)] = end;
      out.bubble_s[static_cast<std::size_t>(s)] =
          std::max(0.0, end - out.compute_s[static_cast<std::size_t>(s)]);
    }
    return out;
  }
  const auto m = static_cast<int>(micro_batches);
  std::vector<std::vector<plan::PipelineOp>> ops(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) ops[static_cast<std::size_t>(s)] = plan::one_f_one_b(p, s, m);
  // [stage][micro] end of its forward / backward; < 0 not yet run.
  std::vector<std::vector<double>> fwd(static_cast<std::size_t>(p), std::vector<double>(m, -1.0));
  std::vector<std::vector<double>> bwd = fwd;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0);
  std::size_t left = static_cast<std::size_t>(2) * static_cast<std::size_t>(m) * p;
  while (left > 0) {
    bool moved = false;
    for (int s = 0; s < p; ++s) {
      const auto us = static_cast<std::size_t>(s);
      while (next[us] < ops[us].size()) {
        const plan::PipelineOp& op = ops[us][next[us]];
        const auto mb = static_cast<std::size_t>(op.micro);
        const double c = stages[us].per_micro_batch_s;
        double ready = free_at[us];
        if (op.kind == plan::PipelineOp::Kind::kForward) {
          if (s > 0) {
            if (fwd[us - 1][mb] < 0.0) break;
            ready = std::max(ready, fwd[us - 1][mb] + p2p_s);
          }
          free_at[us] = ready + c / 3.0;
          fwd[us][mb] = free_at[us];
        } else {
          if (s + 1 < p) {
            if (bwd[us + 1][mb] < 0.0) break;
            ready = std::max(ready, bwd[us + 1][mb] + p2p_s);
          }
          free_at[us] = ready + c * 2.0 / 3.0;
          bwd[us][mb] = free_at[us];
        }
        ++next[us];
        --left;
        moved = true;
      }
    }
    CANZONA_CHECK(moved, "1F1B schedule of ", p, " stages stalled");
  }
  for (int s = 0; s < p; ++s) {
    const auto us = static_cast<std::size_t>(s);
    out.end_s[us] = free_at[us];
    out.bubble_s[us] = std::max(0.0, free_at[us] - out.compute_s[us]);
  }
  return out;
}

}  // namespace canzona::sim::detail
