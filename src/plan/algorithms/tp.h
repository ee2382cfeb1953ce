// TP planners: which TP rank hosts each matrix task and how tasks are packed into micro groups
// (docs/design.md section 3, paper Algorithm 2).
//
// Terms. A *task* has a cost (planner unit) and gather bytes (the fp32 gradient bytes its host
// receives in the fused All-to-All). A micro group's *capacity* C_max bounds, per host, the bytes
// received in that group's All-to-All; capacity is never compared with cost. A task whose bytes
// alone exceed C_max forms its own group.
#pragma once

#include <cstdint>
#include <vector>

namespace canzona::plan {

struct TpTask {
  double cost = 0.0;
  std::int64_t bytes = 0;
};

struct TpGroup {
  std::vector<int> tasks;  // indices into the input, execution order
  std::vector<int> hosts;  // host of each task, parallel to `tasks`
  double makespan = 0.0;   // max over hosts of summed cost in this group
  std::int64_t max_host_bytes = 0;
};

// MinHeap LPT solver: tasks sorted by (cost desc, index asc), each to the least-loaded host
// (lowest index on ties) starting from `initial_loads` (size = hosts). Returns the host of each
// task in the order given.
std::vector<int> lpt_hosts(const std::vector<TpTask>& tasks, const std::vector<int>& which,
                           std::vector<double> initial_loads);

// Paper Algorithm 2 (greedy rollback): sort by (cost desc, index asc); tentatively add the next
// task to the candidate group and re-solve it with LPT from zero loads; accept when every host's
// bytes stay <= capacity_bytes, else close the group and start a new one with this task.
// Computed incrementally (LPT is prefix-stable in that order), O(n log n); the result is the
// re-solving definition's, task for task.
std::vector<TpGroup> rollback_groups(const std::vector<TpTask>& tasks, int hosts,
                                     std::int64_t capacity_bytes);

// asc: tasks in the given order, host = k mod hosts, groups of `group_tasks` consecutive tasks
// (fixed count, capacity ignored: the unbalanced baseline).
std::vector<TpGroup> round_robin_groups(const std::vector<TpTask>& tasks, int hosts,
                                        int group_tasks);

// Our TP planner: hosts by LPT over *all* tasks with loads carried across groups (so per-host
// totals, the pipelined critical path, are balanced), then each task, in LPT order, goes to the
// first group where its host's bytes stay <= capacity_bytes or its host has nothing yet. A task
// over capacity thus has its host to itself in its group while the other hosts keep working
// (the paper's rule leaves them idle for that group). O(n log n) (a first-fit tree per host).
//
// All three need costs that are not NaN and bytes >= 0 (internal check); a host's bytes in a
// group that overflow int64 (possible only in round_robin_groups) are a UsageError.
std::vector<TpGroup> balanced_groups(const std::vector<TpTask>& tasks, int hosts,
                                     std::int64_t capacity_bytes);

}  // namespace canzona::plan
