// The settings of a `canzona run` / `canzona compare` launch (run_settings.h).
#include "canzona/runtime/run_settings.h"

#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/common/hex.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::runtime {

using launch::model_hash;
using launch::setting_value;
using launch::Settings;

Settings launch_settings(const RunOptions& o, const SessionOptions& session,
                         const std::vector<plan::Strategy>& strategies,
                         const model::ModelSpec& model) {
  std::string strategy_list;
  for (plan::Strategy s : strategies) {
    if (!strategy_list.empty()) strategy_list += ',';
    strategy_list += plan::to_string(s);
  }
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  Settings settings{
      {"--model", o.model},
      {"model spec", hex64(model_hash(model))},
      {"--split-qkv", model::to_string(o.qkv_split)},
      {"--split-fc1", flag(o.split_fc1)},
      {"--dp", std::to_string(o.dp)},
      {"--tp", std::to_string(o.tp)},
      {"--pp", std::to_string(o.pp)},
      {"--optimizer", o.optimizer},

      {"--planner", plan::to_string(o.planner)},
      {"--alpha", setting_value(o.alpha)},
      {"--cmax-mb", setting_value(o.cmax_mb)},
      {"--cost", cost::to_string(o.cost)},
      {"--bucket-size", std::to_string(o.bucket_size)},
      {"--steps", std::to_string(o.steps)},
      {"--warmup", std::to_string(o.warmup)},
      {"--compute-scale", setting_value(o.compute_scale)},
      {"--tokens", std::to_string(o.tokens)},
      {"--seed", std::to_string(o.seed)},
      {"--no-pipeline", flag(!o.pipeline)},
      {"--reduce-mode", to_string(o.reduce_mode)},
      {"--test-perturb-plan-rank", std::to_string(faults::site(faults::Fault::kPerturbPlan).rank)},
      {"--test-corrupt-rank", std::to_string(faults::site(faults::Fault::kCorruptParams).rank)},
      {"--strategy", strategy_list},
      {"--verify", flag(session.verify)},
      {"verify tolerance", setting_value(session.verify_tolerance)},
      {"--trace", session.trace_path},
  };
  // One setting per option the optimizers run with (given values over the defaults, keys sorted),
  // so {} and {"ns_steps": 5} agree and a disagreement names the key.
  const auto add_options = [&settings](const std::string& prefix, const nlohmann::json& options) {
    for (const auto& [key, value] : options.items())
      settings.push_back({str(prefix, " ", key), value.dump()});
  };
  add_options("--optimizer-options", optim::effective_options(o.optimizer, o.optimizer_options));
  add_options("adamw options", optim::effective_options("adamw", o.adamw_options));
  return settings;
}

}  // namespace canzona::runtime
