#include "canzona/runtime/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "canzona/common/error.h"
#include "canzona/runtime/shard.h"

namespace canzona::runtime {

std::vector<std::vector<float>> gather_replica(comm::Grid& grid, const model::ModelSpec& model,
                                               const layout::Layout& layout,
                                               std::span<const float> local, int replica) {
  const comm::GridShape shape = grid.shape();
  comm::Communicator& world = grid.world();
  const int size = world.size();
  CANZONA_CHECK_EQ(static_cast<std::int64_t>(local.size()), layout.numel);
  const bool sender = grid.coord().dp == replica;
  std::vector<std::int64_t> send_counts(size, 0), send_displs(size, 0);
  std::vector<std::int64_t> recv_counts(size, 0), recv_displs(size, 0);
  if (sender) send_counts[0] = layout.numel;
  std::vector<int> source(shape.tp, -1);  // [tp rank] world rank of the replica's shard
  std::int64_t total = 0;
  if (world.rank() == 0) {
    for (int t = 0; t < shape.tp; ++t) {
      const int q = comm::grid_rank(shape, comm::GridCoord{0, replica, t});
      source[t] = q;
      recv_counts[q] = layout.numel;
    }
    for (int q = 0; q < size; ++q) {
      recv_displs[q] = total;
      total += recv_counts[q];
    }
  }
  std::vector<float> recv(static_cast<std::size_t>(total), 0.0f);
  world.all_to_all(local, send_counts, send_displs, recv, recv_counts, recv_displs).wait();
  std::vector<std::vector<float>> global;
  if (world.rank() != 0) return global;
  global.resize(model.params.size());
  for (const layout::Bucket& bucket : layout.buckets)
    for (const layout::Slot& slot : bucket.slots) {
      const model::ParamSpec& p = model.params[slot.param];
      std::vector<float>& out = global[slot.param];
      out.assign(static_cast<std::size_t>(p.numel()), 0.0f);
      for (int t = 0; t < shape.tp; ++t) {
        const float* shard = recv.data() + recv_displs[source[t]] + bucket.offset + slot.offset;
        local_to_task(shard_map(p, -1, shape.tp, t), shard, out.data());
      }
    }
  return global;
}

std::string Mismatch::describe() const {
  if (!found) return "";
  std::uint32_t got_bits = 0, want_bits = 0;
  std::memcpy(&got_bits, &got, sizeof(got));
  std::memcpy(&want_bits, &want, sizeof(want));
  char text[160];
  std::snprintf(text, sizeof(text), "element %lld: got %.9g, want %.9g (bits 0x%08x, 0x%08x)",
                static_cast<long long>(element), static_cast<double>(got),
                static_cast<double>(want), got_bits, want_bits);
  return str("param '", param, "' ", text);
}

Mismatch compare_params(const model::ModelSpec& model, const std::vector<std::vector<float>>& got,
                        const std::vector<std::vector<float>>& want) {
  Mismatch m;
  for (std::size_t p = 0; p < model.params.size() && p < got.size() && p < want.size(); ++p) {
    const std::vector<float>& a = got[p];
    const std::vector<float>& b = want[p];
    if (a.empty() || b.empty()) continue;
    CANZONA_CHECK_EQ(a.size(), b.size());
    m.elements += static_cast<std::int64_t>(a.size());
    if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) continue;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
      const double diff = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      m.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(m.max_abs_diff, diff);
      if (m.found) continue;
      m.found = true;
      m.param = model.params[p].name;
      m.element = static_cast<std::int64_t>(i);
      m.got = a[i];
      m.want = b[i];
    }
  }
  return m;
}

}  // namespace canzona::runtime
