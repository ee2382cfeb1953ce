// Copies between the layouts of plan/shard_map.h: a TP-local shard, the packed form and a task
// matrix (docs/design.md section 4, TP step). The geometry (ShardMap, shard_map) is the plan
// layer's.
#pragma once

#include "canzona/plan/shard_map.h"

namespace canzona::engine {

using plan::RowRun;
using plan::shard_map;
using plan::ShardMap;

// Copies between a local shard (local_cols per row), the packed form and a task matrix
// (task_cols per row). Only the mapped elements are touched.
void local_to_task(const ShardMap& map, const float* local, float* task);
void task_to_local(const ShardMap& map, const float* task, float* local);
void local_to_packed(const ShardMap& map, const float* local, float* packed);
void packed_to_local(const ShardMap& map, const float* packed, float* local);
void packed_to_task(const ShardMap& map, const float* packed, float* task);
void task_to_packed(const ShardMap& map, const float* task, float* packed);

}  // namespace canzona::engine
