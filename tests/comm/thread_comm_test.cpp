// The thread backend against plain loops: every collective on the world, DP and TP communicators
// of a 2 x 3 grid, checked bitwise against expected values computed here from grid.h's definition
// of the groups and communicator.h's definition of each collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/common/error.h"
#include "canzona/common/splitmix.h"

namespace canzona::comm {
namespace {

const ParallelDims k2x3{.dp = 2, .tp = 3, .pp = 1};
const ReduceMode kModes[] = {ReduceMode::kNative, ReduceMode::kDeterministic};
constexpr float kUntouched = -0.5f;

enum class Axis { kWorld, kDp, kTp };
const Axis kAxes[] = {Axis::kWorld, Axis::kDp, Axis::kTp};

const char* axis_name(Axis axis) {
  return axis == Axis::kWorld ? "world" : axis == Axis::kDp ? "dp" : "tp";
}

Communicator& on(Grid& grid, Axis axis) {
  return axis == Axis::kWorld ? grid.world() : axis == Axis::kDp ? grid.dp() : grid.tp();
}

// World ranks of the `axis` group of world rank w, in group-rank order (grid.h: world rank =
// (pp * DP + dp) * TP + tp; DP groups share (pp, tp), TP groups share (pp, dp)).
std::vector<int> members(const ParallelDims& s, int w, Axis axis) {
  const int tp = w % s.tp;
  const int dp = (w / s.tp) % s.dp;
  const int pp = w / (s.tp * s.dp);
  std::vector<int> out;
  if (axis == Axis::kWorld) {
    for (int r = 0; r < s.dp * s.tp * s.pp; ++r) out.push_back(r);
  } else if (axis == Axis::kDp) {
    for (int d = 0; d < s.dp; ++d) out.push_back((pp * s.dp + d) * s.tp + tp);
  } else {
    for (int t = 0; t < s.tp; ++t) out.push_back((pp * s.dp + dp) * s.tp + t);
  }
  return out;
}

// A float of either sign and magnitudes 2^-12 .. 2^13, fixed by (world rank, salt, index): sums of
// such values depend on their order (InputsMakeSumOrderVisible).
float input(int world_rank, int salt, std::int64_t j) {
  std::uint64_t x =
      (std::uint64_t(world_rank) << 48) ^ (std::uint64_t(salt) << 32) ^ std::uint64_t(j);
  x = splitmix64(x);
  const float mantissa = 1.0f + static_cast<float>(x & 0x7fffff) / 8388608.0f;
  const int exponent = static_cast<int>((x >> 23) % 25) - 12;
  return ((x >> 40) & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
}

// ((x_0 + x_1) + ...) over the members, of element j of each member's input.
float rank_order_sum(const std::vector<int>& group, int salt, std::int64_t j) {
  float sum = input(group[0], salt, j);
  for (std::size_t q = 1; q < group.size(); ++q) sum += input(group[q], salt, j);
  return sum;
}

::testing::AssertionResult bitwise_equal(const std::vector<float>& got,
                                         const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]))
      return ::testing::AssertionFailure()
             << "element " << i << " is " << got[i] << ", want " << want[i] << " (bitwise)";
  }
  return ::testing::AssertionSuccess();
}

// Per-rank counts of a variable-count collective, as a function of the group rank.
struct CountPattern {
  const char* name;
  std::int64_t (*count)(int rank);
};
const CountPattern kPatterns[] = {
    {"uneven", [](int r) -> std::int64_t { return (r * 5 + 2) % 4; }},  // 2 3 0 1 2 3
    {"odd ranks zero", [](int r) -> std::int64_t { return r % 2 ? 0 : r + 1; }},
    {"all zero", [](int) -> std::int64_t { return 0; }},
    {"large", [](int r) -> std::int64_t { return 1000 + 37 * r; }},
};

std::vector<std::int64_t> counts_of(const CountPattern& pattern, int size) {
  std::vector<std::int64_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = pattern.count(r);
  return counts;
}

