// Human and machine output of a compare/run launch (world rank 0).
//
// JSON layout (--json FILE):
//   {"model", "dp", "tp", "pp", "optimizer", "steps", "warmup", "reduce_mode", "precision",
//    "grad_reduce_in_fp32",
//    "strategies": {"<name>": {"step_ms", "opt_ms", "opt_compute_ms", "opt_comm_ms",
//                              "grad_sync_ms", "param_sync_ms", "forward_ms", "backward_ms",
//                              "opt_cpu_ms": [per rank], "busy_cpu_ms": [per rank],
//                              "bytes": {"reduce_scatter", "all_gather", "all_reduce",
//                                        "all_to_all"},
//                              "dp_bytes": {...}, "tp_bytes": {...},
//                              "dp_phase_bytes": {"grad_sync", "optimizer", "param_sync",
//                                                 "total"},
//                              "tp_phase_bytes": {...}, "plan_hash", "buckets",
//                              "micro_groups", "predicted_flops_max", "predicted_flops_mean"}},
//    "verify": {"ran", "bitwise", "passed", "max_abs_diff", "grad_max_abs_diff",
//               "elements", "grad_elements", "expected_elements", "first_mismatch"}}
// Times are medians over the timed steps of the per-step maximum over ranks (ms); CPU times are
// per rank medians; bytes are per step, summed over ranks ("bytes": DP plus TP communicators by
// collective kind; "*_phase_bytes": per communicator by the phase that posted them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "canzona/runtime/session.h"

namespace canzona::runtime {

// The phase table, per-rank busy times, bytes, the lb-asc vs sc ratios and the verify line.
std::string format_report(const CompareResult& result);

nlohmann::json report_json(const CompareResult& result);

}  // namespace canzona::runtime
