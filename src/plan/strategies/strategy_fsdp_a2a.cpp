// fsdp-a2a: the baseline of fully sharded matrix optimizers as their authors build them. FSDP
// keeps each wrapped unit (here a bucket, about one layer under ZeRO-3) as one flat buffer cut
// into equal shards, so a matrix straddles shards; an optimizer that needs whole matrices moves
// each matrix's gradient to one owner rank by All-to-All, updates it there and sends the updated
// values back by a second All-to-All. Microsoft's Dion (github.com/microsoft/dion, dion/muon.py at
// 0c20549 with create_param_batches of dion/opt_utils.py at 5f5b948), torchtitan's FlexShard and
// the authors' FSDP-Canzona work this way.
//
// Owners follow Dion's published rule: matrices are grouped by shape (groups in order of first
// appearance, params in registration order), each group is cut into batches of dp consecutive
// matrices, and the k-th matrix of a batch belongs to DP rank k (its All-to-All sends chunk r to
// rank r). Each batch is one All-to-All each way, in that order. Element-wise params are updated
// where their elements lie (FSDP's sharded AdamW): kDivided over the equal cuts.
//
// Dion has no TP (a matrix sharded on two mesh dimensions is refused); with TP > 1 the owner's TP
// ranks gather the TP shards and compute redundantly, as Megatron's layer-wise optimizer does by
// default (TpExchange::kRedundantGather).
#include <map>

#include "algorithms/dp.h"
#include "strategies/strategies.h"

namespace canzona::plan::detail {

StagePlan plan_fsdp_a2a(const model::ModelSpec& model, StagePlan stage, const PlanOptions& o) {
  for (const layout::Bucket& bucket : stage.layout.buckets)
    stage.cuts.push_back(equal_chunk_cuts(bucket.numel, o.dims.dp));
  // Shape groups in order of first appearance.
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> group_of;
  std::vector<std::vector<int>> groups;
  for (int p : stage.params) {
    const model::ParamSpec& param = model.params[p];
    if (!param.is_matrix()) {
      stage.owner[p] = kDivided;
      continue;
    }
    const auto [it, fresh] = group_of.try_emplace({param.rows(), param.cols()}, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(p);
  }
  for (const std::vector<int>& group : groups)
    for (std::size_t i = 0; i < group.size(); ++i) {
      const auto k = static_cast<int>(i % static_cast<std::size_t>(o.dims.dp));
      if (k == 0) stage.owner_batches.emplace_back();
      stage.owner_batches.back().push_back(group[i]);
      stage.owner[group[i]] = k;
    }
  plan_tp(o, stage, model, no_tp_groups);
  return stage;
}

}  // namespace canzona::plan::detail
