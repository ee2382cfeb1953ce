// TP planners (src/plan/algorithms/tp.h): paper Algorithm 2 (greedy rollback with the MinHeap
// LPT solver), the asc round-robin baseline, and our carried-load variant.
//
// All three run in O(n log n + n log hosts) for n tasks, independent of how many groups they
// form. Two facts make that possible without changing any result:
//   * LPT is prefix-stable: the tasks are visited in one strict total order (cost desc, index
//     asc), so re-solving "the group so far plus the next task" from zero loads assigns the old
//     tasks exactly as before and the new task to the current least-loaded host. Algorithm 2's
//     rollback therefore only needs the candidate host of the new task (HostHeap), not a re-solve.
//   * In first fit, the groups a host has used form a prefix of the groups (a host always fits
//     an empty group), so each host keeps its own first-fit tree over its groups (FirstFit).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include "algorithms/tp.h"
#include "algorithms/tp_summary.h"
#include "canzona/common/error.h"

namespace canzona::plan {
namespace {

// (cost desc, index asc).
std::vector<int> lpt_order(const std::vector<TpTask>& tasks, std::vector<int> which) {
  std::stable_sort(which.begin(), which.end(), [&](int a, int b) {
    if (tasks[a].cost != tasks[b].cost) return tasks[a].cost > tasks[b].cost;
    return a < b;
  });
  return which;
}

// The order above is a strict total order only for comparable costs, and the planners assume
// non-negative bytes (so sums stay within the largest input).
void check_tasks(const std::vector<TpTask>& tasks) {
  for (const TpTask& t : tasks) {
    CANZONA_CHECK(!std::isnan(t.cost), "TP task cost is NaN");
    CANZONA_CHECK(t.bytes >= 0, "TP task bytes ", t.bytes, " is negative");
  }
}

// The LPT min-heap of one group, started from zero loads: the host with the least (load, index).
// Hosts never used have load 0 and form the suffix [used_, hosts), so only used hosts are stored
// and a reset costs nothing per host.
class HostHeap {
 public:
  explicit HostHeap(int hosts) : hosts_(hosts) {}
  int least() const {
    if (used_ < hosts_ && (heap_.empty() || Entry{0.0, used_} < heap_.top())) return used_;
    return heap_.top().second;
  }
  // Adds `cost` to least(); returns that host.
  int add(double cost) {
    if (used_ < hosts_ && (heap_.empty() || Entry{0.0, used_} < heap_.top())) {
      heap_.emplace(0.0 + cost, used_);
      return used_++;
    }
    auto [load, h] = heap_.top();
    heap_.pop();
    heap_.emplace(load + cost, h);
    return h;
  }
  int used() const { return used_; }
  void reset() {
    heap_ = {};
    used_ = 0;
  }

 private:
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  int hosts_;
  int used_ = 0;
};

// First fit over one host's groups 0..size()-1: the first whose room is at least `bytes`. Room
// is capacity minus the host's bytes there, or unlimited while the host has 0 bytes there.
// A max segment tree over the rooms, doubled as groups are added.
class FirstFit {
 public:
  std::size_t size() const { return size_; }
  // The first group with room >= bytes (bytes >= 0), or size() when none.
  std::size_t find(std::int64_t bytes) const {
    if (size_ == 0 || tree_[1] < bytes) return size_;
    std::size_t i = 1;
    while (i < leaves_) i = tree_[2 * i] >= bytes ? 2 * i : 2 * i + 1;
    return i - leaves_;
  }
  void push_back(std::int64_t room) {
    if (size_ == leaves_) {
      const std::size_t leaves = std::max<std::size_t>(1, 2 * leaves_);
      std::vector<std::int64_t> tree(2 * leaves, kNone);
      std::copy(tree_.begin() + leaves_, tree_.begin() + leaves_ + size_, tree.begin() + leaves);
      tree_ = std::move(tree);
      leaves_ = leaves;
      for (std::size_t i = leaves_ - 1; i > 0; --i)
        tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
    }
    set(size_++, room);
  }
  void set(std::size_t group, std::int64_t room) {
    std::size_t i = leaves_ + group;
    tree_[i] = room;
    for (i /= 2; i > 0; i /= 2) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }

