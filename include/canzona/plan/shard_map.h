// Where a task's rows live in the TP-local shards (docs/design.md section 4, TP step). Pure
// geometry of the model and the TP degree; the runtime copies data with it (engine/shard.h) and
// the decoded plan (rank_plan.h) sizes the micro-group segments with it.
//
// Terms. A param's *global matrix* is R x C (for a TP-split param the concatenation of its TP
// shards along tp_split_dim, model/spec.h); TP rank t holds a *local shard*, row-major, of
// R/TP x C rows (split dim 0), R x C/TP (split dim 1) or R x C (replicated). A *task matrix* is
// the matrix the optimizer sees: the whole global matrix, or a piece = the global rows of its
// row_ranges, concatenated in order (rows x C). A ShardMap lists, for one (task, TP rank), the
// runs of rows the shard and the task matrix share: `rows` rows starting at local row `local_row`
// of the shard and task row `task_row` of the task matrix, `width` columns starting at task column
// `task_col`. The *packed* form of a shard's part of a task is those runs back to back (`width`
// floats per row), which is what travels in the micro-group All-to-All.
#pragma once

#include <cstdint>
#include <vector>

#include "canzona/model/spec.h"

namespace canzona::plan {

struct RowRun {
  std::int64_t local_row = 0;
  std::int64_t task_row = 0;
  std::int64_t rows = 0;
  std::int64_t task_col = 0;
};

struct ShardMap {
  std::int64_t local_cols = 0;  // columns of the local shard
  std::int64_t task_rows = 0;   // task matrix shape
  std::int64_t task_cols = 0;
  std::int64_t width = 0;    // columns per run row (= local_cols)
  std::vector<RowRun> runs;  // in task-row order

  std::int64_t numel() const;  // elements of the packed form
};

// Map of (param, piece; -1 = the whole param) for TP rank tp_rank of tp. 1-D params are R x 1.
// Throws UsageError when the piece index is out of range or tp does not divide the split dim.
ShardMap shard_map(const model::ParamSpec& param, int piece, int tp, int tp_rank);

}  // namespace canzona::plan
