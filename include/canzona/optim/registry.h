// The optimizer registry: each optimizer's spec (optimizer_spec.h: name, shape, options, cost
// formulas) with its factory, in one descriptor. This is the kernels' side (canzona_optim,
// OpenBLAS); the planner and the cost model use only the specs (canzona_optim_spec, no BLAS).
//
// Adding an optimizer is one kernel source file and one spec file (plus an optional header): its
// class and factory in <name>.cpp, its options reader and formulas in <name>_spec.cpp, listed in
// builtin_specs.h, spec_registry.cpp and registry.cpp; or one descriptor registered at run time
// with register_optimizer (docs/optimizers.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "canzona/optim/optimizer.h"
#include "canzona/optim/optimizer_spec.h"

namespace canzona::optim {

struct OptimizerDescriptor {
  const char* name = nullptr;  // registry name, e.g. "muon"; also Optimizer::name()
  OptimizerShape shape = OptimizerShape::kMatrix;
  OptimizerFactory make = nullptr;
  CostFormula flops = nullptr;        // FLOPs per step, periodic work amortised over its period
  CostFormula state_bytes = nullptr;  // bytes of optimizer state (fp32 buffers and statistics)
  // The part of `flops` spent in factorizations (eigh, QR); nullptr when there is none.
  CostFormula factorization_flops = nullptr;
};

// Adds `descriptor` after the built-in optimizers (muon, shampoo, soap, adamw), and its spec
// (optimizer_spec.h; its options are what its factory reads). Throws UsageError when the name is
// empty or already registered, or a required member (make, flops, state_bytes) is null. Call it
// before any thread looks optimizers up (e.g. first thing in main).
void register_optimizer(const OptimizerDescriptor& descriptor);

// The descriptor of `name`; throws UsageError "unknown optimizer '<name>' (known: muon, ...)".
// The reference stays valid for the life of the process.
const OptimizerDescriptor& find_optimizer(const std::string& name);

}  // namespace canzona::optim
