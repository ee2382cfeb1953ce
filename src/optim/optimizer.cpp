#include "canzona/optim/optimizer.h"

#include "canzona/common/error.h"

namespace canzona::optim {

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
