#include "verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "canzona/comm/communicator.h"
#include "canzona/common/error.h"
#include "canzona/engine/shard.h"

namespace canzona::runtime {
namespace {

// Puts a gathered param's `values` into `out`. A param gathered before is the tied embedding,
// whose last-stage copy must equal the first stage's bitwise: elements that differ become NaN, so
// the comparison with the reference fails there.
void put_gathered(std::vector<float>& out, std::vector<float> values) {
  if (out.empty()) {
    out = std::move(values);
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (std::memcmp(&out[i], &values[i], sizeof(float)) != 0)
      out[i] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

std::vector<std::vector<float>> gather_replica(comm::Grid& grid, const model::ModelSpec& model,
                                               const StageLayouts& layouts,
                                               std::span<const float> local, int replica) {
  const ParallelDims shape = grid.dims();
  comm::Communicator& world = grid.world();
  const int size = world.size();
  CANZONA_CHECK_EQ(std::ssize(layouts), shape.pp);
  CANZONA_CHECK_EQ(static_cast<std::int64_t>(local.size()),
                   layouts[static_cast<std::size_t>(grid.coord().pp)]->numel);
  const bool sender = grid.coord().dp == replica;
  std::vector<std::int64_t> send_counts(size, 0), send_displs(size, 0);
  std::vector<std::int64_t> recv_counts(size, 0), recv_displs(size, 0);
  if (sender) send_counts[0] = std::ssize(local);
  std::int64_t total = 0;
  if (world.rank() == 0) {
    for (int s = 0; s < shape.pp; ++s)
      for (int t = 0; t < shape.tp; ++t)
        recv_counts[shape.rank(comm::GridCoord{s, replica, t})] =
            layouts[static_cast<std::size_t>(s)]->numel;
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
  for (int s = 0; s < shape.pp; ++s)
    for (const layout::Bucket& bucket : layouts[static_cast<std::size_t>(s)]->buckets)
      for (const layout::Slot& slot : bucket.slots) {
        const model::ParamSpec& p = model.params[slot.param];
        std::vector<float> values(static_cast<std::size_t>(p.numel()), 0.0f);
        for (int t = 0; t < shape.tp; ++t) {
          const int q = shape.rank(comm::GridCoord{s, replica, t});
          const float* shard = recv.data() + recv_displs[q] + bucket.offset + slot.offset;
          engine::local_to_task(engine::shard_map(p, -1, shape.tp, t), shard, values.data());
        }
        put_gathered(global[slot.param], std::move(values));
      }
  return global;
}

namespace {

std::string pack_ranges(
    const std::vector<std::pair<std::int64_t, std::span<const float>>>& ranges) {
  std::string bytes;
  for (const auto& [offset, values] : ranges) {
    const std::int64_t header[2] = {offset, static_cast<std::int64_t>(values.size())};
    bytes.append(reinterpret_cast<const char*>(header), sizeof(header));
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  }
  return bytes;
}

// Writes the ranges packed in `bytes` into `local` (layout order) and counts each element's
// holders in `held`.
void unpack_ranges(const std::string& bytes, std::vector<float>& local, std::vector<int>& held) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::int64_t header[2];
    CANZONA_CHECK(at + sizeof(header) <= bytes.size(), "truncated gradient ranges");
    std::memcpy(header, bytes.data() + at, sizeof(header));
    at += sizeof(header);
    const auto [offset, count] = std::pair{header[0], header[1]};
    CANZONA_CHECK(offset >= 0 && count >= 0 && offset + count <= std::ssize(local),
                  "gradient range [", offset, ", ", offset + count, ") outside the layout");
    CANZONA_CHECK(at + count * sizeof(float) <= bytes.size(), "truncated gradient ranges");
    std::memcpy(local.data() + offset, bytes.data() + at, count * sizeof(float));
    at += count * sizeof(float);
    for (std::int64_t i = offset; i < offset + count; ++i) ++held[i];
  }
}

}  // namespace

std::vector<std::vector<std::vector<float>>> gather_reduced_grads(
    comm::Grid& grid, const model::ModelSpec& model, const StageLayouts& layouts,
    const std::vector<std::pair<std::int64_t, std::span<const float>>>& ranges, bool sharded) {
  const std::vector<std::string> blobs =
      comm::gather_bytes_to_root(grid.world(), pack_ranges(ranges));
  std::vector<std::vector<std::vector<float>>> views;
  if (blobs.empty()) return views;
  const ParallelDims shape = grid.dims();
  CANZONA_CHECK_EQ(std::ssize(layouts), shape.pp);
  const int num_views = sharded ? 1 : shape.dp;
  for (int v = 0; v < num_views; ++v) {
    std::vector<std::vector<float>>& global = views.emplace_back(model.params.size());
    for (int s = 0; s < shape.pp; ++s) {
      const layout::Layout& layout = *layouts[static_cast<std::size_t>(s)];
      std::vector<std::vector<float>> local(shape.tp);  // [tp rank] (layout.numel)
      for (int t = 0; t < shape.tp; ++t) {
        local[t].assign(static_cast<std::size_t>(layout.numel), 0.0f);
        std::vector<int> held(static_cast<std::size_t>(layout.numel), 0);
        for (int d = sharded ? 0 : v; d < (sharded ? shape.dp : v + 1); ++d)
          unpack_ranges(blobs[shape.rank(comm::GridCoord{s, d, t})], local[t], held);
        for (const layout::Bucket& bucket : layout.buckets)
          for (const layout::Slot& slot : bucket.slots)
            for (std::int64_t i = 0; i < slot.numel; ++i)
              CANZONA_CHECK(held[bucket.offset + slot.offset + i] == 1, "param '",
                            model.params[slot.param].name, "' local element ", i, " of TP rank ", t,
                            " is held by ", held[bucket.offset + slot.offset + i],
                            " DP ranks after the gradient sync, not 1");
      }
      for (const layout::Bucket& bucket : layout.buckets)
        for (const layout::Slot& slot : bucket.slots) {
          const model::ParamSpec& p = model.params[slot.param];
          std::vector<float> values(static_cast<std::size_t>(p.numel()), 0.0f);
          for (int t = 0; t < shape.tp; ++t)
            engine::local_to_task(engine::shard_map(p, -1, shape.tp, t),
                                  local[t].data() + bucket.offset + slot.offset, values.data());
          put_gathered(global[slot.param], std::move(values));
        }
    }
  }
  return views;
}

double native_sum_factor(int summands) {
  const double n = summands - 1;
  const double u = std::ldexp(1.0, -24);
  return 2.0 * n * u / (1.0 - n * u) * 1.01;
}

std::string Mismatch::describe() const {
  if (!found) return "";
  if (!problem.empty()) return str("param '", param, "': ", problem);
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
                        const std::vector<std::vector<float>>& want, Tolerance tolerance) {
  Mismatch m;
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    static const std::vector<float> kNone;
    const std::vector<float>& a = p < got.size() ? got[p] : kNone;
    const std::vector<float>& b = p < want.size() ? want[p] : kNone;
    if (a.size() != b.size()) {
      if (!m.found) {
        m.found = true;
        m.param = model.params[p].name;
        m.problem = str("got ", a.size(), " elements, want ", b.size());
      }
      continue;
    }
    m.elements += static_cast<std::int64_t>(a.size());
    if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) continue;
    const std::vector<float>* scale = tolerance.scale ? &tolerance.scale->at(p) : nullptr;
    if (scale) CANZONA_CHECK_EQ(scale->size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
      ++m.not_bitwise;
      const double diff = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      m.max_abs_diff = std::isnan(diff) ? INFINITY : std::max(m.max_abs_diff, diff);
      const bool within =
          scale && diff <= tolerance.factor * static_cast<double>((*scale)[i]);  // NaN: false
      if (within || m.found) continue;
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
