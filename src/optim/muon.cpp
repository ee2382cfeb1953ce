#include "canzona/optim/muon.h"

#include <algorithm>
#include <cmath>

#include "canzona/common/error.h"
#include "options_reader.h"
#include "scratch.h"

namespace canzona::optim {

MuonScale parse_muon_scale(const std::string& name) {
  if (name == "spectral") return MuonScale::kSpectral;
  if (name == "aspect") return MuonScale::kAspect;
  throw UsageError(str("unknown Muon update scale '", name, "' (known: spectral, aspect)"));
}

const char* to_string(MuonScale scale) {
  return scale == MuonScale::kSpectral ? "spectral" : "aspect";
}

Muon::Muon(ParamInfo param, MuonOptions options) : Optimizer(std::move(param)), options_(options) {
  const std::string who = str("muon for ", this->param().describe());
  CANZONA_REQUIRE(std::isfinite(options_.lr), who, ": lr must be finite");
  CANZONA_REQUIRE(options_.momentum >= 0.0 && options_.momentum < 1.0, who,
                  ": momentum must be in [0, 1), got ", options_.momentum);
  CANZONA_REQUIRE(options_.ns.steps >= 0, who, ": ns_steps must be >= 0");
  CANZONA_REQUIRE(options_.ns.eps >= 0.0, who, ": eps must be >= 0");
  CANZONA_REQUIRE(std::isfinite(options_.weight_decay), who, ": weight_decay must be finite");
  momentum_.assign(static_cast<std::size_t>(this->param().numel()), 0.0f);
}

std::vector<NamedState> Muon::state() {
  const ParamInfo& p = param();
  return {{"momentum_buffer", p.rows, p.cols, momentum_, 1}};
}

std::size_t Muon::state_bytes() const {
  return momentum_.size() * sizeof(float);
}

double Muon::update_scale() const {
  const ParamInfo& p = param();
  if (options_.scale == MuonScale::kSpectral)
    return 0.2 * std::sqrt(static_cast<double>(
                     std::max(p.effective_full_rows(), p.effective_full_cols())));
  if (p.cols == 0) return 1.0;
  return std::sqrt(std::max(1.0, static_cast<double>(p.rows) / static_cast<double>(p.cols)));
}

void Muon::update(MatrixView param, ConstMatrixView grad, std::int64_t /*step*/) {
  const std::int64_t rows = param.rows, cols = param.cols;
  if (rows * cols == 0) return;
  detail::Scratch scratch;
  MatrixView u = scratch.matrix(rows, cols);
  MatrixView m = matrix_view(momentum_.data(), rows, cols);

  const float beta = static_cast<float>(options_.momentum);
  const float one_minus_beta = static_cast<float>(1.0 - options_.momentum);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = grad.row(r);
    float* b = m.row(r);
    float* ur = u.row(r);
    for (std::int64_t c = 0; c < cols; ++c) {
      b[c] = b[c] + one_minus_beta * (g[c] - b[c]);
      ur[c] = options_.nesterov ? g[c] + beta * (b[c] - g[c]) : b[c];
    }
  }

  newton_schulz(u, u, options_.ns);

  const double lr = options_.lr * lr_scale();
  const float decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  const float step_size = static_cast<float>(lr * update_scale());
  for (std::int64_t r = 0; r < rows; ++r) {
    float* w = param.row(r);
    const float* x = u.row(r);
    for (std::int64_t c = 0; c < cols; ++c) w[c] = w[c] * decay - step_size * x[c];
  }
}

namespace {

MuonOptions read_muon_options(const nlohmann::json& options, nlohmann::json* effective) {
  MuonOptions o;
  detail::OptionsReader reader("muon", options, effective != nullptr);
  reader.read_in("lr", o.lr, 0.0, detail::kMaxRate, "kMaxRate");
  reader.read_in("momentum", o.momentum, 0.0, detail::kMaxBeta, "kMaxBeta");
  reader.read("nesterov", o.nesterov);
  reader.read_enum("ns_coefficients", o.ns.coefficients, parse_ns_coefficients, to_string);
  reader.read_in("ns_steps", o.ns.steps, 0, detail::kMaxNsSteps, "kMaxNsSteps");
  reader.read_in("eps", o.ns.eps, detail::kMinEps, 1.0, "kMinEps");
  reader.read_enum("scale", o.scale, parse_muon_scale, to_string);
  reader.read_in("weight_decay", o.weight_decay, 0.0, detail::kMaxRate, "kMaxRate");
  reader.finish();
  if (effective != nullptr) *effective = reader.effective();
  return o;
}

// Per Newton-Schulz step: A = X X^T (2 lo^2 hi), A A (2 lo^3), B' X (2 lo^2 hi).
double muon_flops(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  const MuonOptions o = read_muon_options(options, nullptr);
  const double hi = static_cast<double>(std::max(rows, cols));
  const double lo = static_cast<double>(std::min(rows, cols));
  return o.ns.steps * (4.0 * hi * lo * lo + 2.0 * lo * lo * lo);
}

double muon_state_bytes(std::int64_t rows, std::int64_t cols, const nlohmann::json& options) {
  read_muon_options(options, nullptr);
  constexpr double kF32 = sizeof(float);
  return kF32 * static_cast<double>(rows) * static_cast<double>(cols);
}

}  // namespace

std::unique_ptr<Optimizer> make_muon(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective) {
  return std::make_unique<Muon>(param, read_muon_options(options, effective));
}

constinit const OptimizerDescriptor kMuonDescriptor{.name = "muon",
                                                    .shape = OptimizerShape::kMatrix,
                                                    .make = make_muon,
                                                    .flops = muon_flops,
                                                    .state_bytes = muon_state_bytes};

}  // namespace canzona::optim
