// The axes of the parallel grid and the ZeRO stage: the one place a launch, the planner, the
// simulator, the communicators and the Python package read them from (in the spirit of
// torchtitan's ParallelDims).
//
// Terms (docs/architecture.md, "The grid"). The world's ranks form a grid of pp x dp x tp in
// Megatron's order, tp fastest: world rank = (pp_index x dp + dp_index) x tp + tp_index. Inside a
// pipeline stage the dp x tp ranks, numbered l = dp_index x tp + tp_index, are also Megatron's
// expert grid of expert DP x EP x expert TP, expert TP fastest: etp_index = l % etp,
// ep_index = (l / etp) % ep, edp_index = l / (etp x ep), edp = dp x tp / (ep x etp).
#pragma once

#include <cstdint>
#include <string>

namespace canzona {

// 2^20 ranks (dp x tp x pp) is far beyond any cluster; every degree and product is bounded by it,
// so no product of two degrees overflows int64.
inline constexpr std::int64_t kMaxRanks = std::int64_t{1} << 20;

// How much of the model one DP rank keeps between steps. kOne: ZeRO-1, every rank keeps all params
// and gradients, the optimizer state is sharded. kThree: ZeRO-3, params and gradients are sharded
// too (each bucket gathered around its use). Megatron's stage 2 is not offered.
enum class ZeroStage { kOne = 1, kThree = 3 };
// 1 -> kOne, 3 -> kThree; throws UsageError naming `flag` ("--zero-stage 2: must be 1 (ZeRO-1) or
// 3 (ZeRO-3)") for anything else.
ZeroStage parse_zero_stage(int stage, const char* flag = "--zero-stage");
inline int to_int(ZeroStage stage) {
  return static_cast<int>(stage);
}

// How check() names the degrees in its messages: the CLIs' flags ("--dp") or the Python keywords
// ("dp").
enum class DimNames { kFlags, kKeywords };

// A rank's position on the grid.
struct GridCoord {
  int pp = 0;
  int dp = 0;
  int tp = 0;
};
// A rank's position on the expert grid of its stage.
struct ExpertCoord {
  int edp = 0;
  int ep = 0;
  int etp = 0;
};

struct ParallelDims {
  int dp = 1;   // data parallel
  int tp = 1;   // tensor parallel
  int pp = 1;   // pipeline stages
  int ep = 1;   // expert parallel (MoE models): each EP rank holds num_experts / ep experts
  int etp = 1;  // expert tensor parallel (MoE models)

  // Valid only after check() (every product then fits).
  std::int64_t world() const { return std::int64_t{dp} * tp * pp; }
  std::int64_t stage_ranks() const { return std::int64_t{dp} * tp; }
  std::int64_t expert_ranks() const { return std::int64_t{ep} * etp; }
  int edp() const { return static_cast<int>(stage_ranks() / expert_ranks()); }
  bool expert_parallel() const { return ep > 1 || etp > 1; }

  // Throws UsageError naming the degree and the limit for: dp, tp, pp, ep or etp outside
  // [1, kMaxRanks]; dp x tp x pp above kMaxRanks; ep x etp not dividing dp x tp.
  void check(DimNames names = DimNames::kFlags) const;
  // check(), then UsageError unless world_size == dp x tp x pp ("world size 6 != dp 2 x tp 2 x
  // pp 1").
  void check_world(std::int64_t world_size, DimNames names = DimNames::kFlags) const;

  // The coordinates of `world_rank` (0 <= world_rank < world()) and back.
  GridCoord coord(int world_rank) const;
  int rank(const GridCoord& coord) const;
  // The expert coordinates of the rank at (dp_index, tp_index) of a stage (above).
  ExpertCoord expert_coord(int dp_index, int tp_index) const;

  bool operator==(const ParallelDims&) const = default;
};

// "dp 2 x tp 2 x pp 1", with " (ep 2 x etp 1)" appended when expert_parallel().
std::string to_string(const ParallelDims& dims);

}  // namespace canzona
