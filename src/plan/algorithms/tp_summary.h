// Internal to the plan layer: the per-group summary (makespan, max_host_bytes) shared by the TP
// planners in tp_planners.cpp and the Megatron-Canzona reproduction in megatron_canzona.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "algorithms/tp.h"
#include "canzona/common/checked.h"

namespace canzona::plan::detail {

// Fills makespan and max_host_bytes of groups from their tasks and hosts in O(group size),
// summing each host's cost in task order. Throws UsageError when a host's bytes overflow int64.
class Summariser {
 public:
  explicit Summariser(int hosts) : load_(hosts, 0.0), bytes_(hosts, 0), seen_(hosts, 0) {}
  void operator()(const std::vector<TpTask>& tasks, TpGroup& group) {
    std::vector<int> touched;
    for (std::size_t k = 0; k < group.tasks.size(); ++k) {
      const int h = group.hosts[k];
      if (!seen_[h]) touched.push_back(h);
      seen_[h] = 1;
      load_[h] += tasks[group.tasks[k]].cost;
      bytes_[h] = checked_add(bytes_[h], tasks[group.tasks[k]].bytes, "TP micro group bytes");
    }
    // Hosts without a task count with load 0 and bytes 0.
    const bool all = touched.size() == load_.size();
    group.makespan = all ? -std::numeric_limits<double>::infinity() : 0.0;
    group.max_host_bytes = 0;
    for (int h : touched) {
      group.makespan = std::max(group.makespan, load_[h]);
      group.max_host_bytes = std::max(group.max_host_bytes, bytes_[h]);
      load_[h] = 0.0;
      bytes_[h] = 0;
      seen_[h] = 0;
    }
  }

 private:
  std::vector<double> load_;
  std::vector<std::int64_t> bytes_;
  std::vector<char> seen_;
};

}  // namespace canzona::plan::detail
