// α-β collective costs (collectives.h).
#include "canzona/sim/collectives.h"

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

double ring_reduce_scatter_v_s(const Link& link, int p, double max_chunk_bytes) {
  check_args(p, max_chunk_bytes);
  if (p == 1) return 0.0;
  return (p - 1) * (max_chunk_bytes / link.beta() + link.alpha());
}

double ring_all_gather_v_s(const Link& link, int p, double max_chunk_bytes) {
  return ring_reduce_scatter_v_s(link, p, max_chunk_bytes);
}

double all_to_all_s(const Link& link, int p, double max_rank_bytes) {
  check_args(p, max_rank_bytes);
  if (p == 1) return 0.0;
  return (p - 1) * link.alpha() + max_rank_bytes / link.beta();
}

}  // namespace canzona::sim
