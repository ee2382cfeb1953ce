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

// β of a ring crossing nodes: one flow per group through each node's NICs.
double ring_beta(const Link& link) {
  return link.beta() / std::max(1.0, link.nic_share);
}

// kDirect (collectives.h): `gather` false for the Reduce-Scatter, true for the All-Gather.
double direct_v_s(const Link& link, const std::vector<double>& c, bool gather) {
  const int p = static_cast<int>(c.size());
  if (p == 1) return 0.0;
  double total = 0.0;
  for (double x : c) total += x;
  double worst = 0.0;
  if (link.ranks_per_node <= 0) {  // one node: each rank's own sends and receives
    for (int r = 0; r < p; ++r) {
      const double sent = gather ? (p - 1) * c[r] : total - c[r];
      const double received = gather ? total - c[r] : (p - 1) * c[r];
      worst = std::max({worst, sent, received});
    }
    return link.alpha() + worst / link.beta();
  }
  const int g = link.ranks_per_node;
  for (int first = 0; first < p; first += g) {
    const int here = std::min(g, p - first);
    double inside = 0.0;
    for (int r = first; r < first + here; ++r) inside += c[r];
    const double outside = total - inside;
    const double leaving = gather ? (p - here) * inside : here * outside;
    const double entering = gather ? here * outside : (p - here) * inside;
    worst = std::max({worst, leaving, entering});
  }
  return link.alpha() + link.nic_share * worst / link.beta();
}

}  // namespace

double ring_reduce_scatter_s(const Link& link, int p, double bytes) {
  check_args(p, bytes);
  if (p == 1) return 0.0;
  return (p - 1) * (bytes / p / ring_beta(link) + link.alpha());
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
  if (name == "direct") return VarCollective::kDirect;
  throw UsageError(
      str("unknown variable-size collective '", name, "' (expected grouped, padded or direct)"));
}

const char* to_string(VarCollective kind) {
  switch (kind) {
    case VarCollective::kGrouped:
      return "grouped";
    case VarCollective::kPadded:
      return "padded";
    case VarCollective::kDirect:
      return "direct";
  }
  return "?";
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
  if (kind == VarCollective::kDirect) return direct_v_s(link, chunk_bytes, /*gather=*/false);
  if (kind == VarCollective::kPadded) return (p - 1) * (hi / ring_beta(link) + link.alpha());
  return (total - lo) / ring_beta(link) + (p - 1) * link.alpha();
}

double all_gather_v_s(const Link& link, const std::vector<double>& chunk_bytes,
                      VarCollective kind) {
  if (kind == VarCollective::kDirect && chunk_bytes.size() > 1) {
    for (double c : chunk_bytes) check_args(static_cast<int>(chunk_bytes.size()), c);
    return direct_v_s(link, chunk_bytes, /*gather=*/true);
  }
  return reduce_scatter_v_s(link, chunk_bytes, kind);
}

double all_reduce_s(const Link& link, int p, double bytes, VarCollective kind) {
  check_args(p, bytes);
  if (kind != VarCollective::kDirect) return ring_all_reduce_s(link, p, bytes);
  if (p == 1) return 0.0;
  const std::vector<double> even(static_cast<std::size_t>(p), bytes / p);
  return direct_v_s(link, even, false) + direct_v_s(link, even, true);
}

double all_to_all_s(const Link& link, int p, double max_rank_bytes) {
  check_args(p, max_rank_bytes);
  if (p == 1) return 0.0;
  return (p - 1) * link.alpha() + max_rank_bytes / link.beta();
}

}  // namespace canzona::sim
