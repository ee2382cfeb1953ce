#include "canzona/plan/shard_map.h"

#include <algorithm>
#include <utility>

#include "canzona/common/error.h"

namespace canzona::plan {

std::int64_t ShardMap::numel() const {
  std::int64_t n = 0;
  for (const RowRun& run : runs) n += run.rows * width;
  return n;
}

ShardMap shard_map(const model::ParamSpec& param, int piece, int tp, int tp_rank) {
  CANZONA_REQUIRE(piece >= -1 && piece < static_cast<int>(param.pieces.size()), "param '",
                  param.name, "': piece ", piece, " out of range");
  CANZONA_CHECK(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "tp rank ", tp_rank, " of ", tp);
  const std::int64_t rows = param.rows();
  const std::int64_t cols = param.cols();
  const int split = tp == 1 ? -1 : param.tp_split_dim;
  CANZONA_REQUIRE(split < 0 || (split == 0 ? rows : cols) % tp == 0, "param '", param.name,
                  "': split dim not divisible by tp=", tp);
  ShardMap map;
  map.task_cols = cols;
  map.local_cols = split == 1 ? cols / tp : cols;
  map.width = map.local_cols;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  if (piece < 0)
    ranges.emplace_back(0, rows);
  else
    ranges = param.pieces[piece].row_ranges;
  const std::int64_t local_rows = split == 0 ? rows / tp : rows;
  for (const auto& [begin, end] : ranges) {
    if (split == 0) {
      const std::int64_t lo = std::max(begin, tp_rank * local_rows);
      const std::int64_t hi = std::min(end, (tp_rank + 1) * local_rows);
      if (lo < hi)
        map.runs.push_back({lo - tp_rank * local_rows, map.task_rows + (lo - begin), hi - lo, 0});
    } else {
      map.runs.push_back({begin, map.task_rows, end - begin, split == 1 ? tp_rank * map.width : 0});
    }
    map.task_rows += end - begin;
  }
  return map;
}

}  // namespace canzona::plan