std::int64_t sum(const std::vector<std::int64_t>& v, std::size_t end) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < end; ++i) total += v[i];
  return total;
}

// Every test below runs once per mode and count pattern; `salt` separates their inputs.
template <typename Body>
void sweep(const Body& body) {
  for (ReduceMode mode : kModes) {
    for (int p = 0; p < std::ssize(kPatterns); ++p) {
      SCOPED_TRACE(std::string("pattern ") + kPatterns[p].name +
                   (mode == ReduceMode::kNative ? ", native" : ", deterministic"));
      run_on_thread_grid(k2x3, mode, [&](Grid& grid) { body(grid, kPatterns[p], p); });
    }
  }
}

// reduce_scatter: recv = block `me` of the rank-order sum over the group's send buffers.
std::vector<float> expected_reduce_scatter(const std::vector<int>& group, int me,
                                           const std::vector<std::int64_t>& counts, int salt) {
  std::vector<float> want(counts[me]);
  const std::int64_t offset = sum(counts, me);
  for (std::int64_t k = 0; k < counts[me]; ++k) want[k] = rank_order_sum(group, salt, offset + k);
  return want;
}

TEST(ThreadComm, InputsMakeSumOrderVisible) {
  const std::vector<int> forward = {0, 1, 2, 3, 4, 5}, backward = {5, 4, 3, 2, 1, 0};
  int differing = 0;
  for (std::int64_t j = 0; j < 1000; ++j) {
    differing += std::bit_cast<std::uint32_t>(rank_order_sum(forward, 7, j)) !=
                 std::bit_cast<std::uint32_t>(rank_order_sum(backward, 7, j));
  }
  EXPECT_GT(differing, 100);
}

TEST(ThreadCommGrid, GroupsMatchMpiSplit) {
  for (const ParallelDims& shape :
       {k2x3, ParallelDims{.dp = 3, .tp = 2, .pp = 2}, ParallelDims{.dp = 1, .tp = 4, .pp = 1},
        ParallelDims{.dp = 4, .tp = 1, .pp = 2}, ParallelDims{}}) {
    run_on_thread_grid(shape, ReduceMode::kDeterministic, [&](Grid& grid) {
      const int w = grid.world().rank();
      EXPECT_EQ(grid.coord().dp, grid.dp().rank());
      EXPECT_EQ(grid.coord().tp, grid.tp().rank());
      for (Axis axis : kAxes) {
        const std::vector<std::uint64_t> got = on(grid, axis).all_gather_u64(w);
        const std::vector<int> want = members(shape, w, axis);
        EXPECT_EQ(got, std::vector<std::uint64_t>(want.begin(), want.end()))
            << axis_name(axis) << " group of world rank " << w;
      }
    });
  }
  // Written out for the 2 x 3 grid: DP groups {0, 3} {1, 4} {2, 5}, TP groups {0, 1, 2} {3, 4, 5}.
  EXPECT_EQ(members(k2x3, 4, Axis::kDp), (std::vector<int>{1, 4}));
  EXPECT_EQ(members(k2x3, 4, Axis::kTp), (std::vector<int>{3, 4, 5}));
}

