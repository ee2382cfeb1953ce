// Internal to the optim layer: the built-in optimizers' specs (<name>_spec.cpp, canzona_optim_spec)
// and the options readers their factories share (<name>.cpp, canzona_optim).
#pragma once

#include <nlohmann/json.hpp>

#include "canzona/optim/adamw.h"
#include "canzona/optim/muon.h"
#include "canzona/optim/optimizer_spec.h"
#include "canzona/optim/shampoo.h"
#include "canzona/optim/soap.h"

namespace canzona::optim::detail {

// The options struct from JSON (missing keys take the defaults; throws UsageError for an unknown,
// mistyped or out-of-range key); `effective`, when not null, receives every option's value.
MuonOptions read_muon_options(const nlohmann::json& options, nlohmann::json* effective);
ShampooOptions read_shampoo_options(const nlohmann::json& options, nlohmann::json* effective);
SoapOptions read_soap_options(const nlohmann::json& options, nlohmann::json* effective);
AdamWOptions read_adamw_options(const nlohmann::json& options, nlohmann::json* effective);

OptimizerSpec muon_spec();
OptimizerSpec shampoo_spec();
OptimizerSpec soap_spec();
OptimizerSpec adamw_spec();

// An OptionsReader from a read_<name>_options function.
template <typename Options>
OptionsReader effective_reader(Options (*read)(const nlohmann::json&, nlohmann::json*)) {
  return [read](const nlohmann::json& options) {
    nlohmann::json effective;
    read(options, &effective);
    return effective;
  };
}

}  // namespace canzona::optim::detail
