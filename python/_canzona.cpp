// The Python package's native module `canzona._canzona` (pybind11): the planner and the optimizer
// kernels, without libtorch. Tensors cross as NumPy arrays (the Python side passes
// `tensor.detach().numpy()`, a view of the same memory), so the module builds without torch
// headers and `import canzona` does not load torch. Errors: a UsageError (bad input) becomes
// ValueError, any other canzona::Error RuntimeError, both with the message as the CLI prints it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/cost/calibration.h"
#include "canzona/cost/cost.h"
#include "canzona/launch/job.h"
#include "canzona/model/load.h"
#include "canzona/optim/optimizer.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/plan_report.h"

namespace py = pybind11;

namespace canzona::python {
namespace {

// The planning options of `canzona.plan`, as the CLI's flags of `canzona plan` (same names with
// '_' for '-', same defaults, same mapping through launch::JobOptions), so a plan made here has
// the CLI's plan_hash.
struct PlanArgs {
  int dp = 1, tp = 1, pp = 1, zero_stage = 1;
  std::string strategy = "lb-asc", planner = "canzona", optimizer = "muon", cost = "flops";
  std::string layerwise_tp = "duplicated", layerwise_buckets = "soft-min", bucket_order = "free";
  std::string split_qkv = "none";
  std::string calibration;  // --calibration FILE, for cost "calibrated"
  bool split_fc1 = false;
  double alpha = 1.0, cmax_mb = 512.0;
  std::int64_t bucket_size = 0;
  std::optional<int> ns_steps, precondition_frequency;
  std::optional<std::int64_t> max_precond_dim;
};

launch::JobOptions job_of(const PlanArgs& a) {
  launch::JobOptions o;
  o.planner = plan::parse_variant(a.planner);
  o.dp = a.dp;
  o.tp = a.tp;
  o.pp = a.pp;
  o.alpha = a.alpha;
  o.cmax_mb = a.cmax_mb;
  CANZONA_REQUIRE(a.bucket_size >= 0, "bucket_size must be >= 0, 0 = Megatron default (got ",
                  a.bucket_size, ")");
  o.bucket_size = a.bucket_size;
  o.zero_stage = a.zero_stage;
  o.layerwise_tp = plan::parse_layerwise_tp(a.layerwise_tp);
  o.layerwise_buckets = plan::parse_layerwise_buckets(a.layerwise_buckets);
  o.reorder_buckets = plan::parse_bucket_order(a.bucket_order);
  o.optimizer = a.optimizer;
  o.cost = cost::parse_cost_kind(a.cost);
  o.qkv_split = model::parse_qkv_split(a.split_qkv);
  o.split_fc1 = a.split_fc1;
  return o;
}

// `model`: a str (preset, HF config.json, param-list file: what --model takes) or a dict in the
// param-list format (model/load.h). Returns the plan JSON of `canzona plan --json` as text.
std::string make_plan_json(const py::object& model_arg, const PlanArgs& a) {
  const launch::JobOptions job = job_of(a);
  plan::PlanOptions options = launch::plan_options(job, plan::parse_strategy(a.strategy));
  launch::check_zero_stage(a.zero_stage, {options.strategy});
  CANZONA_REQUIRE(options.cost.kind != cost::CostKind::kCalibrated || !a.calibration.empty(),
                  "cost 'calibrated' needs calibration=FILE (written by canzona bench-kernels)");
  cost::OptimizerFlags flags;
  flags.ns_steps = a.ns_steps;
  flags.precondition_frequency = a.precondition_frequency;
  flags.max_precond_dim = a.max_precond_dim;
  cost::set_matrix_optimizer(options.cost, a.optimizer, flags);
  plan::validate_options(options);
  model::ModelSpec model;
  if (py::isinstance<py::str>(model_arg)) {
    model = model::load_model(model_arg.cast<std::string>(), launch::build_options(job));
  } else {
    const std::string text =
        py::module_::import("json").attr("dumps")(model_arg).cast<std::string>();
    model = model::param_list_from_json(nlohmann::json::parse(text), "params");
    model::validate(model, a.tp);
  }
  cost::Calibration calibration;
  if (!a.calibration.empty()) {
    calibration = cost::Calibration::read(a.calibration);
    options.cost.calibration = &calibration;
  }
  py::gil_scoped_release release;
  plan::PlanRun run;
  run.label = plan::to_string(options.strategy);
  const auto start = std::chrono::steady_clock::now();
  run.plan = plan::make_plan(model, options);
  run.plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.metrics = plan::compute_metrics(model, run.plan);
  plan::require_finite(run);
  nlohmann::json j = plan::plan_json(model, run);
  j["split_qkv"] = a.split_qkv;
  j["split_fc1"] = a.split_fc1;
  j["zero_stage"] = a.zero_stage;
  return j.dump();
}

// One optimizer instance (optim/optimizer.h) on a rows x cols fp32 matrix.
class PyOptimizer {
 public:
  PyOptimizer(const std::string& name, const std::string& param_name, std::int64_t rows,
              std::int64_t cols, const std::string& options_json) {
    optim::ParamInfo info;
    info.name = param_name;
    info.rows = rows;
    info.cols = cols;
    optimizer_ = optim::create_optimizer(name, info, nlohmann::json::parse(options_json));
  }

