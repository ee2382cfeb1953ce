#include "canzona/optim/muon.h"

#include <algorithm>
#include <cmath>

#include "builtin_specs.h"
#include "canzona/common/error.h"
#include "scratch.h"

namespace canzona::optim {

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

std::unique_ptr<Optimizer> make_muon(const ParamInfo& param, const nlohmann::json& options,
                                     nlohmann::json* effective) {
  return std::make_unique<Muon>(param, detail::read_muon_options(options, effective));
}

}  // namespace canzona::optim
