// TP planners (include/canzona/plan/tp.h): paper Algorithm 2 (greedy rollback with the MinHeap
// LPT solver), the asc round-robin baseline, and our carried-load variant.
#include <algorithm>
#include <numeric>
#include <queue>

#include "canzona/common/error.h"
#include "canzona/plan/tp.h"

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

// Fills makespan and max_host_bytes of a group from its tasks and hosts.
void summarise(const std::vector<TpTask>& tasks, int hosts, TpGroup& group) {
  std::vector<double> load(hosts, 0.0);
  std::vector<std::int64_t> bytes(hosts, 0);
  for (std::size_t k = 0; k < group.tasks.size(); ++k) {
    load[group.hosts[k]] += tasks[group.tasks[k]].cost;
    bytes[group.hosts[k]] += tasks[group.tasks[k]].bytes;
  }
  group.makespan = *std::max_element(load.begin(), load.end());
  group.max_host_bytes = *std::max_element(bytes.begin(), bytes.end());
}

}  // namespace

std::vector<int> lpt_hosts(const std::vector<TpTask>& tasks, const std::vector<int>& which,
                           std::vector<double> initial_loads) {
  CANZONA_CHECK(!initial_loads.empty());
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
  std::vector<int> all(tasks.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<TpGroup> groups;
  TpGroup current;
  for (int t : lpt_order(tasks, all)) {
    TpGroup candidate;
    candidate.tasks = current.tasks;
    candidate.tasks.push_back(t);
    candidate.tasks = lpt_order(tasks, candidate.tasks);
    candidate.hosts = lpt_hosts(tasks, candidate.tasks, std::vector<double>(hosts, 0.0));
    summarise(tasks, hosts, candidate);
    if (current.tasks.empty() || candidate.max_host_bytes <= capacity_bytes) {
      current = std::move(candidate);
      continue;
    }
    groups.push_back(std::move(current));
    current = TpGroup{};
    current.tasks = {t};
    current.hosts = {0};
    summarise(tasks, hosts, current);
  }
  if (!current.tasks.empty()) groups.push_back(std::move(current));
  return groups;
}

std::vector<TpGroup> round_robin_groups(const std::vector<TpTask>& tasks, int hosts,
                                        int group_tasks) {
  CANZONA_CHECK(hosts > 0 && group_tasks > 0);
  std::vector<TpGroup> groups;
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    if (k % group_tasks == 0) groups.emplace_back();
    groups.back().tasks.push_back(static_cast<int>(k));
    groups.back().hosts.push_back(static_cast<int>(k % hosts));
  }
  for (auto& group : groups) summarise(tasks, hosts, group);
  return groups;
}

std::vector<TpGroup> balanced_groups(const std::vector<TpTask>& tasks, int hosts,
                                     std::int64_t capacity_bytes) {
  CANZONA_CHECK(hosts > 0 && capacity_bytes > 0);
  std::vector<int> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  order = lpt_order(tasks, order);
  const std::vector<int> host_in_order = lpt_hosts(tasks, order, std::vector<double>(hosts, 0.0));
  std::vector<TpGroup> groups;
  std::vector<std::vector<std::int64_t>> bytes;  // [group][host]
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int t = order[k];
    const int h = host_in_order[k];
    // First fit: the earliest group where this host stays within capacity, or is still empty
    // (a task over capacity then has its host to itself in that group; other hosts still fill).
    std::size_t g = 0;
    while (g < groups.size() && bytes[g][h] > 0 && bytes[g][h] + tasks[t].bytes > capacity_bytes)
      ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      bytes.emplace_back(hosts, 0);
    }
    groups[g].tasks.push_back(t);
    groups[g].hosts.push_back(h);
    bytes[g][h] += tasks[t].bytes;
  }
  for (auto& group : groups) summarise(tasks, hosts, group);
  return groups;
}

}  // namespace canzona::plan
