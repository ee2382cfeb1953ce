#include "canzona/optim/optimizer.h"

#include <cmath>
#include <cstdlib>

#include "canzona/common/error.h"
#include "canzona/optim/blas_env.h"

namespace canzona::optim {
namespace {

// One BLAS thread in every program that uses the optimizers, unless the user set
// OPENBLAS_NUM_THREADS (docs/design.md section 5): Shampoo's and SOAP's bits change with the thread
// count. Runs at program start-up, after OpenBLAS has loaded.
[[maybe_unused]] const bool kOneBlasThread = [] {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) set_blas_threads(1);
  return true;
}();

}  // namespace

void Optimizer::set_step_count(std::int64_t steps) {
  CANZONA_REQUIRE(steps >= 0, name(), " for ", param_.describe(), ": step count ", steps,
                  " is negative");
  step_count_ = steps;
}

void Optimizer::set_lr_scale(double scale) {
  CANZONA_REQUIRE(std::isfinite(scale) && scale >= 0.0, name(), " for ", param_.describe(),
                  ": lr scale ", scale, " must be finite and >= 0");
  lr_scale_ = scale;
}

std::string ParamInfo::describe() const {
  return str("'", name, "' (", shape_string(rows, cols), ")");
}

Optimizer::Optimizer(ParamInfo param) : param_(std::move(param)) {
  CANZONA_REQUIRE(
      param_.rows >= 0 && param_.cols >= 0 && param_.full_rows >= 0 && param_.full_cols >= 0,
      "optimizer for ", param_.describe(), ": negative shape");
}

void Optimizer::step(MatrixView param, ConstMatrixView grad) {
  check_view(param, "param");
  check_view(grad, "grad");
  CANZONA_REQUIRE(param.rows == param_.rows && param.cols == param_.cols, name(), ": param ",
                  param_.describe(), " given a ", shape_string(param.rows, param.cols),
                  " parameter view");
  CANZONA_REQUIRE(grad.rows == param_.rows && grad.cols == param_.cols, name(), ": param ",
                  param_.describe(), " given a ", shape_string(grad.rows, grad.cols), " gradient");
  const NonFinite bad = find_non_finite(grad);
  if (bad.found)
    throw Error(str(name(), ": non-finite gradient for param ", param_.describe(), " at step ",
                    step_count_ + 1, ": element (", bad.row, ", ", bad.col, ") = ", bad.value,
                    "; param and optimizer state left unchanged"));
  update(param, grad, step_count_ + 1);
  ++step_count_;
}

}  // namespace canzona::optim
