// The optimizer registry: what the rest of Canzona knows about an optimizer, in one descriptor.
//
// Terms. A *descriptor* names an optimizer and carries everything outside its own file needs:
// its *shape* (a matrix optimizer updates a whole rows x cols matrix; an element-wise one any
// contiguous slice, seen as 1 x numel), its factory (which also defines its option keys and
// defaults, see effective_options) and its *cost formulas*: FLOPs per step and optimizer-state
// bytes for a rows x cols matrix, plus the share of those FLOPs spent in matrix factorizations
// (eigh, QR), which run far below the GEMM rate (the simulator prices them apart).
//
// Every formula takes the optimizer's JSON options as the factory does: missing keys take the
// documented defaults, an unknown, mistyped or out-of-range key throws UsageError. So a default
// lives in one place (the options struct) and the cost model prices exactly the options the
// runtime runs with.
//
// Adding an optimizer is one source file (plus an optional header): its class, its factory, its
// formulas and a `const OptimizerDescriptor k<Name>Descriptor`, listed in kBuiltins in
// registry.cpp, or registered at run time with register_optimizer (docs/optimizers.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "canzona/optim/optimizer.h"

namespace canzona::optim {

enum class OptimizerShape {
  kMatrix,       // the whole matrix with its whole gradient (Muon, Shampoo, SOAP)
  kElementwise,  // any contiguous slice (AdamW); its costs are linear in the element count
};

// A cost of one instance on a rows x cols matrix (1 x numel for an element-wise optimizer) under
// `options` (see the file comment). Must be finite for sides up to 2^24.
using CostFormula = double (*)(std::int64_t rows, std::int64_t cols, const nlohmann::json& options);

struct OptimizerDescriptor {
  const char* name = nullptr;  // registry name, e.g. "muon"; also Optimizer::name()
  OptimizerShape shape = OptimizerShape::kMatrix;
  OptimizerFactory make = nullptr;
  CostFormula flops = nullptr;        // FLOPs per step, periodic work amortised over its period
  CostFormula state_bytes = nullptr;  // bytes of optimizer state (fp32 buffers and statistics)
  // The part of `flops` spent in factorizations (eigh, QR); nullptr when there is none.
  CostFormula factorization_flops = nullptr;
};

// Adds `descriptor` after the built-in optimizers (muon, shampoo, soap, adamw). Throws UsageError
// when the name is empty or already registered, or a required member (make, flops, state_bytes)
// is null. Call it before any thread looks optimizers up (e.g. first thing in main).
void register_optimizer(const OptimizerDescriptor& descriptor);

// The descriptor of `name`; throws UsageError "unknown optimizer '<name>' (known: muon, ...)".
// The reference stays valid for the life of the process.
const OptimizerDescriptor& find_optimizer(const std::string& name);

// Names of the registered optimizers of `shape`, in registry order.
std::vector<std::string> optimizer_names(OptimizerShape shape);

}  // namespace canzona::optim