 private:
  static constexpr std::int64_t kNone = -1;  // a leaf past size(): fits nothing
  std::vector<std::int64_t> tree_;           // [2 leaves_] max of room; tree_[1] is the root
  std::size_t leaves_ = 0;
  std::size_t size_ = 0;
};

}  // namespace

std::vector<int> lpt_hosts(const std::vector<TpTask>& tasks, const std::vector<int>& which,
                           std::vector<double> initial_loads) {
  CANZONA_CHECK(!initial_loads.empty());
  check_tasks(tasks);
  using Entry = std::pair<double, int>;  // (load, host): min-heap, lowest host on ties
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int h = 0; h < static_cast<int>(initial_loads.size()); ++h)
    heap.emplace(initial_loads[h], h);
  std::vector<int> host_of(tasks.size(), -1);
  for (int t : lpt_order(tasks, which)) {
    auto [load, h] = heap.top();
    heap.pop();
    host_of[t] = h;
    heap.emplace(load + tasks[t].cost, h);
  }
  std::vector<int> hosts;
  hosts.reserve(which.size());
  for (int t : which) hosts.push_back(host_of[t]);
  return hosts;
}

std::vector<TpGroup> rollback_groups(const std::vector<TpTask>& tasks, int hosts,
                                     std::int64_t capacity_bytes) {
  CANZONA_CHECK(hosts > 0 && capacity_bytes > 0);
  check_tasks(tasks);
  std::vector<int> all(tasks.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<TpGroup> groups;
  detail::Summariser summarise(hosts);
  HostHeap heap(hosts);
  std::vector<std::int64_t> bytes(hosts, 0);  // [host] bytes in the current group
  std::int64_t current_max = 0;               // max over hosts of `bytes`
  TpGroup current;
  auto close = [&] {
    summarise(tasks, current);
    groups.push_back(std::move(current));
    current = TpGroup{};
    std::fill(bytes.begin(), bytes.begin() + heap.used(), 0);
    current_max = 0;
    heap.reset();
  };
  for (int t : lpt_order(tasks, all)) {
    // The candidate group (current + t) re-solved from zero loads keeps the current hosts and
    // puts t on the least-loaded host h; it fits when no host's bytes exceed the capacity.
    const int h = heap.least();
    const bool fits = current_max <= capacity_bytes && tasks[t].bytes <= capacity_bytes - bytes[h];
    if (!current.tasks.empty() && !fits) close();
    const int host = heap.add(tasks[t].cost);
    bytes[host] += tasks[t].bytes;  // <= capacity, or the group's only task
    current_max = std::max(current_max, bytes[host]);
    current.tasks.push_back(t);
    current.hosts.push_back(host);
  }
  if (!current.tasks.empty()) close();
  return groups;
}

std::vector<TpGroup> round_robin_groups(const std::vector<TpTask>& tasks, int hosts,
                                        int group_tasks) {
  CANZONA_CHECK(hosts > 0 && group_tasks > 0);
  check_tasks(tasks);
  std::vector<TpGroup> groups;
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    if (k % group_tasks == 0) groups.emplace_back();
    groups.back().tasks.push_back(static_cast<int>(k));
    groups.back().hosts.push_back(static_cast<int>(k % hosts));
  }
  detail::Summariser summarise(hosts);
  for (auto& group : groups) summarise(tasks, group);
  return groups;
}

std::vector<TpGroup> balanced_groups(const std::vector<TpTask>& tasks, int hosts,
                                     std::int64_t capacity_bytes) {
  CANZONA_CHECK(hosts > 0 && capacity_bytes > 0);
  check_tasks(tasks);
  std::vector<int> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  order = lpt_order(tasks, order);
  const std::vector<int> host_in_order = lpt_hosts(tasks, order, std::vector<double>(hosts, 0.0));
  std::vector<TpGroup> groups;
  std::vector<FirstFit> fit(hosts);                    // [host] room per group it has used
  std::vector<std::vector<std::int64_t>> used(hosts);  // [host][group] its bytes there
  constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int t = order[k];
    const int h = host_in_order[k];
    const std::int64_t b = tasks[t].bytes;
    // First fit: the earliest group where this host stays within capacity, or is still empty
    // (a task over capacity then has its host to itself in that group; other hosts still fill).
    const std::size_t g = fit[h].find(b);
    if (g == fit[h].size()) {
      fit[h].push_back(kUnlimited);
      used[h].push_back(0);
    }
    if (g == groups.size()) groups.emplace_back();
    groups[g].tasks.push_back(t);
    groups[g].hosts.push_back(h);
    used[h][g] += b;  // fits: the room was >= b, or unlimited (then b alone)
    fit[h].set(g, used[h][g] > 0 ? capacity_bytes - used[h][g] : kUnlimited);
  }
  detail::Summariser summarise(hosts);
  for (auto& group : groups) summarise(tasks, group);
  return groups;
}

}  // namespace canzona::plan
