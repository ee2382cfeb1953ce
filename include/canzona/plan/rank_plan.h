// What one grid rank does, decoded from a StagePlan (docs/design.md sections 1, 3 and 4).
//
// The plan records decisions compactly with sentinels (plan.h: owner kEveryone / kDivided, host
// kAllTp, cuts per bucket). This file is the one place they are decoded: the per-task and
// per-slot helpers below say which DP and TP ranks compute a task and which DP ranks update
// which elements of an element-wise param, and decode_rank() lists everything one (DP, TP) rank
// of a stage does in a step. Metrics, the simulator, plan checks and the runtime all use them.
//
// Terms. The strategies' parts are in strategy.h. Elements are TP-local: a param's local elements
// are its TP shard in the Megatron layout (layout.h).
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/shard_map.h"

namespace canzona::plan {

// A half-open range of ranks [begin, end).
struct RankRange {
  int begin = 0;
  int end = 0;
  bool contains(int r) const { return r >= begin && r < end; }
  int size() const { return end > begin ? end - begin : 0; }
};

// The DP ranks that compute task t: its owner, or all of [0, dp) for kEveryone.
RankRange task_dp_ranks(const Task& t, int dp);
// The TP ranks that compute task t: its host, or all of [0, tp) for kAllTp.
RankRange task_tp_ranks(const Task& t, int tp);

// The DP ranks that update part of the element-wise param in `slot` of bucket `bucket`: its
// owner, every rank (kEveryone), or for a divided slot the ranks whose shards of the cuts meet it
// (found by binary search: O(log dp)). Empty for matrix params' owners outside [0, dp).
RankRange slot_dp_ranks(const StagePlan& stage, int bucket, const layout::Slot& slot, int dp);
// The part of that slot DP rank d updates, in elements relative to the slot's start:
// [first, second); empty (first == second) when d updates none of it.
std::pair<std::int64_t, std::int64_t> slot_part(const StagePlan& stage, int bucket,
                                                const layout::Slot& slot, int d);

// Local elements [begin, end) of an element-wise param this rank updates with AdamW.
struct ElementwiseUpdate {
  int param = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// How a rank gets the full gradient of a matrix task it computes.
enum class TaskRole {
  kLocal,            // its local shard is the whole matrix (tp == 1 or a replicated param)
  kRedundantGather,  // TP-split, every TP rank gathers the shards and computes it
  kHosted,           // TP-split, this rank is the task's host in a micro group
  kOwnerGathered,    // fsdp-a2a: its DP shards arrive by the owner All-to-All (then, when
                     // TP-split, every TP rank gathers the TP shards and computes it)
};

struct RankTask {
  int task = 0;  // index into StagePlan::tasks
  TaskRole role = TaskRole::kLocal;
};

// This rank's shard of one task of a micro group, sent to the task's host (gather) and received
// back updated (scatter), at `offset` in the packed send buffer (== scatter receive buffer).
struct GroupSend {
  int task = 0;
  int host = 0;
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

// A task of the group this rank hosts: TP peer q's shard at offsets[q] of the receive buffer
// (== scatter send buffer), numel[q] elements.
struct GroupHosted {
  int task = 0;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> numel;
};

// One micro group of this rank's DP owner, as this TP rank sees it. Sends are in buffer order
// (by host, then group order); counts and displacements per TP peer for the gather All-to-All
// (the scatter swaps send and receive).
struct RankGroup {
  int index = 0;
  std::vector<GroupSend> sends;
  std::vector<GroupHosted> hosted;
  std::vector<std::int64_t> send_counts, send_displs;  // [tp peer]
  std::vector<std::int64_t> recv_counts, recv_displs;  // [tp peer]
  std::int64_t send_total() const;
  std::int64_t recv_total() const;
};

// One piece of the owner exchange: local elements [begin, begin + numel) of a matrix param, at
// `offset` of a packed buffer.
struct OwnerPiece {
  int param = 0;
  std::int64_t begin = 0;
  std::int64_t numel = 0;
  std::int64_t offset = 0;
};

// One batch of the owner exchange as this rank sees it. Gather: every rank sends the pieces of
// the batch's params inside its DP shards to their owners (`sends`, by owner then batch order);
// the owner receives every piece of the params it owns (`receives`, by source rank then batch
// order) and so the whole TP-local param. Scatter: the same All-to-All with send and receive
// swapped carries the updated values back. Counts and displacements per DP peer.
struct OwnerBatch {
  int index = 0;
  std::vector<int> owned;  // params of the batch this rank owns, batch order
  std::vector<OwnerPiece> sends, receives;
  std::vector<std::int64_t> send_counts, send_displs;  // [dp peer]
  std::vector<std::int64_t> recv_counts, recv_displs;  // [dp peer]
  std::int64_t send_total() const;
  std::int64_t recv_total() const;
};

// The DP shards of one bucket under the cuts: rank r's count and displacement (in elements from
// the bucket start) for the variable Reduce-Scatter and All-Gather.
struct BucketShards {
  std::vector<std::int64_t> counts;  // [dp rank]
  std::vector<std::int64_t> displs;  // [dp rank]
};

struct RankPlan {
  int stage = 0;
  int dp_rank = 0, tp_rank = 0, dp = 1, tp = 1;
  StrategyParts parts;
  std::vector<ElementwiseUpdate> elementwise;  // stage param order
  std::vector<RankTask> tasks;                 // tasks this rank computes, stage task order
  std::vector<RankGroup> groups;               // micro groups of its DP rank (kMicroGroups)
  std::vector<BucketShards> shards;            // [bucket] (kReduceScatter)
  std::vector<std::vector<int>> owned;         // [dp rank] params it owns (kLayerwiseAllGatherV)
  std::vector<OwnerBatch> owner_batches;       // (kOwnerAllToAll) in execution order
};

// Everything (dp_rank, tp_rank) does in stage `stage` of `plan` (made for `model`). Pure;
// O(slots x log dp + tasks + dp x buckets). Throws Error when the plan is inconsistent with the
// model (a task's piece out of range, a split dim tp does not divide).
RankPlan decode_rank(const model::ModelSpec& model, const Plan& plan, int stage, int dp_rank,
                     int tp_rank);

}  // namespace canzona::plan