// Expert groups over threads: the members of each rank's expert DP, expert TP and EP groups and
// of its EP slice, written out for DP 2 x TP 2 x PP 2 (stage ranks l = 0..3, world = pp x 4 + l).
// EP 2, ETP 1: (edp, ep) of l = (0,0) (0,1) (1,0) (1,1); expert DP groups {l0, l2} and {l1, l3},
// EP groups {l0, l1} and {l2, l3}. ETP 2, EP 1: expert TP groups {l0, l1} and {l2, l3}.
TEST(ThreadCommGrid, ExpertGroupsMatchMegatronsExpertOrder) {
  struct Want {
    struct {
      int ep, etp;
    } expert;
    int world;
    std::vector<std::uint64_t> edp, etp, ep, slice;
  };
  const std::vector<Want> cases = {
      {{2, 1}, 5, {5, 7}, {5}, {4, 5}, {1, 3, 5, 7}},
      {{2, 1}, 2, {0, 2}, {2}, {2, 3}, {0, 2, 4, 6}},
      {{1, 2}, 6, {4, 6}, {6, 7}, {6}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {{2, 2}, 3, {3}, {2, 3}, {1, 3}, {2, 3, 6, 7}},
  };
  for (const Want& c : cases) {
    const ParallelDims shape{.dp = 2, .tp = 2, .pp = 2, .ep = c.expert.ep, .etp = c.expert.etp};
    std::vector<ExpertGroups> groups = make_thread_expert_groups(shape, ReduceMode::kDeterministic);
    std::vector<std::vector<std::uint64_t>> got(4);
    run_on_thread_grid(shape, ReduceMode::kDeterministic, [&](Grid& grid) {
      const int w = grid.world().rank();
      ExpertGroups& g = groups[w];
      const auto edp = g.grid->dp().all_gather_u64(w);
      const auto etp = g.grid->tp().all_gather_u64(w);
      const auto ep = g.ep->all_gather_u64(w);
      const auto slice = g.grid->world().all_gather_u64(w);
      if (w == c.world) got = {edp, etp, ep, slice};
    });
    SCOPED_TRACE(testing::Message()
                 << "ep " << c.expert.ep << " etp " << c.expert.etp << ", world rank " << c.world);
    EXPECT_EQ(got[0], c.edp);
    EXPECT_EQ(got[1], c.etp);
    EXPECT_EQ(got[2], c.ep);
    EXPECT_EQ(got[3], c.slice);
  }
}

TEST(ThreadComm, ReduceScatterSumsBlocksInRankOrder) {
  sweep([](Grid& grid, const CountPattern& pattern, int p) {
    const int w = grid.world().rank();
    for (Axis axis : kAxes) {
      Communicator& comm = on(grid, axis);
      const std::vector<int> group = members(k2x3, w, axis);
      const int salt = 10 * p + static_cast<int>(axis);
      const std::vector<std::int64_t> counts = counts_of(pattern, comm.size());
      std::vector<float> send(sum(counts, counts.size()));
      for (std::size_t j = 0; j < send.size(); ++j) send[j] = input(w, salt, j);
      std::vector<float> recv(counts[comm.rank()], kUntouched);
      comm.reduce_scatter(send, recv, counts).wait();
      EXPECT_TRUE(bitwise_equal(recv, expected_reduce_scatter(group, comm.rank(), counts, salt)))
          << axis_name(axis) << ", world rank " << w;
    }
  });
}

// Receive segments with a one-element gap before each and one after the last.
std::vector<std::int64_t> gapped_displs(const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> displs(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) displs[r] = sum(counts, r) + r + 1;
  return displs;
}

TEST(ThreadComm, AllGatherFillsSegmentsAndLeavesTheRestUntouched) {
  sweep([](Grid& grid, const CountPattern& pattern, int p) {
    const int w = grid.world().rank();
    for (bool in_place : {false, true}) {
      for (Axis axis : kAxes) {
        Communicator& comm = on(grid, axis);
        const std::vector<int> group = members(k2x3, w, axis);
        const int salt = 10 * p + static_cast<int>(axis);
        const int me = comm.rank();
        const std::vector<std::int64_t> counts = counts_of(pattern, comm.size());
        const std::vector<std::int64_t> displs = gapped_displs(counts);
        std::vector<float> recv(sum(counts, counts.size()) + counts.size() + 1, kUntouched);
        std::vector<float> want = recv;
        for (int r = 0; r < comm.size(); ++r) {
          for (std::int64_t k = 0; k < counts[r]; ++k)
            want[displs[r] + k] = input(group[r], salt, k);
        }
        std::vector<float> send(counts[me]);
        for (std::int64_t k = 0; k < counts[me]; ++k) send[k] = input(w, salt, k);
        if (in_place) {
          std::copy(send.begin(), send.end(), recv.begin() + displs[me]);
          comm.all_gather(std::span<const float>(recv).subspan(displs[me], counts[me]), recv,
                          counts, displs)
              .wait();
        } else {
          comm.all_gather(send, recv, counts, displs).wait();
        }
        EXPECT_TRUE(bitwise_equal(recv, want))
            << axis_name(axis) << ", world rank " << w << (in_place ? ", in place" : "");
      }
    }
  });
}

// all_to_all counts: rank `from` sends count(from, to) elements to rank `to`.
struct AllToAllPattern {
  const char* name;
  std::int64_t (*count)(int from, int to);
};
const AllToAllPattern kAllToAllPatterns[] = {
    {"mixed", [](int from, int to) -> std::int64_t { return (from + 2 * to) % 3; }},
    {"all zero", [](int, int) -> std::int64_t { return 0; }},
    {"large", [](int from, int to) -> std::int64_t { return 500 + 7 * from + 3 * to; }},
};

// Send segments packed in reverse rank order (so displacements matter).
std::vector<std::int64_t> reverse_packed_displs(const AllToAllPattern& pattern, int from,
                                                int size) {
  std::vector<std::int64_t> displs(size);
  std::int64_t offset = 0;
  for (int r = size - 1; r >= 0; --r) {
    displs[r] = offset;
    offset += pattern.count(from, r);
  }
  return displs;
}

TEST(ThreadComm, AllToAllRoutesEverySegment) {
  for (ReduceMode mode : kModes) {
    for (int p = 0; p < std::ssize(kAllToAllPatterns); ++p) {
      const AllToAllPattern& pattern = kAllToAllPatterns[p];
      SCOPED_TRACE(pattern.name);
      run_on_thread_grid(k2x3, mode, [&](Grid& grid) {
        const int w = grid.world().rank();
        for (Axis axis : kAxes) {
          Communicator& comm = on(grid, axis);
          const std::vector<int> group = members(k2x3, w, axis);
          const int salt = 10 * p + static_cast<int>(axis);
          const int me = comm.rank();
          const int size = comm.size();
          std::vector<std::int64_t> send_counts(size), recv_counts(size);
          for (int r = 0; r < size; ++r) {
            send_counts[r] = pattern.count(me, r);
            recv_counts[r] = pattern.count(r, me);
          }
          const std::vector<std::int64_t> send_displs = reverse_packed_displs(pattern, me, size);
          const std::vector<std::int64_t> recv_displs = gapped_displs(recv_counts);
          std::vector<float> send(sum(send_counts, size));
          for (std::size_t j = 0; j < send.size(); ++j) send[j] = input(w, salt, j);
          std::vector<float> recv(sum(recv_counts, size) + size + 1, kUntouched);
          std::vector<float> want = recv;
          for (int q = 0; q < size; ++q) {
            const std::int64_t from = reverse_packed_displs(pattern, q, size)[me];
            for (std::int64_t k = 0; k < recv_counts[q]; ++k)
              want[recv_displs[q] + k] = input(group[q], salt, from + k);
          }
          comm.all_to_all(send, send_counts, send_displs, recv, recv_counts, recv_displs).wait();
          EXPECT_TRUE(bitwise_equal(recv, want)) << axis_name(axis) << ", world rank " << w;
        }
      });
    }
  }
}

TEST(ThreadComm, AllReduceSumsInRankOrder) {
  for (ReduceMode mode : kModes) {
    run_on_thread_grid(k2x3, mode, [](Grid& grid) {
      const int w = grid.world().rank();
      for (std::int64_t n : {0, 1, 7, 1003}) {
        for (bool in_place : {false, true}) {
          for (Axis axis : kAxes) {
            Communicator& comm = on(grid, axis);
            const std::vector<int> group = members(k2x3, w, axis);
            const int salt = static_cast<int>(n) + static_cast<int>(axis);
            std::vector<float> send(n), recv(n, kUntouched), want(n);
            for (std::int64_t j = 0; j < n; ++j) {
              send[j] = input(w, salt, j);
              want[j] = rank_order_sum(group, salt, j);
            }
            if (in_place) {
              comm.all_reduce(send, send).wait();
              recv = send;
            } else {
              comm.all_reduce(send, recv).wait();
            }
            EXPECT_TRUE(bitwise_equal(recv, want)) << axis_name(axis) << ", world rank " << w
                                                   << ", n " << n << (in_place ? ", in place" : "");
          }
        }
      }
    });
  }
}

// bf16: the inputs rounded to bf16 (a rounding written here: the dropped half above 0x8000 up,
// exactly 0x8000 to even), summed in fp32 in rank order and rounded once; half the fp32 bytes,
// counted under bf16.
std::uint16_t bf16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t keep = u >> 16, rest = u & 0xFFFFu;
  return static_cast<std::uint16_t>(keep + (rest > 0x8000u || (rest == 0x8000u && (keep & 1u))));
}
float widened(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

TEST(ThreadComm, Bf16SumsRoundOnceAndMoveHalfTheBytes) {
  for (ReduceMode mode : kModes) {
    run_on_thread_grid(k2x3, mode, [](Grid& grid) {
      Communicator& comm = grid.world();
      const int w = comm.rank(), P = comm.size();
      const std::int64_t n = 1003;
      std::vector<bf16> send(n), recv(n);
      std::vector<std::uint16_t> want(n);
      for (std::int64_t j = 0; j < n; ++j) {
        send[j] = bf16{bf16_bits(input(w, 9, j))};
        float sum = 0.0f;
        for (int q = 0; q < P; ++q)
          sum = q == 0 ? widened(bf16_bits(input(q, 9, j)))
                       : sum + widened(bf16_bits(input(q, 9, j)));
        want[j] = bf16_bits(sum);
      }
      comm.all_reduce(send, recv).wait();
      const std::vector<std::int64_t> counts = even_split(n, P);
      std::int64_t offset = 0;
      for (int r = 0; r < w; ++r) offset += counts[r];
      std::vector<bf16> shard(counts[w]);
      comm.reduce_scatter(send, shard, counts).wait();
      int wrong = 0;
      for (std::int64_t j = 0; j < n; ++j) wrong += recv[j].bits != want[j];
      for (std::int64_t j = 0; j < counts[w]; ++j) wrong += shard[j].bits != want[offset + j];
      EXPECT_EQ(wrong, 0) << "world rank " << w;
      EXPECT_EQ(comm.bytes(DType::kF32), CommBytes{});
      EXPECT_EQ(comm.bytes(DType::kBF16).reduce_scatter, 2 * (n - counts[w]));
      EXPECT_EQ(comm.bytes(DType::kBF16).all_reduce, 2 * ((n - counts[w]) + (P - 1) * counts[w]));
      std::vector<float> f(n);
      EXPECT_THROW(comm.all_reduce(send, f), Error);
    });
  }
}

TEST(ThreadComm, BarrierWaitsForEveryRankOfItsGroup) {
  std::atomic<int> arrived[6][3] = {};  // [world rank][axis]
  run_on_thread_grid(k2x3, ReduceMode::kNative, [&](Grid& grid) {
    const int w = grid.world().rank();
    for (Axis axis : kAxes) {
      const int a = static_cast<int>(axis);
      if (w % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      arrived[w][a].store(1);
      on(grid, axis).barrier();
      for (int member : members(k2x3, w, axis))
        EXPECT_EQ(arrived[member][a].load(), 1) << axis_name(axis) << ", world rank " << w;
    }
  });
}

TEST(ThreadComm, AllGatherBytesReturnsEveryPayloadEmptyOnesIncluded) {
  // Payload of world rank w: (w * 3) % 4 bytes (world rank 0 and 4: empty), or nothing at all.
  const auto payload = [](int w, bool all_empty) {
    std::vector<std::byte> bytes(all_empty ? 0 : (w * 3) % 4);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(w * 16 + i);
    return bytes;
  };
  run_on_thread_grid(k2x3, ReduceMode::kDeterministic, [&](Grid& grid) {
    const int w = grid.world().rank();
    for (bool all_empty : {false, true}) {
      for (Axis axis : kAxes) {
        std::vector<std::vector<std::byte>> want;
        for (int member : members(k2x3, w, axis)) want.push_back(payload(member, all_empty));
        EXPECT_EQ(on(grid, axis).all_gather_bytes(payload(w, all_empty)), want)
            << axis_name(axis) << ", world rank " << w;
      }
    }
  });
}

TEST(ThreadComm, PostReturnsBeforeOtherRanksPost) {
  std::atomic<bool> posted{false};
  run_on_thread_grid(k2x3, ReduceMode::kDeterministic, [&](Grid& grid) {
    std::vector<float> data(5, 1.0f);
    if (grid.world().rank() == 0) {
      Request request = grid.world().all_reduce(data, data);
      EXPECT_FALSE(request.test());  // nobody else has posted yet
      posted.store(true);
      request.wait();
    } else {
      while (!posted.load()) std::this_thread::yield();
      grid.world().all_reduce(data, data).wait();
    }
    EXPECT_EQ(data, std::vector<float>(5, 6.0f));
  });
}

TEST(ThreadComm, PendingCollectivesMayBeWaitedInAnyOrder) {
  sweep([](Grid& grid, const CountPattern& pattern, int p) {
    const int w = grid.world().rank();
    const int salt = 100 + p;
    // world reduce_scatter, world all_reduce, dp all_gather and tp all_reduce, all posted first.
    const std::vector<std::int64_t> world_counts = counts_of(pattern, 6);
    std::vector<float> rs_send(sum(world_counts, 6)), rs_recv(world_counts[w]);
    for (std::size_t j = 0; j < rs_send.size(); ++j) rs_send[j] = input(w, salt, j);
    std::vector<float> ar_world(9);
    for (std::size_t j = 0; j < ar_world.size(); ++j) ar_world[j] = input(w, salt + 1, j);
    const std::vector<std::int64_t> dp_counts = counts_of(pattern, 2);
    const std::vector<std::int64_t> dp_displs = gapped_displs(dp_counts);
    std::vector<float> ag_send(dp_counts[grid.dp().rank()]);
    for (std::size_t k = 0; k < ag_send.size(); ++k) ag_send[k] = input(w, salt + 2, k);
    std::vector<float> ag_recv(sum(dp_counts, 2) + 3, kUntouched);
    std::vector<float> ar_tp(4);
    for (std::size_t j = 0; j < ar_tp.size(); ++j) ar_tp[j] = input(w, salt + 3, j);

    std::vector<Request> requests;
    requests.push_back(grid.world().reduce_scatter(rs_send, rs_recv, world_counts));
    requests.push_back(grid.world().all_reduce(ar_world, ar_world));
    requests.push_back(grid.dp().all_gather(ag_send, ag_recv, dp_counts, dp_displs));
    requests.push_back(grid.tp().all_reduce(ar_tp, ar_tp));
    // A barrier completes only once every rank posted it, hence everything posted before it.
    grid.world().barrier();
    for (Request& request : requests) EXPECT_TRUE(request.test());
    // Each rank waits in its own order: rotated by its world rank, reversed on odd ranks.
    std::rotate(requests.begin(), requests.begin() + w % 4, requests.end());
    if (w % 2) std::reverse(requests.begin(), requests.end());
    for (Request& request : requests) request.wait();

    EXPECT_TRUE(bitwise_equal(
        rs_recv, expected_reduce_scatter(members(k2x3, w, Axis::kWorld), w, world_counts, salt)));
    std::vector<float> want(9);
    for (std::size_t j = 0; j < want.size(); ++j)
      want[j] = rank_order_sum(members(k2x3, w, Axis::kWorld), salt + 1, j);
    EXPECT_TRUE(bitwise_equal(ar_world, want));
    const std::vector<int> dp_group = members(k2x3, w, Axis::kDp);
    want.assign(ag_recv.size(), kUntouched);
    for (int r = 0; r < 2; ++r) {
      for (std::int64_t k = 0; k < dp_counts[r]; ++k)
        want[dp_displs[r] + k] = input(dp_group[r], salt + 2, k);
    }
    EXPECT_TRUE(bitwise_equal(ag_recv, want));
    want.resize(4);
    for (std::size_t j = 0; j < want.size(); ++j)
      want[j] = rank_order_sum(members(k2x3, w, Axis::kTp), salt + 3, j);
    EXPECT_TRUE(bitwise_equal(ar_tp, want));
  });
}

// Hand-computed from communicator.h for the world communicator of the 2 x 3 grid (P = 6):
//   reduce_scatter counts {2, 3, 0, 1, 2, 3} (sum 11): 4 * (11 - counts[me])
//   all_gather counts {2, 3, 0, 1, 2, 3}: 4 * 5 * counts[me]; plus all_gather_bytes of me + 1
//     bytes: 5 * (me + 1)
//   all_to_all send_counts[r] = me + r: 4 * (sum over r != me of (me + r)) = 4 * (4 me + 15)
//   all_reduce n = 10, even_split {2, 2, 2, 2, 1, 1}: 4 * ((10 - c) + 5 c)
// barrier and all_gather_u64 count nothing; the DP and TP communicators stay at zero.
TEST(ThreadComm, ByteCountersMatchHandComputedValues) {
  const std::int64_t kReduceScatter[6] = {36, 32, 44, 40, 36, 32};
  const std::int64_t kAllGather[6] = {40 + 5, 60 + 10, 0 + 15, 20 + 20, 40 + 25, 60 + 30};
  const std::int64_t kAllToAll[6] = {60, 76, 92, 108, 124, 140};
  const std::int64_t kAllReduce[6] = {72, 72, 72, 72, 56, 56};
  for (ReduceMode mode : kModes) {
    std::atomic<std::int64_t> all_reduce_total{0};
    run_on_thread_grid(k2x3, mode, [&](Grid& grid) {
      Communicator& world = grid.world();
      const int me = world.rank();
      const std::vector<std::int64_t> counts = {2, 3, 0, 1, 2, 3};
      std::vector<float> full(11), shard(counts[me]), gathered(11);
      std::vector<std::int64_t> displs(6);
      for (int r = 1; r < 6; ++r) displs[r] = displs[r - 1] + counts[r - 1];
      std::vector<std::int64_t> send_counts(6), send_displs(6), recv_counts(6), recv_displs(6);
      for (int r = 0; r < 6; ++r) {
        send_counts[r] = me + r;
        recv_counts[r] = r + me;
        if (r > 0) send_displs[r] = send_displs[r - 1] + send_counts[r - 1];
        if (r > 0) recv_displs[r] = recv_displs[r - 1] + recv_counts[r - 1];
      }
      std::vector<float> a2a_send(sum(send_counts, 6)), a2a_recv(sum(recv_counts, 6));
      std::vector<float> reduced(10);

      world.barrier();
      world.all_gather_u64(7);
      EXPECT_EQ(world.bytes(), comm::CommBytes{});
      Request rs = world.reduce_scatter(full, shard, counts);
      Request ag = world.all_gather(shard, gathered, counts, displs);
      Request a2a =
          world.all_to_all(a2a_send, send_counts, send_displs, a2a_recv, recv_counts, recv_displs);
      Request ar = world.all_reduce(reduced, reduced);
      world.all_gather_bytes(std::vector<std::byte>(me + 1));
      for (Request* r : {&ar, &a2a, &ag, &rs}) r->wait();

      comm::CommBytes want;
      want.reduce_scatter = kReduceScatter[me];
      want.all_gather = kAllGather[me];
      want.all_to_all = kAllToAll[me];
      want.all_reduce = kAllReduce[me];
      EXPECT_EQ(world.bytes(), want) << "world rank " << me;
      EXPECT_EQ(grid.dp().bytes(), comm::CommBytes{});
      EXPECT_EQ(grid.tp().bytes(), comm::CommBytes{});
      all_reduce_total += world.bytes().all_reduce;
    });
    EXPECT_EQ(all_reduce_total.load(), 4 * 2 * (6 - 1) * 10);  // 2 (P - 1) n elements in all
  }
}

}  // namespace
}  // namespace canzona::comm
