// The TP planners (src/plan/algorithms/tp_planners.cpp) against plain reference implementations
// written here as the paper and docs/design.md state them, without the incremental shortcuts:
// Algorithm 2 re-solves the whole candidate group with LPT from zero loads for every added task,
// and first fit scans the groups from the first for every task. Random inputs with fixed seeds,
// including ties in cost, zero bytes, tasks over capacity and more hosts than tasks; the results
// must be identical (tasks, hosts, makespan bit for bit, bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <queue>
#include <random>

#include "algorithms/tp.h"

namespace canzona::plan {
namespace {

std::vector<int> ref_lpt_order(const std::vector<TpTask>& tasks, std::vector<int> which) {
  std::vector<int> out;
  while (!which.empty()) {  // selection: the largest cost, lowest index first
    std::size_t best = 0;
    for (std::size_t k = 1; k < which.size(); ++k) {
      const TpTask& a = tasks[which[k]];
      const TpTask& b = tasks[which[best]];
      if (a.cost > b.cost || (a.cost == b.cost && which[k] < which[best])) best = k;
    }
    out.push_back(which[best]);
    which.erase(which.begin() + static_cast<std::ptrdiff_t>(best));
  }
  return out;
}

// LPT from zero loads by linear scans: each task, in order, to the least-loaded host (lowest
// index on ties).
std::vector<int> ref_lpt(const std::vector<TpTask>& tasks, const std::vector<int>& ordered,
                         int hosts) {
  std::vector<double> load(hosts, 0.0);
  std::vector<int> out;
  for (int t : ordered) {
    int h = 0;
    for (int q = 1; q < hosts; ++q)
      if (load[q] < load[h]) h = q;
    out.push_back(h);
    load[h] += tasks[t].cost;
  }
  return out;
}

void ref_summarise(const std::vector<TpTask>& tasks, int hosts, TpGroup& g) {
  std::vector<double> load(hosts, 0.0);
  std::vector<std::int64_t> bytes(hosts, 0);
  for (std::size_t k = 0; k < g.tasks.size(); ++k) {
    load[g.hosts[k]] += tasks[g.tasks[k]].cost;
    bytes[g.hosts[k]] += tasks[g.tasks[k]].bytes;
  }
  g.makespan = *std::max_element(load.begin(), load.end());
  g.max_host_bytes = *std::max_element(bytes.begin(), bytes.end());
}

std::vector<TpGroup> ref_rollback(const std::vector<TpTask>& tasks, int hosts,
                                  std::int64_t capacity) {
  std::vector<int> all(tasks.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<TpGroup> groups;
  TpGroup current;
  for (int t : ref_lpt_order(tasks, all)) {
    TpGroup candidate;
    candidate.tasks = current.tasks;
    candidate.tasks.push_back(t);
    candidate.tasks = ref_lpt_order(tasks, candidate.tasks);
    candidate.hosts = ref_lpt(tasks, candidate.tasks, hosts);
    ref_summarise(tasks, hosts, candidate);
    if (current.tasks.empty() || candidate.max_host_bytes <= capacity) {
      current = candidate;
      continue;
    }
    groups.push_back(current);
    current = TpGroup{};
    current.tasks = {t};
    current.hosts = {0};
    ref_summarise(tasks, hosts, current);
  }
  if (!current.tasks.empty()) groups.push_back(current);
  return groups;
}

std::vector<TpGroup> ref_balanced(const std::vector<TpTask>& tasks, int hosts,
                                  std::int64_t capacity) {
  std::vector<int> all(tasks.size());
  std::iota(all.begin(), all.end(), 0);
  const std::vector<int> order = ref_lpt_order(tasks, all);
  const std::vector<int> host = ref_lpt(tasks, order, hosts);
  std::vector<TpGroup> groups;
  std::vector<std::vector<std::int64_t>> bytes;  // [group][host]
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int t = order[k], h = host[k];
    std::size_t g = 0;
    while (g < groups.size() && bytes[g][h] > 0 && bytes[g][h] + tasks[t].bytes > capacity) ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      bytes.emplace_back(hosts, 0);
    }
    groups[g].tasks.push_back(t);
    groups[g].hosts.push_back(h);
    bytes[g][h] += tasks[t].bytes;
  }
  for (auto& g : groups) ref_summarise(tasks, hosts, g);
  return groups;
}

void expect_same(const std::vector<TpGroup>& got, const std::vector<TpGroup>& want,
                 const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (std::size_t g = 0; g < got.size(); ++g) {
    EXPECT_EQ(got[g].tasks, want[g].tasks) << where << " group " << g;
    EXPECT_EQ(got[g].hosts, want[g].hosts) << where << " group " << g;
    EXPECT_EQ(got[g].makespan, want[g].makespan) << where << " group " << g;  // bit for bit
    EXPECT_EQ(got[g].max_host_bytes, want[g].max_host_bytes) << where << " group " << g;
  }
}

struct Case {
  int tasks, hosts;
  std::int64_t capacity;
};

// Costs from a few values (many ties) or continuous; bytes 0 to 3x capacity (some alone over
// capacity), with per-head-like runs of equal tasks.
std::vector<TpTask> random_tasks(std::mt19937_64& rng, int n, std::int64_t capacity) {
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int> small(0, 4);
  std::uniform_real_distribution<double> real(0.0, 10.0);
  std::uniform_int_distribution<std::int64_t> bytes(0, 3 * capacity);
  std::vector<TpTask> tasks;
  while (static_cast<int>(tasks.size()) < n) {
    const int k = kind(rng);
    const TpTask t{k == 0 ? real(rng) : static_cast<double>(small(rng)),
                   k == 1 ? 0 : (k == 2 ? bytes(rng) / 8 : bytes(rng))};
    const int run = k == 3 ? 1 + small(rng) * 3 : 1;  // equal pieces, like per-head tasks
    for (int r = 0; r < run && static_cast<int>(tasks.size()) < n; ++r) tasks.push_back(t);
  }
  return tasks;
}

TEST(TpReference, OptimisedPlannersMatchThePlainLoops) {
  const std::vector<Case> cases{{0, 1, 10},  {1, 1, 10},      {5, 8, 10},
                                {40, 2, 50}, {60, 3, 100},    {200, 8, 1000},
                                {300, 1, 7}, {257, 16, 5000}, {150, 64, 1}};
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    for (const Case& c : cases) {
      std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(c.tasks));
      const std::vector<TpTask> tasks = random_tasks(rng, c.tasks, c.capacity);
      const std::string where = "seed " + std::to_string(seed) + " n " + std::to_string(c.tasks) +
                                " hosts " + std::to_string(c.hosts);
      expect_same(rollback_groups(tasks, c.hosts, c.capacity),
                  ref_rollback(tasks, c.hosts, c.capacity), "rollback " + where);
      expect_same(balanced_groups(tasks, c.hosts, c.capacity),
                  ref_balanced(tasks, c.hosts, c.capacity), "balanced " + where);
    }
  }
}