  void step(py::array_t<float, 0> param, py::array_t<float, 0> grad) {
    const optim::ParamInfo& info = optimizer_->param();
    auto check = [&](const py::array_t<float, 0>& a, const char* what) {
      CANZONA_REQUIRE(a.size() == info.numel(), info.describe(), ": ", what, " has ", a.size(),
                      " elements");
      CANZONA_REQUIRE((a.flags() & py::array::c_style) != 0, info.describe(), ": ", what,
                      " is not contiguous");
    };
    check(param, "param");
    check(grad, "grad");
    CANZONA_REQUIRE(param.writeable(), info.describe(), ": param is read-only");
    float* p = param.mutable_data();
    const float* g = grad.data();
    py::gil_scoped_release release;
    optimizer_->step(optim::MatrixView(p, info.rows, info.cols, info.cols),
                     optim::ConstMatrixView(g, info.rows, info.cols, info.cols));
  }

  // [(name, array)]: each array is a live view of the state (writes change it), kept alive by
  // this object.
  py::list state(py::object self) {
    py::list out;
    for (const optim::NamedState& s : optimizer_->state()) {
      py::array_t<float> view({s.rows, s.cols}, {s.cols * 4, std::int64_t{4}}, s.values.data(),
                              self);
      out.append(py::make_tuple(s.name, view));
    }
    return out;
  }

  std::int64_t step_count() const { return optimizer_->step_count(); }
  void set_step_count(std::int64_t steps) { optimizer_->set_step_count(steps); }
  void set_lr_scale(double scale) { optimizer_->set_lr_scale(scale); }
  std::size_t state_bytes() const { return optimizer_->state_bytes(); }

 private:
  std::unique_ptr<optim::Optimizer> optimizer_;
};

}  // namespace
}  // namespace canzona::python

PYBIND11_MODULE(_canzona, m) {
  using canzona::python::PlanArgs;
  using canzona::python::PyOptimizer;
  m.doc() = "Canzona's planner and optimizer kernels (import canzona, canzona.torch)";
  py::register_exception_translator([](std::exception_ptr e) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const canzona::UsageError& u) {
      PyErr_SetString(PyExc_ValueError, u.what());
    } catch (const canzona::Error& x) {
      PyErr_SetString(PyExc_RuntimeError, x.what());
    } catch (const nlohmann::json::exception& x) {
      PyErr_SetString(PyExc_ValueError, x.what());
    }
  });
  py::class_<PlanArgs>(m, "PlanArgs")
      .def(py::init<>())
      .def_readwrite("dp", &PlanArgs::dp)
      .def_readwrite("tp", &PlanArgs::tp)
      .def_readwrite("pp", &PlanArgs::pp)
      .def_readwrite("zero_stage", &PlanArgs::zero_stage)
      .def_readwrite("strategy", &PlanArgs::strategy)
      .def_readwrite("planner", &PlanArgs::planner)
      .def_readwrite("optimizer", &PlanArgs::optimizer)
      .def_readwrite("cost", &PlanArgs::cost)
      .def_readwrite("layerwise_tp", &PlanArgs::layerwise_tp)
      .def_readwrite("layerwise_buckets", &PlanArgs::layerwise_buckets)
      .def_readwrite("bucket_order", &PlanArgs::bucket_order)
      .def_readwrite("split_qkv", &PlanArgs::split_qkv)
      .def_readwrite("split_fc1", &PlanArgs::split_fc1)
      .def_readwrite("calibration", &PlanArgs::calibration)
      .def_readwrite("alpha", &PlanArgs::alpha)
      .def_readwrite("cmax_mb", &PlanArgs::cmax_mb)
      .def_readwrite("bucket_size", &PlanArgs::bucket_size)
      .def_readwrite("ns_steps", &PlanArgs::ns_steps)
      .def_readwrite("precondition_frequency", &PlanArgs::precondition_frequency)
      .def_readwrite("max_precond_dim", &PlanArgs::max_precond_dim);
  m.def("plan_json", &canzona::python::make_plan_json, py::arg("model"), py::arg("args"));
  m.def("effective_options", [](const std::string& name, const std::string& options_json) {
    return canzona::optim::effective_options(name, nlohmann::json::parse(options_json)).dump();
  });
  py::class_<PyOptimizer>(m, "Optimizer")
      .def(py::init<const std::string&, const std::string&, std::int64_t, std::int64_t,
                    const std::string&>(),
           py::arg("name"), py::arg("param_name"), py::arg("rows"), py::arg("cols"),
           py::arg("options_json"))
      .def("step", &PyOptimizer::step, py::arg("param").noconvert(), py::arg("grad").noconvert())
      .def("state", [](py::object self) { return self.cast<PyOptimizer&>().state(self); })
      .def_property("step_count", &PyOptimizer::step_count, &PyOptimizer::set_step_count)
      .def("set_lr_scale", &PyOptimizer::set_lr_scale)
      .def("state_bytes", &PyOptimizer::state_bytes);
}
