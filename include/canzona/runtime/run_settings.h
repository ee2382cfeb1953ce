// The settings ranks of a `canzona run` / `canzona compare` launch agree on (launch/agreement.h).
#pragma once

#include <vector>

#include "canzona/launch/agreement.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"
#include "canzona/runtime/options.h"
#include "canzona/runtime/session.h"

namespace canzona::runtime {

// The settings of a launch, in a fixed order that depends only on the optimizer: every field of
// RunOptions, the SessionOptions (--verify, --trace), the strategy list, model_hash(model), then
// one setting per optimizer option as it runs (optim::effective_options, sorted keys: key
// "--optimizer-options lr", then "adamw options beta1", ...). Pure: no MPI, no files. Callers may
// append settings of their own (e.g. "--json") before check_agreement().
launch::Settings launch_settings(const RunOptions& options, const SessionOptions& session,
                                 const std::vector<plan::Strategy>& strategies,
                                 const model::ModelSpec& model);

}  // namespace canzona::runtime
