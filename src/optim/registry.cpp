// The optimizer registry: one line per optimizer. To add one, write its header/source pair with a
// `make_<name>` factory and add a line to kRegistry (docs/optimizers.md).
#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"

namespace canzona::optim {
namespace {

struct RegistryEntry {
  const char* name;
  OptimizerFactory make;
};

constexpr RegistryEntry kRegistry[] = {
    {"muon", make_muon},
    {"shampoo", make_shampoo},
    {"soap", make_soap},
    {"adamw", make_adamw},
};

const RegistryEntry& entry_of(const std::string& name) {
  for (const RegistryEntry& entry : kRegistry)
    if (name == entry.name) return entry;
  std::string known;
  for (const RegistryEntry& entry : kRegistry)
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  throw UsageError(str("unknown optimizer '", name, "' (known: ", known, ")"));
}

}  // namespace

std::unique_ptr<Optimizer> create_optimizer(const std::string& name, const ParamInfo& param,
                                            const nlohmann::json& options) {
  return entry_of(name).make(param, options, nullptr);
}

nlohmann::json effective_options(const std::string& name, const nlohmann::json& options) {
  nlohmann::json effective;
  entry_of(name).make(ParamInfo{"options check", 2, 2}, options, &effective);
  return effective;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const RegistryEntry& entry : kRegistry) names.emplace_back(entry.name);
  return names;
}

}  // namespace canzona::optim
