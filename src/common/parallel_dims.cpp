// The grid's axes and the ZeRO stage (parallel_dims.h).
#include "canzona/common/parallel_dims.h"

#include "canzona/common/error.h"

namespace canzona {

ZeroStage parse_zero_stage(int stage, const char* flag) {
  CANZONA_REQUIRE(stage == 1 || stage == 3, flag, " ", stage, ": must be 1 (ZeRO-1) or 3 (ZeRO-3)");
  return static_cast<ZeroStage>(stage);
}

namespace {

// The name of a degree as the user typed it: "--dp" or "dp".
std::string name(DimNames names, const char* dim) {
  return names == DimNames::kFlags ? std::string("--") + dim : std::string(dim);
}

}  // namespace

// The checks run in a fixed order so every rank, given the same dims, fails with the same message.
// Each degree is bounded before a product is formed, so no product can overflow.
void ParallelDims::check(DimNames names) const {
  const auto n = [names](const char* dim) { return name(names, dim); };
  CANZONA_REQUIRE(dp > 0, n("dp"), " must be positive (got ", dp, ")");
  CANZONA_REQUIRE(tp > 0, n("tp"), " must be positive (got ", tp, ")");
  CANZONA_REQUIRE(pp > 0, n("pp"), " must be positive (got ", pp, ")");
  const bool fits = dp <= kMaxRanks && tp <= kMaxRanks && pp <= kMaxRanks && world() <= kMaxRanks;
  CANZONA_REQUIRE(fits, n("dp"), " x ", n("tp"), " x ", n("pp"), " = ", dp, " x ", tp, " x ", pp,
                  " ranks is more than ", kMaxRanks, " (kMaxRanks)");
  CANZONA_REQUIRE(ep > 0 && ep <= kMaxRanks, n("ep"), " must be in [1, ", kMaxRanks,
                  "] (kMaxRanks; got ", ep, ")");
  CANZONA_REQUIRE(etp > 0 && etp <= kMaxRanks, n("etp"), " must be in [1, ", kMaxRanks,
                  "] (kMaxRanks; got ", etp, ")");
  CANZONA_REQUIRE(stage_ranks() % expert_ranks() == 0, n("ep"), " ", ep, " x ", n("etp"), " ", etp,
                  " = ", expert_ranks(), " does not divide ", n("dp"), " ", dp, " x ", n("tp"), " ",
                  tp, " = ", stage_ranks(), " ranks (expert DP = DP x TP / (EP x ETP))");
}

void ParallelDims::check_world(std::int64_t world_size, DimNames names) const {
  check(names);
  CANZONA_REQUIRE(world() == world_size, "world size ", world_size, " != dp ", dp, " x tp ", tp,
                  " x pp ", pp, " (launch with mpirun -np ", world(), ")");
}

GridCoord ParallelDims::coord(int world_rank) const {
  CANZONA_CHECK(world_rank >= 0 && world_rank < world(), "world rank ", world_rank, " outside ",
                to_string(*this));
  GridCoord c;
  c.tp = world_rank % tp;
  c.dp = (world_rank / tp) % dp;
  c.pp = world_rank / (tp * dp);
  return c;
}

int ParallelDims::rank(const GridCoord& c) const {
  return (c.pp * dp + c.dp) * tp + c.tp;
}

ExpertCoord ParallelDims::expert_coord(int dp_index, int tp_index) const {
  CANZONA_CHECK(dp_index >= 0 && dp_index < dp && tp_index >= 0 && tp_index < tp, "rank (",
                dp_index, ", ", tp_index, ") outside ", to_string(*this));
  const int l = dp_index * tp + tp_index;  // < dp x tp <= kMaxRanks after check()
  return {l / (etp * ep), (l / etp) % ep, l % etp};
}

std::string to_string(const ParallelDims& d) {
  std::string s = "dp " + std::to_string(d.dp) + " x tp " + std::to_string(d.tp) + " x pp " +
                  std::to_string(d.pp);
  if (d.expert_parallel())
    s += " (ep " + std::to_string(d.ep) + " x etp " + std::to_string(d.etp) + ")";
  return s;
}

}  // namespace canzona
