// The optimizer specs (optimizer_spec.h): the built-in ones, one per <name>_spec.cpp, then any
// registered at run time.
#include <deque>
#include <mutex>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {
namespace {

// One line per built-in optimizer, in registry order.
const std::vector<OptimizerSpec>& builtins() {
  static const std::vector<OptimizerSpec> specs = {detail::muon_spec(), detail::shampoo_spec(),
                                                   detail::soap_spec(), detail::adamw_spec()};
  return specs;
}

// Specs added by register_optimizer_spec. A deque never moves its elements, so references handed
// out stay valid.
struct Registered {
  std::mutex mutex;
  std::deque<OptimizerSpec> specs;
};

Registered& registered() {
  static Registered r;
  return r;
}

// Every spec in registry order; the caller holds registered().mutex.
std::vector<const OptimizerSpec*> all_locked() {
  std::vector<const OptimizerSpec*> all;
  for (const OptimizerSpec& s : builtins()) all.push_back(&s);
  for (const OptimizerSpec& s : registered().specs) all.push_back(&s);
  return all;
}

}  // namespace

void register_optimizer_spec(const OptimizerSpec& spec) {
  CANZONA_REQUIRE(!spec.name.empty(), "register_optimizer: the descriptor has no name");
  CANZONA_REQUIRE(spec.effective_options && spec.flops != nullptr && spec.state_bytes != nullptr,
                  "register_optimizer: optimizer '", spec.name,
                  "' needs a factory, a flops formula and a state_bytes formula");
  std::lock_guard<std::mutex> lock(registered().mutex);
  for (const OptimizerSpec* s : all_locked())
    CANZONA_REQUIRE(spec.name != s->name, "register_optimizer: optimizer '", spec.name,
                    "' is already registered");
  registered().specs.push_back(spec);
}

const OptimizerSpec& find_optimizer_spec(const std::string& name) {
  for (const OptimizerSpec& s : builtins())
    if (name == s.name) return s;
  std::lock_guard<std::mutex> lock(registered().mutex);
  const std::vector<const OptimizerSpec*> all = all_locked();
  for (const OptimizerSpec* s : all)
    if (name == s->name) return *s;
  std::string known;
  for (const OptimizerSpec* s : all) known += (known.empty() ? "" : ", ") + s->name;
  throw UsageError(str("unknown optimizer '", name, "' (known: ", known, ")"));
}

nlohmann::json effective_options(const std::string& name, const nlohmann::json& options) {
  return find_optimizer_spec(name).effective_options(options);
}

std::vector<std::string> optimizer_names(OptimizerShape shape) {
  std::lock_guard<std::mutex> lock(registered().mutex);
  std::vector<std::string> names;
  for (const OptimizerSpec* s : all_locked())
    if (s->shape == shape) names.push_back(s->name);
  return names;
}

std::vector<std::string> optimizer_names() {
  std::lock_guard<std::mutex> lock(registered().mutex);
  std::vector<std::string> names;
  for (const OptimizerSpec* s : all_locked()) names.push_back(s->name);
  return names;
}

}  // namespace canzona::optim
