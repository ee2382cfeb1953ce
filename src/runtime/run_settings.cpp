// The settings of a `canzona run` / `canzona compare` launch (run_settings.h).
#include "canzona/runtime/run_settings.h"

#include "canzona/common/error.h"
#include "canzona/common/faults.h"

namespace canzona::runtime {

using launch::setting_value;
using launch::Settings;

Settings launch_settings(const RunOptions& o, const SessionOptions& session,
                         const std::vector<plan::Strategy>& strategies,
                         const model::ModelSpec& model) {
  Settings settings = launch::job_settings(o, strategies, model,
                                           {{"--steps", std::to_string(o.steps)},
                                            {"--warmup", std::to_string(o.warmup)},
                                            {"--compute-scale", setting_value(o.compute_scale)},
                                            {"--tokens", std::to_string(o.tokens)}});
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  settings.insert(
      settings.end(),
      {
          {"--test-perturb-plan-rank",
           std::to_string(faults::site(faults::Fault::kPerturbPlan).rank)},
          {"--test-corrupt-rank", std::to_string(faults::site(faults::Fault::kCorruptParams).rank)},
          {"--verify", flag(session.verify)},
          {"verify tolerance", setting_value(session.verify_tolerance)},
          {"--trace", session.trace_path},
      });
  return settings;
}

}  // namespace canzona::runtime
