#include "canzona/engine/shard.h"

#include <algorithm>
#include <cstring>

#include "canzona/common/error.h"

namespace canzona::engine {
namespace {

// The three layouts a run's rows can be read from or written to: the local shard (local_cols
// floats per row), the task matrix (task_cols per row, starting at task_col) and the packed form
// (width per row, runs back to back).
enum class Side { kLocal, kTask, kPacked };

void copy_runs(const ShardMap& map, Side from, const float* src, Side to, float* dst) {
  std::int64_t packed_row = 0;
  auto place = [&](Side side, const RowRun& run, std::int64_t& cols, std::int64_t& offset) {
    switch (side) {
      case Side::kLocal:
        cols = map.local_cols;
        offset = run.local_row * map.local_cols;
        break;
      case Side::kTask:
        cols = map.task_cols;
        offset = run.task_row * map.task_cols + run.task_col;
        break;
      case Side::kPacked:
        cols = map.width;
        offset = packed_row * map.width;
        break;
    }
  };
  for (const RowRun& run : map.runs) {
    std::int64_t src_cols = 0, src_offset = 0, dst_cols = 0, dst_offset = 0;
    place(from, run, src_cols, src_offset);
    place(to, run, dst_cols, dst_offset);
    if (src_cols == map.width && dst_cols == map.width) {
      std::memcpy(dst + dst_offset, src + src_offset,
                  static_cast<std::size_t>(run.rows * map.width) * sizeof(float));
    } else {
      for (std::int64_t r = 0; r < run.rows; ++r)
        std::memcpy(dst + dst_offset + r * dst_cols, src + src_offset + r * src_cols,
                    static_cast<std::size_t>(map.width) * sizeof(float));
    }
    packed_row += run.rows;
  }
}

}  // namespace

void local_to_task(const ShardMap& m, const float* local, float* task) {
  copy_runs(m, Side::kLocal, local, Side::kTask, task);
}
void task_to_local(const ShardMap& m, const float* task, float* local) {
  copy_runs(m, Side::kTask, task, Side::kLocal, local);
}
void local_to_packed(const ShardMap& m, const float* local, float* packed) {
  copy_runs(m, Side::kLocal, local, Side::kPacked, packed);
}
void packed_to_local(const ShardMap& m, const float* packed, float* local) {
  copy_runs(m, Side::kPacked, packed, Side::kLocal, local);
}
void packed_to_task(const ShardMap& m, const float* packed, float* task) {
  copy_runs(m, Side::kPacked, packed, Side::kTask, task);
}
void task_to_packed(const ShardMap& m, const float* task, float* packed) {
  copy_runs(m, Side::kTask, task, Side::kPacked, packed);
}

}  // namespace canzona::engine
