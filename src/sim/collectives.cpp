// α-β collective costs (collectives.h).
#include "canzona/sim/collectives.h"

#include <algorithm>

#include "canzona/common/error.h"

namespace canzona::sim {

namespace {

void check_args(int p, double bytes) {
  CANZONA_CHECK(p >= 1, "p=", p);
  CANZONA_CHECK(bytes >= 0.0, "bytes=", bytes);
}

}  // namespace

double ring_reduce_scatter_s(const Link& link, int p, double bytes) {
  check_args(p, bytes);
  if (p == 1) return 0.0;
  return (p - 1) * (bytes / p / link.beta() + link.alpha());
}

double ring_all_gather_s(const Link& link, int p, double bytes) {
  return ring_reduce_scatter_s(link, p, bytes);
}

double ring_all_reduce_s(const Link& link, int p, double bytes) {
  return 2.0 * ring_reduce_scatter_s(link, p, bytes);
}

VarCollective parse_var_collective(const std::string& name) {
  if (name == "grouped") return VarCollective::kGrouped;
  if (name == "padded") return VarCollective::kPadded;
  throw UsageError(
      str("unknown variable-size collective '", name, "' (expected grouped or padded)"));
}

const char* to_string(VarCollective kind) {
  return kind == VarCollective::kGrouped ? "grouped" : "padded";
}

double reduce_scatter_v_s(const Link& link, const std::vector<double>& chunk_bytes,
                          VarCollective kind) {
  const int p = static_cast<int>(chunk_bytes.size());
  CANZONA_CHECK(p >= 1, "no chunks");
  double total = 0.0, lo = chunk_bytes[0], hi = chunk_bytes[0];
  for (double c : chunk_bytes) {
    check_args(p, c);
    total += c;
    lo = std::min(lo, c);
    hi = std::max(hi, c);
  }
  if (p == 1) return 0.0;
  if (kind == VarCollective::kPadded) return (p - 1) * (hi / link.beta() + link.alpha());
  return (total - lo) / link.beta() + (p - 1) * link.alpha();
}

double all_gather_v_s(const Link& link, const std::vector<double>& chunk_bytes,
                      VarCollective kind) {
  return reduce_scatter_v_s(link, chunk_bytes, kind);
}

double all_to_all_s(const Link& link, int p, double max_rank_bytes) {
  check_args(p, max_rank_bytes);
  if (p == 1) return 0.0;
  return (p - 1) * link.alpha() + max_rank_bytes / link.beta();
}

}  // namespace canzona::sim
