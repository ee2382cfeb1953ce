// The last steps of TP host placement (stage_groups.h).
#include "algorithms/stage_groups.h"

#include <algorithm>
#include <numeric>

namespace canzona::plan::detail {

std::vector<double> relabel_hosts(std::vector<TpGroup>& groups, const std::vector<TpTask>& tasks,
                                  const std::vector<double>& tp_total) {
  const int tp = static_cast<int>(tp_total.size());
  std::vector<double> host_load(tp, 0.0);
  for (const TpGroup& group : groups)
    for (std::size_t k = 0; k < group.tasks.size(); ++k)
      host_load[group.hosts[k]] += tasks[group.tasks[k]].cost;
  std::vector<int> by_load(tp), by_total(tp), label(tp);
  std::iota(by_load.begin(), by_load.end(), 0);
  std::iota(by_total.begin(), by_total.end(), 0);
  std::stable_sort(by_load.begin(), by_load.end(),
                   [&](int a, int b) { return host_load[a] > host_load[b]; });
  std::stable_sort(by_total.begin(), by_total.end(),
                   [&](int a, int b) { return tp_total[a] < tp_total[b]; });
  for (int k = 0; k < tp; ++k) label[by_load[k]] = by_total[k];
  for (TpGroup& group : groups)
    for (int& h : group.hosts) h = label[h];
  std::vector<double> load(tp, 0.0);
  for (int h = 0; h < tp; ++h) load[label[h]] = host_load[h];
  return load;
}

void assign_groups(StagePlan& stage, int d, const std::vector<int>& ids,
                   const std::vector<TpGroup>& groups) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    MicroGroup group;
    group.makespan = groups[g].makespan;
    group.max_host_bytes = groups[g].max_host_bytes;
    for (std::size_t k = 0; k < groups[g].tasks.size(); ++k) {
      Task& t = stage.tasks[ids[groups[g].tasks[k]]];
      t.host = groups[g].hosts[k];
      t.group = static_cast<int>(g);
      group.tasks.push_back(ids[groups[g].tasks[k]]);
    }
    stage.groups[d].push_back(std::move(group));
  }
}

}  // namespace canzona::plan::detail
