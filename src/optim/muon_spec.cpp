// Muon's spec (optimizer_spec.h): its option names and defaults, the names of its enums, its cost
// formulas.
#include <algorithm>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "options_reader.h"

namespace canzona::optim {

NsCoefficients parse_ns_coefficients(const std::string& name) {
  if (name == "simple") return NsCoefficients::kSimple;
  if (name == "quintic") return NsCoefficients::kQuintic;
  if (name == "polar_express") return NsCoefficients::kPolarExpress;
  throw UsageError(str("unknown Newton-Schulz coefficient set '", name,
                       "' (known: simple, quintic, polar_express)"));
}

const char* to_string(NsCoefficients set) {
  switch (set) {
    case NsCoefficients::kSimple:
      return "simple";
    case NsCoefficients::kQuintic:
      return "quintic";
    case NsCoefficients::kPolarExpress:
      return "polar_express";
  }
  return "?";
}

MuonScale parse_muon_scale(const std::string& name) {
  if (name == "spectral") return MuonScale::kSpectral;
  if (name == "aspect") return MuonScale::kAspect;
  throw UsageError(str("unknown Muon update scale '", name, "' (known: spectral, aspect)"));
}

const char* to_string(MuonScale scale) {
  return scale == MuonScale::kSpectral ? "spectral" : "aspect";
}

namespace detail {

MuonOptions read_muon_options(const nlohmann::json& options, nlohmann::json* effective) {
  MuonOptions o;
  detail::OptionsReader reader("muon", options, effective != nullptr);
  reader.read_in("lr", o.lr, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("momentum", o.momentum, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read("nesterov", o.nesterov);
  reader.read_enum("ns_coefficients", o.ns.coefficients, parse_ns_coefficients, to_string);
  reader.read_in("ns_steps", o.ns.steps, 0, detail::kMaxNsSteps, "kMaxNsSteps");
  reader.read_in("eps", o.ns.eps, detail::kMinEps, 1.0, "kMinEps");
  reader.read_enum("ns_dtype", o.ns.dtype, parse_ns_dtype, to_string);
  reader.read_enum("ns_algorithm", o.ns.algorithm, parse_ns_algorithm, to_string);
  reader.read_enum("scale", o.scale, parse_muon_scale, to_string);
  reader.read_in("weight_decay", o.weight_decay, 0.0, detail::kMaxRate, "kMaxRate");
  reader.finish();
  // Gram where no restart set keeps it stable is refused, not run as the standard iteration.
  CANZONA_REQUIRE(
      o.ns.algorithm != NsAlgorithm::kGram || o.ns.steps < 1 || gram_stable(o.ns),
      "muon option 'ns_algorithm': gram ",
      o.ns.steps > kGramMaxSteps
          ? str("runs at most ", kGramMaxSteps, " iterations (ns_steps ", o.ns.steps, ")")
          : str("has no stable restart set for ", to_string(o.ns.coefficients), " x ", o.ns.steps,
                " in ", to_string(o.ns.dtype), " (docs/optimizers.md, \"The Gram iteration\")"),
      "; use ns_algorithm standard");
  if (effective != nullptr) *effective = reader.effective();
  return o;
}

namespace {

// newton_schulz_flops: the standard iteration's three GEMMs per step as usually counted, or the
// Gram iteration's where it runs on this shape (muon.h).
double muon_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  const MuonOptions o = read_muon_options(options, nullptr);
  return newton_schulz_flops(rows, cols, o.ns);
}

double muon_state_bytes(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  read_muon_options(options, nullptr);
  constexpr double kF32 = sizeof(float);
  return kF32 * static_cast<double>(rows) * static_cast<double>(cols);
}

}  // namespace

OptimizerSpec muon_spec() {
  return {"muon",     OptimizerShape::kMatrix, effective_reader(read_muon_options),
          muon_flops, muon_state_bytes,        nullptr};
}

}  // namespace detail
}  // namespace canzona::optim
