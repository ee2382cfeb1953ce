// What the planner and the cost model know about an optimizer, without its kernels: its name, its
// shape, its options (with their defaults) and its cost formulas. This part links no BLAS
// (canzona_optim_spec); the kernels and the factories that build instances are canzona_optim
// (registry.h), which registers every optimizer's spec here.
//
// Terms. A matrix optimizer updates a whole rows x cols matrix; an element-wise one any
// contiguous slice, seen as 1 x numel (its shape). Cost formulas give the FLOPs per step and the
// optimizer-state bytes of one instance on a rows x cols matrix, plus the share of those FLOPs
// spent in factorizations (eigh, QR), which run far below the GEMM rate (the simulator prices
// them apart). Every formula takes the optimizer's JSON options as its factory does: missing keys
// take the documented defaults, an unknown, mistyped or out-of-range key throws UsageError. So a
// default lives in one place (the options struct) and the cost model prices exactly the options
// the runtime runs with.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace canzona::optim {

enum class OptimizerShape {
  kMatrix,       // the whole matrix with its whole gradient (Muon, Shampoo, SOAP)
  kElementwise,  // any contiguous slice (AdamW); its costs are linear in the element count
};

// A cost of one instance on a rows x cols matrix (1 x numel for an element-wise optimizer) under
// `options` (see the file comment). Must be finite for sides up to 2^24.
using CostFormula = double (*)(std::int64_t rows, std::int64_t cols, const nlohmann::json& options);

// Every option with the value it runs with: `options` merged over the documented defaults, in one
// canonical JSON (sorted keys). Throws UsageError for an unknown or mistyped key.
using OptionsReader = std::function<nlohmann::json(const nlohmann::json& options)>;

struct OptimizerSpec {
  std::string name;  // registry name, e.g. "muon"
  OptimizerShape shape = OptimizerShape::kMatrix;
  OptionsReader effective_options;
  CostFormula flops = nullptr;        // FLOPs per step, periodic work amortised over its period
  CostFormula state_bytes = nullptr;  // bytes of optimizer state (fp32 buffers and statistics)
  // The part of `flops` spent in factorizations (eigh, QR); nullptr when there is none.
  CostFormula factorization_flops = nullptr;
};

// The spec of `name` (muon, shampoo, soap, adamw, then any registered at run time); throws
// UsageError "unknown optimizer '<name>' (known: muon, ...)". The reference stays valid for the
// life of the process.
const OptimizerSpec& find_optimizer_spec(const std::string& name);

// Adds `spec` after the built-in ones. Throws UsageError when the name is empty or already
// registered, or a required member (effective_options, flops, state_bytes) is missing.
// register_optimizer (registry.h) calls it; call either before any thread looks optimizers up.
void register_optimizer_spec(const OptimizerSpec& spec);

// find_optimizer_spec(name).effective_options(options): {} and {"ns_steps": 5} give the same.
nlohmann::json effective_options(const std::string& name, const nlohmann::json& options);

// Registered names in registry order: all of them, or those of `shape`.
std::vector<std::string> optimizer_names();
std::vector<std::string> optimizer_names(OptimizerShape shape);

}  // namespace canzona::optim
