// The settings ranks of a `canzona run` / `canzona compare` launch agree on (launch/agreement.h).
#pragma once

#include <vector>

#include "canzona/launch/agreement.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/session.h"

namespace canzona::runtime {

// The settings of a launch: the job's (launch::job_settings) with the synthetic loop's fields,
// then the fault sites armed (common/faults.h) and the SessionOptions (--verify, --trace). Pure: no
// MPI, no files. Callers may append settings of their own (e.g. "--json") before
// check_agreement().
launch::Settings launch_settings(const RunOptions& options, const SessionOptions& session,
                                 const std::vector<plan::Strategy>& strategies,
                                 const model::ModelSpec& model);

}  // namespace canzona::runtime
