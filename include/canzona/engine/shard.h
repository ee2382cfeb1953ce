// Copies between the layouts of plan/shard_map.h: a TP-local shard, the packed form and a task
// matrix (docs/design.md section 4, TP step). The geometry (ShardMap, shard_map) is the plan
// layer's.
#pragma once

#include "canzona/common/dtype.h"
#include "canzona/plan/shard_map.h"

namespace canzona::engine {

using plan::RowRun;
using plan::shard_map;
using plan::ShardMap;

// Copies between a local shard (local_cols per row), the packed form and a task matrix
// (task_cols per row). Only the mapped elements are touched. Either side may be fp32 or bf16
// (common/dtype.h): elements are cast when the dtypes differ (to bf16: round to nearest even).
void local_to_task(const ShardMap& map, ConstTypedPtr local, TypedPtr task);
void task_to_local(const ShardMap& map, ConstTypedPtr task, TypedPtr local);
void local_to_packed(const ShardMap& map, ConstTypedPtr local, TypedPtr packed);
void packed_to_local(const ShardMap& map, ConstTypedPtr packed, TypedPtr local);
void packed_to_task(const ShardMap& map, ConstTypedPtr packed, TypedPtr task);
void task_to_packed(const ShardMap& map, ConstTypedPtr task, TypedPtr packed);

}  // namespace canzona::engine
