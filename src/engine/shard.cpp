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

void copy_runs(const ShardMap& map, Side from, ConstTypedPtr src, Side to, TypedPtr dst) {
  const bool same = src.dtype() == dst.dtype();
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
      const std::int64_t n = run.rows * map.width;
      if (same) {
        std::memcpy((dst + dst_offset).data(), (src + src_offset).data(),
                    static_cast<std::size_t>(n * dtype_bytes(dst.dtype())));
      } else {
        copy_cast(src + src_offset, dst + dst_offset, n);
      }
    } else {
      for (std::int64_t r = 0; r < run.rows; ++r) {
        if (same) {
          std::memcpy((dst + dst_offset + r * dst_cols).data(),
                      (src + src_offset + r * src_cols).data(),
                      static_cast<std::size_t>(map.width * dtype_bytes(dst.dtype())));
        } else {
          copy_cast(src + src_offset + r * src_cols, dst + dst_offset + r * dst_cols, map.width);
        }
      }
    }
    packed_row += run.rows;
  }
}

}  // namespace

void local_to_task(const ShardMap& m, ConstTypedPtr local, TypedPtr task) {
  copy_runs(m, Side::kLocal, local, Side::kTask, task);
}
void task_to_local(const ShardMap& m, ConstTypedPtr task, TypedPtr local) {
  copy_runs(m, Side::kTask, task, Side::kLocal, local);
}
void local_to_packed(const ShardMap& m, ConstTypedPtr local, TypedPtr packed) {
  copy_runs(m, Side::kLocal, local, Side::kPacked, packed);
}
void packed_to_local(const ShardMap& m, ConstTypedPtr packed, TypedPtr local) {
  copy_runs(m, Side::kPacked, packed, Side::kLocal, local);
}
void packed_to_task(const ShardMap& m, ConstTypedPtr packed, TypedPtr task) {
  copy_runs(m, Side::kPacked, packed, Side::kTask, task);
}
void task_to_packed(const ShardMap& m, ConstTypedPtr task, TypedPtr packed) {
  copy_runs(m, Side::kTask, task, Side::kPacked, packed);
}

}  // namespace canzona::engine
