// The optimizer registry (registry.h): the built-in descriptors, one per optimizer file, then any
// registered at run time.
#include "canzona/optim/registry.h"

#include <deque>
#include <mutex>

#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"

namespace canzona::optim {
namespace {

// One line per built-in optimizer; each descriptor lives in its optimizer's source file.
const OptimizerDescriptor* const kBuiltins[] = {
    &kMuonDescriptor,
    &kShampooDescriptor,
    &kSoapDescriptor,
    &kAdamWDescriptor,
};

// Descriptors added by register_optimizer, with their names owned here. A deque never moves its
// elements, so references handed out stay valid.
struct Registered {
  std::string name;
  OptimizerDescriptor descriptor;
};

struct Runtime {
  std::mutex mutex;
  std::deque<Registered> entries;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

// Every descriptor in registry order; the caller holds runtime().mutex.
std::vector<const OptimizerDescriptor*> all_locked() {
  std::vector<const OptimizerDescriptor*> all(std::begin(kBuiltins), std::end(kBuiltins));
  for (const Registered& r : runtime().entries) all.push_back(&r.descriptor);
  return all;
}

}  // namespace

void register_optimizer(const OptimizerDescriptor& descriptor) {
  const std::string name = descriptor.name == nullptr ? "" : descriptor.name;
  CANZONA_REQUIRE(!name.empty(), "register_optimizer: the descriptor has no name");
  CANZONA_REQUIRE(descriptor.make != nullptr && descriptor.flops != nullptr &&
                      descriptor.state_bytes != nullptr,
                  "register_optimizer: optimizer '", name,
                  "' needs a factory, a flops formula and a state_bytes formula");
  std::lock_guard<std::mutex> lock(runtime().mutex);
  for (const OptimizerDescriptor* d : all_locked())
    CANZONA_REQUIRE(name != d->name, "register_optimizer: optimizer '", name,
                    "' is already registered");
  Registered& r = runtime().entries.emplace_back(Registered{name, descriptor});
  r.descriptor.name = r.name.c_str();
}

const OptimizerDescriptor& find_optimizer(const std::string& name) {
  for (const OptimizerDescriptor* d : kBuiltins)
    if (name == d->name) return *d;
  std::lock_guard<std::mutex> lock(runtime().mutex);
  const std::vector<const OptimizerDescriptor*> all = all_locked();
  for (const OptimizerDescriptor* d : all)
    if (name == d->name) return *d;
  std::string known;
  for (const OptimizerDescriptor* d : all)
    known += (known.empty() ? "" : ", ") + std::string(d->name);
  throw UsageError(str("unknown optimizer '", name, "' (known: ", known, ")"));
}

std::vector<std::string> optimizer_names(OptimizerShape shape) {
  std::lock_guard<std::mutex> lock(runtime().mutex);
  std::vector<std::string> names;
  for (const OptimizerDescriptor* d : all_locked())
    if (d->shape == shape) names.emplace_back(d->name);
  return names;
}

std::vector<std::string> optimizer_names() {
  std::lock_guard<std::mutex> lock(runtime().mutex);
  std::vector<std::string> names;
  for (const OptimizerDescriptor* d : all_locked()) names.emplace_back(d->name);
  return names;
}

std::unique_ptr<Optimizer> create_optimizer(const std::string& name, const ParamInfo& param,
                                            const nlohmann::json& options) {
  return find_optimizer(name).make(param, options, nullptr);
}

nlohmann::json effective_options(const std::string& name, const nlohmann::json& options) {
  nlohmann::json effective;
  find_optimizer(name).make(ParamInfo{"options check", 2, 2}, options, &effective);
  return effective;
}

}  // namespace canzona::optim