TEST(TpReference, RollbackGroupsNeverExceedCapacityUnlessAlone) {
  std::mt19937_64 rng(99);
  const std::vector<TpTask> tasks = random_tasks(rng, 500, 64);
  for (const auto* name : {"rollback", "balanced"}) {
    const auto groups = std::string(name) == "rollback" ? rollback_groups(tasks, 4, 64)
                                                        : balanced_groups(tasks, 4, 64);
    std::vector<int> seen(tasks.size(), 0);
    for (const TpGroup& g : groups) {
      std::vector<std::int64_t> bytes(4, 0);
      std::vector<int> count(4, 0);
      for (std::size_t k = 0; k < g.tasks.size(); ++k) {
        ++seen[g.tasks[k]];
        bytes[g.hosts[k]] += tasks[g.tasks[k]].bytes;
        ++count[g.hosts[k]];
      }
      for (int h = 0; h < 4; ++h)
        EXPECT_TRUE(bytes[h] <= 64 || count[h] == 1) << name << " host " << h;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(tasks.size())) << name;
  }
}

// Bytes near the int64 limit: a host's bytes in a group are never formed by an overflowing sum,
// so two tasks over capacity never share a host's slot in a group.
TEST(TpReference, HugeBytesDoNotWrapIntoFitting) {
  const std::int64_t big = std::int64_t{1} << 62;
  const std::vector<TpTask> tasks{{3, big}, {2, big}, {1, big}};
  for (const auto& groups :
       {rollback_groups(tasks, 1, 1 << 20), balanced_groups(tasks, 1, 1 << 20)}) {
    ASSERT_EQ(groups.size(), 3u);
    for (const TpGroup& g : groups) EXPECT_EQ(g.max_host_bytes, big);
  }
}

}  // namespace
}  // namespace canzona::plan
