#include "canzona/model/load.h"

#include <algorithm>
#include <filesystem>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::model {

ModelSpec load_model(const std::string& model_arg, const BuildOptions& options) {
  const std::vector<std::string> names = preset_names();
  ModelSpec model;
  if (std::find(names.begin(), names.end(), model_arg) != names.end()) {
    model = build_transformer(preset(model_arg), options);
  } else {
    std::filesystem::path path(model_arg);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) path /= "config.json";
    if (!std::filesystem::is_regular_file(path, ec)) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw UsageError(str("unknown model '", model_arg,
                           "': not a preset and not an existing file (presets: ", known, ")"));
    }
    const nlohmann::json j = read_json_file(path.string());
    if (j.is_object() && j.contains("params")) {
      model = read_param_list(path.string());
    } else {
      model = build_transformer(read_hf_config(path.string()), options);
    }
  }
  validate(model, options.tp);
  return model;
}

}  // namespace canzona::model
