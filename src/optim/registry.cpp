// The optimizer registry (registry.h): each optimizer's spec (optimizer_spec.h) with its factory.
// The built-in factories are listed here; register_optimizer adds one and its spec.
#include "canzona/optim/registry.h"

#include <array>
#include <deque>
#include <mutex>

#include "canzona/common/error.h"
#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"

namespace canzona::optim {
namespace {

// One line per built-in optimizer: its spec's name and its factory.
struct BuiltinFactory {
  const char* name;
  OptimizerFactory make;
};
constexpr std::array<BuiltinFactory, 4> kBuiltinFactories{
    {{"muon", make_muon}, {"shampoo", make_shampoo}, {"soap", make_soap}, {"adamw", make_adamw}}};

OptimizerDescriptor descriptor_of(const OptimizerSpec& spec, OptimizerFactory make) {
  return {.name = spec.name.c_str(),
          .shape = spec.shape,
          .make = make,
          .flops = spec.flops,
          .state_bytes = spec.state_bytes,
          .factorization_flops = spec.factorization_flops};
}

const std::vector<OptimizerDescriptor>& builtins() {
  static const std::vector<OptimizerDescriptor> descriptors = [] {
    std::vector<OptimizerDescriptor> out;
    for (const BuiltinFactory& b : kBuiltinFactories)
      out.push_back(descriptor_of(find_optimizer_spec(b.name), b.make));
    return out;
  }();
  return descriptors;
}

// Descriptors added by register_optimizer (their names point into the spec registry, which keeps
// its specs for the life of the process). A deque never moves its elements.
struct Registered {
  std::mutex mutex;
  std::deque<OptimizerDescriptor> descriptors;
};

Registered& registered() {
  static Registered r;
  return r;
}

}  // namespace

void register_optimizer(const OptimizerDescriptor& descriptor) {
  const std::string name = descriptor.name == nullptr ? "" : descriptor.name;
  CANZONA_REQUIRE(!name.empty(), "register_optimizer: the descriptor has no name");
  CANZONA_REQUIRE(descriptor.make != nullptr && descriptor.flops != nullptr &&
                      descriptor.state_bytes != nullptr,
                  "register_optimizer: optimizer '", name,
                  "' needs a factory, a flops formula and a state_bytes formula");
  const OptimizerFactory make = descriptor.make;
  // Its options are what its factory reads (the factory defines the keys and defaults).
  register_optimizer_spec({.name = name,
                           .shape = descriptor.shape,
                           .effective_options =
                               [make](const nlohmann::json& options) {
                                 nlohmann::json effective;
                                 make(ParamInfo{"options check", 2, 2}, options, &effective);
                                 return effective;
                               },
                           .flops = descriptor.flops,
                           .state_bytes = descriptor.state_bytes,
                           .factorization_flops = descriptor.factorization_flops});
  std::lock_guard<std::mutex> lock(registered().mutex);
  registered().descriptors.push_back(descriptor_of(find_optimizer_spec(name), make));
}

const OptimizerDescriptor& find_optimizer(const std::string& name) {
  for (const OptimizerDescriptor& d : builtins())
    if (name == d.name) return d;
  find_optimizer_spec(name);  // throws "unknown optimizer ... (known: ...)"
  std::lock_guard<std::mutex> lock(registered().mutex);
  for (const OptimizerDescriptor& d : registered().descriptors)
    if (name == d.name) return d;
  throw Error(str("optimizer '", name, "' has a spec but no factory (register_optimizer)"));
}

std::unique_ptr<Optimizer> create_optimizer(const std::string& name, const ParamInfo& param,
                                            const nlohmann::json& options) {
  return find_optimizer(name).make(param, options, nullptr);
}

}  // namespace canzona::optim
