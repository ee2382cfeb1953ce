// Pipeline stages (Megatron: transformer layers split evenly over pp stages; the embedding lives
// on the first stage, the final norm and output layer on the last).
#include <algorithm>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/model/limits.h"
#include "canzona/model/load.h"

namespace canzona::model {

std::vector<int> stage_bounds(const std::string& model_name, std::int64_t num_layers, int pp,
                              const std::vector<int>& layout) {
  CANZONA_REQUIRE(pp > 0, "pp must be positive, got pp=", pp);
  std::vector<int> bounds(static_cast<std::size_t>(pp) + 1, 0);
  if (layout.empty()) {
    CANZONA_REQUIRE(num_layers % pp == 0, "--pp ", pp, " does not divide the ", num_layers,
                    " transformer layers of model '", model_name,
                    "' (--pp-layout sets uneven stages)");
    for (int s = 0; s <= pp; ++s)
      bounds[static_cast<std::size_t>(s)] = static_cast<int>(s * (num_layers / pp));
    return bounds;
  }
  std::string text;
  std::int64_t sum = 0;
  for (std::size_t s = 0; s < layout.size(); ++s) {
    if (s > 0) text += ',';
    text += std::to_string(layout[s]);
    sum += layout[s];
  }
  CANZONA_REQUIRE(std::ssize(layout) == pp, "--pp-layout ", text, " names ", layout.size(),
                  " stages, --pp is ", pp);
  for (std::size_t s = 0; s < layout.size(); ++s)
    CANZONA_REQUIRE(layout[s] >= 1 && layout[s] <= kMaxLayers, "--pp-layout ", text, ": stage ", s,
                    " has ", layout[s], " layers (each stage needs 1 to kMaxLayers)");
  CANZONA_REQUIRE(sum == num_layers, "--pp-layout ", text, " sums to ", sum, " layers, model '",
                  model_name, "' has ", num_layers);
  for (int s = 0; s < pp; ++s)
    bounds[static_cast<std::size_t>(s) + 1] =
        bounds[static_cast<std::size_t>(s)] + layout[static_cast<std::size_t>(s)];
  return bounds;
}

std::vector<int> assign_stages(const ModelSpec& model, int pp, const std::vector<int>& layout) {
  CANZONA_REQUIRE(pp > 0, "pp must be positive, got pp=", pp);
  std::int64_t max_layer = -1;
  std::size_t first_layer_param = model.params.size();
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const ParamSpec& p = model.params[i];
    if (p.layer < 0) continue;
    require_in_range(
        p.layer, 0, kMaxLayers - 1, [&] { return str("param '", p.name, "': layer"); },
        "kMaxLayers");
    max_layer = std::max<std::int64_t>(max_layer, p.layer);
    first_layer_param = std::min(first_layer_param, i);
  }
  const std::int64_t num_layers = model.arch.num_layers > 0 ? model.arch.num_layers : max_layer + 1;
  require_in_range(
      num_layers, 0, kMaxLayers, [&] { return str("model '", model.name, "': layers"); },
      "kMaxLayers");
  CANZONA_REQUIRE(max_layer < num_layers, "model '", model.name, "': layer ", max_layer,
                  " out of range for ", num_layers, " layers");
  // A model without layers has every param on the stage its position picks (first or last).
  const std::vector<int> bounds = num_layers > 0 || !layout.empty()
                                      ? stage_bounds(model.name, num_layers, pp, layout)
                                      : std::vector<int>();

  std::vector<int> stages(model.params.size());
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const ParamSpec& p = model.params[i];
    if (p.stage >= 0) {
      CANZONA_REQUIRE(p.stage < pp, "param '", p.name, "': stage ", p.stage,
                      " out of range for pp=", pp);
      stages[i] = p.stage;
    } else if (p.layer >= 0) {
      stages[i] = static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), p.layer) -
                                   bounds.begin()) -
                  1;
    } else {
      stages[i] = i < first_layer_param ? 0 : pp - 1;
    }
    CANZONA_CHECK(stages[i] >= 0 && stages[i] < pp, "param '", p.name, "': stage ", stages[i]);
  }
  return stages;
}

}  // namespace canzona::model
