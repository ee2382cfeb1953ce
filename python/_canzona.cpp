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
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "canzona/comm/mpi.h"
#include "canzona/comm/timeout.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/common/hex.h"
#include "canzona/cost/calibration.h"
#include "canzona/cost/cost.h"
#include "canzona/engine/engine.h"
#include "canzona/engine/engine_set.h"
#include "canzona/engine/trace.h"
#include "canzona/launch/job.h"
#include "canzona/launch/plan_check.h"
#include "canzona/model/load.h"
#include "canzona/optim/bf16_products.h"
#include "canzona/optim/optimizer.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan.h"
#include "canzona/plan/plan_report.h"
#include "canzona/train/parallel_checkpoint.h"

namespace py = pybind11;

namespace canzona::python {
namespace {

// The planning options of `canzona.plan`: `canzona plan`'s flags (launch::PlanningArgs: the same
// names with '_' for '-', the same defaults, the same mapping), so a plan made here has the CLI's
// plan_hash; plus the strategy and the cost model's optimizer knobs.
struct PlanArgs : launch::PlanningArgs {
  std::string strategy = "lb-asc";
  std::optional<int> ns_steps, precondition_frequency;
  std::optional<std::int64_t> max_precond_dim;
};

launch::JobOptions job_of(const PlanArgs& a) {
  CANZONA_REQUIRE(a.bucket_size >= 0, "bucket_size must be >= 0, 0 = Megatron default (got ",
                  a.bucket_size, ")");
  launch::JobOptions o;
  launch::apply_planning_args(a, o, DimNames::kKeywords);
  return o;
}

// `model`: a str (preset, HF config.json, param-list file: what --model takes) or a dict in the
// param-list format (model/load.h), validated for `tp`.
model::ModelSpec load_model(const py::object& model_arg, const launch::JobOptions& job, int tp) {
  if (py::isinstance<py::str>(model_arg))
    return model::load_model(model_arg.cast<std::string>(), launch::build_options(job));
  const std::string text = py::module_::import("json").attr("dumps")(model_arg).cast<std::string>();
  model::ModelSpec model = model::param_list_from_json(nlohmann::json::parse(text), "params");
  model::validate(model, tp);
  return model;
}

// `model`: as load_model. Returns the plan JSON of `canzona plan --json` as text.
std::string make_plan_json(const py::object& model_arg, const PlanArgs& a) {
  const launch::JobOptions job = job_of(a);
  plan::PlanOptions options = launch::plan_options(job, plan::parse_strategy(a.strategy));
  plan::check_zero_stage(options.layout.zero_stage, std::span(&options.strategy, 1));
  CANZONA_REQUIRE(options.cost.kind != cost::CostKind::kCalibrated || !a.calibration.empty(),
                  "cost 'calibrated' needs calibration=FILE (written by canzona bench-kernels)");
  cost::OptimizerFlags flags;
  flags.ns_steps = a.ns_steps;
  flags.precondition_frequency = a.precondition_frequency;
  flags.max_precond_dim = a.max_precond_dim;
  cost::set_matrix_optimizer(options.cost, a.optimizer, flags);
  plan::validate_options(options);
  model::ModelSpec model = load_model(model_arg, job, a.dims.tp);
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

// MPI for this process: started by the first DistributedEngine, ended by mpi_finalize() (the
// package calls it at exit, after closing every engine).
std::unique_ptr<comm::MpiSession>& mpi_session() {
  static std::unique_ptr<comm::MpiSession> session;
  return session;
}

// Element i of a span as a NumPy array of `shape` that views it (no copy), kept alive by `owner`.
py::array_t<float> view(std::span<float> values, const std::vector<std::int64_t>& shape,
                        py::handle owner) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
  py::ssize_t stride = sizeof(float);
  for (std::size_t k = shape.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= static_cast<py::ssize_t>(shape[k]);
  }
  return py::array_t<float>(dims, strides, values.data(), owner);
}

// The same for a buffer of either dtype: fp32 as float32, bf16 as int16 holding the bits (NumPy
// has no bfloat16; canzona.torch views it with torch's .view(torch.bfloat16)).
py::array typed_view(TypedSpan values, const std::vector<std::int64_t>& shape, py::handle owner) {
  if (values.dtype() == DType::kF32) return view(values.as<float>(), shape, owner);
  CANZONA_CHECK(values.dtype() == DType::kBF16, "typed_view: unknown dtype");
  std::vector<py::ssize_t> dims(shape.begin(), shape.end()), strides(shape.size());
  py::ssize_t stride = sizeof(std::int16_t);
  for (std::size_t k = shape.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= static_cast<py::ssize_t>(shape[k]);
  }
  return py::array_t<std::int16_t>(dims, strides, reinterpret_cast<std::int16_t*>(values.data()),
                                   owner);
}

// A NumPy array the Python side passes for a tensor's memory (contiguous, writeable): float32,
// or int16 holding bf16 bits (canzona.torch passes a bf16 tensor as .view(torch.int16)).
TypedSpan typed_array(py::array& a, const char* what) {
  CANZONA_REQUIRE((a.flags() & py::array::c_style) != 0 && a.writeable(), what,
                  ": the array must be contiguous and writeable");
  // py::isinstance<array_t<T>> compares dtypes through NumPy's API (the descriptor's fields
  // moved in NumPy 2, which an older pybind11's dtype::kind() reads directly).
  if (py::isinstance<py::array_t<float>>(a)) return {a.mutable_data(), a.size(), DType::kF32};
  if (py::isinstance<py::array_t<std::int16_t>>(a))
    return {a.mutable_data(), a.size(), DType::kBF16};
  throw UsageError(canzona::str(what, ": float32 or bfloat16 values only (got NumPy dtype ",
                                py::cast<std::string>(a.dtype().attr("name")), ")"));
}

// The DP x TP grid of this MPI job (comm/grid.h), made once by canzona.torch.parallel.init before
// the model (TP layers need their rank to shape their params), with the TP collectives the TP
// layers' autograd functions call, and, when asked for (ep >= 1), Megatron's expert groups with
// the EP collectives a MoE block's dispatch and combine call. Deterministic reductions (rank
// order), as the engine's.
class ParallelGrid {
 public:
  // ep = 0: no expert groups.
  ParallelGrid(int dp, int tp, int ep, int etp) {
    const ParallelDims dims{dp, tp, 1, ep == 0 ? 1 : ep, etp};
    dims.check_world(comm::launched_world_size(), DimNames::kKeywords);
    if (!mpi_session()) mpi_session() = std::make_unique<comm::MpiSession>();
    grid_ = comm::make_mpi_grid(dims, comm::ReduceMode::kDeterministic);
    if (ep != 0)
      experts_ = std::make_unique<comm::ExpertGroups>(
          comm::make_mpi_expert_groups(*grid_, comm::ReduceMode::kDeterministic));
  }
  // This rank's expert groups, or null when the grid was made without.
  comm::ExpertGroups* experts() { return experts_.get(); }
  comm::ExpertGroups& expert_groups() {
    grid();
    CANZONA_REQUIRE(experts_ != nullptr,
                    "the parallel grid has no expert groups (canzona.torch.parallel.init(ep=...))");
    return *experts_;
  }
  int ep() { return experts() ? grid().dims().ep : 0; }
  int etp() { return experts() ? grid().dims().etp : 0; }
  int ep_rank() { return expert_groups().coord.ep; }
  int etp_rank() { return expert_groups().coord.etp; }
  int edp() { return expert_groups().grid->dims().dp; }
  int edp_rank() { return expert_groups().coord.edp; }
  // All-to-All over the EP group: segment r of `send` (send_counts[r] elements, in rank order)
  // goes to EP rank r; `recv` receives what every rank sent here, in rank order (recv_counts[r]
  // elements from r).
  // Both arrays of one dtype (typed_array's: float32 or bf16 bits as int16).
  void ep_all_to_all(py::array send, const std::vector<std::int64_t>& send_counts, py::array recv,
                     const std::vector<std::int64_t>& recv_counts) {
    comm::ExpertGroups& g = expert_groups();
    const auto n = static_cast<std::size_t>(grid().dims().ep);
    CANZONA_REQUIRE(send_counts.size() == n && recv_counts.size() == n,
                    "ep_all_to_all: send_counts and recv_counts need one count per EP rank (", n,
                    ")");
    const TypedSpan in = typed_array(send, "ep_all_to_all: send");
    const TypedSpan out = typed_array(recv, "ep_all_to_all: recv");
    CANZONA_REQUIRE(in.dtype() == out.dtype(), "ep_all_to_all: send is ", to_string(in.dtype()),
                    " but recv ", to_string(out.dtype()));
    std::vector<std::int64_t> send_displs(n), recv_displs(n);
    std::int64_t sent = 0, received = 0;
    for (std::size_t r = 0; r < n; ++r) {
      CANZONA_REQUIRE(send_counts[r] >= 0 && recv_counts[r] >= 0, "ep_all_to_all: send_counts[", r,
                      "] = ", send_counts[r], " and recv_counts[", r, "] = ", recv_counts[r],
                      " must be >= 0");
      send_displs[r] = sent;
      recv_displs[r] = received;
      sent += send_counts[r];
      received += recv_counts[r];
    }
    CANZONA_REQUIRE(sent == send.size(), "ep_all_to_all: send has ", send.size(),
                    " elements, send_counts sum to ", sent);
    CANZONA_REQUIRE(received == recv.size(), "ep_all_to_all: recv has ", recv.size(),
                    " elements, recv_counts sum to ", received);
    CANZONA_REQUIRE(n > 1 || sent == received, "ep_all_to_all: EP 1 sends ", sent,
                    " elements to itself but recv_counts takes ", received);
    py::gil_scoped_release release;
    if (g.ep == nullptr || n == 1) {
      std::memcpy(out.data(), in.data(), static_cast<std::size_t>(in.size_bytes()));
    } else {
      g.ep->all_to_all(in, send_counts, send_displs, out, recv_counts, recv_displs).wait();
    }
  }
  // Every EP rank's bytes, in EP rank order (control data: the routed counts).
  std::vector<py::bytes> ep_all_gather_bytes(const std::string& bytes) {
    comm::ExpertGroups& g = expert_groups();
    if (g.ep == nullptr) return {py::bytes(bytes)};
    return as_py_bytes(g.ep->all_gather_bytes(std::span<const std::byte>(
        reinterpret_cast<const std::byte*>(bytes.data()), bytes.size())));
  }
  // Every world rank's bytes, in world rank order (agreement before any engine exists).
  std::vector<py::bytes> world_all_gather_bytes(const std::string& bytes) {
    return as_py_bytes(grid().world().all_gather_bytes(std::span<const std::byte>(
        reinterpret_cast<const std::byte*>(bytes.data()), bytes.size())));
  }
  comm::Grid& grid() {
    CANZONA_REQUIRE(grid_ != nullptr, "the parallel grid was closed");
    return *grid_;
  }
  int dp() { return grid().dims().dp; }
  int tp() { return grid().dims().tp; }
  int dp_rank() { return grid().coord().dp; }
  int tp_rank() { return grid().coord().tp; }
  // Sum over the TP group, in place (fp32, or bf16: summed in fp32 in TP rank order and rounded
  // once, comm/communicator.h).
  void tp_all_reduce(py::array values) {
    const TypedSpan all = typed_array(values, "tp_all_reduce: values");
    py::gil_scoped_release release;
    grid().tp().all_reduce(all, all).wait();
  }
  // Every TP rank's `send` (equal sizes, one dtype) into `recv`, in TP rank order.
  void tp_all_gather(py::array send, py::array recv) {
    comm::Communicator& tp = grid().tp();
    CANZONA_REQUIRE(recv.size() == send.size() * tp.size(), "tp_all_gather: recv has ", recv.size(),
                    " elements, not ", tp.size(), " x ", send.size());
    const TypedSpan in = typed_array(send, "tp_all_gather: send");
    const TypedSpan out = typed_array(recv, "tp_all_gather: recv");
    CANZONA_REQUIRE(in.dtype() == out.dtype(), "tp_all_gather: send is ", to_string(in.dtype()),
                    " but recv ", to_string(out.dtype()));
    std::vector<std::int64_t> counts(static_cast<std::size_t>(tp.size()), send.size()), displs;
    for (int r = 0; r < tp.size(); ++r) displs.push_back(r * send.size());
    py::gil_scoped_release release;
    tp.all_gather(in, out, counts, displs).wait();
  }
  void close() {
    experts_.reset();
    grid_.reset();
  }

 private:
  static std::vector<py::bytes> as_py_bytes(const std::vector<std::vector<std::byte>>& all) {
    std::vector<py::bytes> out;
    for (const std::vector<std::byte>& b : all)
      out.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
    return out;
  }
  std::unique_ptr<comm::Grid> grid_;
  std::unique_ptr<comm::ExpertGroups> experts_;
};

// The engine set (engine/engine_set.h) under a Python model: the plan of `model` for the grid of
// this MPI job, the Megatron-layout buffers the Python side makes its params and grads views of
// (a MoE model's experts in the expert engine's, over the grid's expert groups), and the calls of
// a training step. Params are addressed by their index in the model; buckets by one number over
// both engines (the dense engine's first, then the expert engine's). One per optimizer; ZeRO-1 or
// ZeRO-3 (the client gathers and releases buckets: prefetch_params, wait_param_sync,
// release_params).
class DistributedEngine {
 public:
  DistributedEngine(ParallelGrid& grid, const py::object& model_arg, const PlanArgs& a,
                    const std::string& optimizer_options, const std::string& adamw_options,
                    bool pipeline)
      : grid_(&grid.grid()) {
    CANZONA_REQUIRE(a.dims.dp == grid_->dims().dp && a.dims.tp == grid_->dims().tp,
                    "dp x tp = ", a.dims.dp, " x ", a.dims.tp, " but the parallel grid is ",
                    grid_->dims().dp, " x ", grid_->dims().tp);
    launch::JobOptions job = job_of(a);
    job.optimizer_options = nlohmann::json::parse(optimizer_options);
    job.adamw_options = nlohmann::json::parse(adamw_options);
    job.pipeline = pipeline;
    launch::validate(job);
    const plan::Strategy strategy = plan::parse_strategy(a.strategy);
    plan::check_zero_stage(job.zero_stage, std::span(&strategy, 1));
    CANZONA_REQUIRE(job.cost != cost::CostKind::kCalibrated,
                    "cost 'calibrated' is not supported by DistributedOptimizer");
    model_ = load_model(model_arg, job, a.dims.tp);
    strategy_ = plan::to_string(strategy);
    optimizer_ = job.optimizer;
    const plan::PlanOptions options = launch::plan_options(job, strategy);
    plan::validate_options(options);
    if (a.dims.ep > 1 || a.dims.etp > 1 || model::has_experts(model_)) {
      comm::ExpertGroups* groups = grid.experts();
      CANZONA_REQUIRE(groups != nullptr, "model '", model_.name,
                      "' has expert params but the parallel grid has no expert groups "
                      "(canzona.torch.parallel.init(ep=...))");
      CANZONA_REQUIRE(grid_->dims().ep == a.dims.ep && grid_->dims().etp == a.dims.etp,
                      "ep x etp = ", a.dims.ep, " x ", a.dims.etp,
                      " but the parallel grid's expert groups are ", grid_->dims().ep, " x ",
                      grid_->dims().etp);
      CANZONA_REQUIRE(a.dims.etp == 1, "etp ", a.dims.etp,
                      ": DistributedOptimizer keeps each expert whole on its EP rank (expert TP "
                      "1), as canzona train does");
    }
    plan_ = plan::make_plan(model_, options);
    launch::validate_plan(model_, plan_, grid_->dims());
    launch::check_plan_agreement(grid_->world(), plan_);
    // The params' and gradients' dtypes are every rank's too (the plan hash need not show them):
    // one model cast to bf16, or given grad_reduce_in_fp32, on some ranks only would move 2-byte
    // elements against 4-byte ones.
    const std::vector<std::uint64_t> dtypes = grid_->world().all_gather_u64(
        static_cast<std::uint64_t>(job.precision) | (job.grad_reduce_in_fp32 ? 256u : 0u));
    for (std::size_t r = 1; r < dtypes.size(); ++r) {
      const auto param_dtype = [](std::uint64_t v) { return static_cast<DType>(v & 255u); };
      CANZONA_REQUIRE(param_dtype(dtypes[r]) == param_dtype(dtypes[0]),
                      "ranks disagree on the params' dtype: rank 0 has ",
                      to_string(param_dtype(dtypes[0])), ", rank ", r, " ",
                      to_string(param_dtype(dtypes[r])));
      CANZONA_REQUIRE(dtypes[r] == dtypes[0], "ranks disagree on grad_reduce_in_fp32: rank 0 has ",
                      dtypes[0] >= 256u ? "True" : "False", ", rank ", r, " ",
                      dtypes[r] >= 256u ? "True" : "False");
    }
    engines_ =
        std::make_unique<engine::EngineSet>(*grid_, model_, plan_, launch::engine_options(job),
                                            trace_, plan_.expert ? grid.experts() : nullptr);
    for (int m = 0; m < engines_->size(); ++m) {
      bucket_offset_.push_back(num_buckets_);
      num_buckets_ += static_cast<int>(engines_->member(m).engine->stage().layout.buckets.size());
    }
  }

  engine::EngineSet& engines() {
    CANZONA_REQUIRE(engines_ != nullptr, "the DistributedOptimizer was closed");
    return *engines_;
  }
  engine::Engine& engine() { return engines().dense(); }
  int num_buckets() const { return num_buckets_; }
  // EngineSet::params_fnv, equal on every rank: a dense model's replicas are equal; a MoE
  // model's EP ranks hold other experts, so their hashes are folded in world rank order.
  std::uint64_t params_fnv() {
    const std::uint64_t mine = engines().params_fnv();
    if (engines().size() == 1) return mine;
    const std::vector<std::uint64_t> all = grid_->world().all_gather_u64(mine);
    return fnv1a(all.data(), all.size() * sizeof(std::uint64_t));
  }
  int num_params() const { return static_cast<int>(model_.params.size()); }
  std::vector<std::int64_t> local_shape(int p) const {
    check_param(p);
    return model_.params[static_cast<std::size_t>(p)].local_shape(grid_->dims().tp);
  }
  // Param p's view (empty for another EP rank's expert).
  py::array param(py::object self, int p) {
    check_param(p);
    return typed_view(engines().param(p), held_shape(p), self);
  }
  py::array grad(py::object self, int p) {
    check_param(p);
    return typed_view(engines().grad(p), held_shape(p), self);
  }
  // "fp32" | "bf16": the param buffers' dtype.
  std::string precision() { return to_string(engines().dense().param_dtype()); }
  // "fp32" | "bf16": the gradient buffers' dtype (fp32 under grad_reduce_in_fp32).
  std::string grad_precision() { return to_string(engines().dense().grad_dtype()); }
  // The engine-set-wide bucket of p, or -1 when this rank holds none of it.
  int bucket_of(int p) {
    check_param(p);
    const engine::EngineSet::Slot s = engines().slot(p);
    if (s.member < 0) return -1;
    const int b = engines().member(s.member).engine->bucket_of(s.index);
    return b < 0 ? -1 : bucket_offset_[static_cast<std::size_t>(s.member)] + b;
  }
  // Bucket b as (engine, its bucket there).
  std::pair<engine::Engine*, int> bucket(int b) {
    CANZONA_REQUIRE(b >= 0 && b < num_buckets_, "bucket ", b, " outside [0, ", num_buckets_, ")");
    int m = static_cast<int>(bucket_offset_.size()) - 1;
    while (bucket_offset_[static_cast<std::size_t>(m)] > b) --m;
    return {engines().member(m).engine, b - bucket_offset_[static_cast<std::size_t>(m)]};
  }
  // Each engine's param buffer: (address, bytes), dense first.
  std::vector<std::pair<std::uintptr_t, std::size_t>> params_ranges() {
    std::vector<std::pair<std::uintptr_t, std::size_t>> out;
    for (int m = 0; m < engines().size(); ++m) {
      const ConstTypedSpan all = engines().member(m).engine->params();
      out.emplace_back(reinterpret_cast<std::uintptr_t>(all.data()),
                       static_cast<std::size_t>(all.size_bytes()));
    }
    return out;
  }
  // Copies DP rank 0's params to every DP rank (DistributedDataParallel's broadcast at
  // construction): one All-Gather per param where only rank 0 contributes; an expert's over
  // its expert DP group (every EP rank holds its own experts).
  void broadcast_params() {
    for (int p = 0; p < num_params(); ++p) {
      const engine::EngineSet::Slot s = engines().slot(p);
      if (s.member < 0) continue;
      comm::Communicator& dp = engines().member(s.member).grid->dp();
      std::vector<std::int64_t> counts(static_cast<std::size_t>(dp.size()), 0);
      const std::vector<std::int64_t> displs(counts.size(), 0);
      const TypedSpan values = engines().param(p);
      counts[0] = values.size();
      const ConstTypedSpan send = dp.rank() == 0 ? ConstTypedSpan(values) : values.subspan(0, 0);
      dp.all_gather(send, values, counts, displs).wait();
    }
  }
  // DP rank 0's values of any fp32 array (frozen params, buffers) in place on every DP rank.
  void broadcast_floats(py::array_t<float, 0> values) {
    CANZONA_REQUIRE((values.flags() & py::array::c_style) != 0 && values.writeable(),
                    "broadcast: the array must be contiguous and writeable");
    comm::Communicator& dp = grid_->dp();
    std::vector<std::int64_t> counts(static_cast<std::size_t>(dp.size()), 0);
    const std::vector<std::int64_t> displs(counts.size(), 0);
    counts[0] = values.size();
    std::span<float> all(values.mutable_data(), static_cast<std::size_t>(values.size()));
    py::gil_scoped_release release;
    dp.all_gather(dp.rank() == 0 ? std::span<const float>(all) : std::span<const float>(), all,
                  counts, displs)
        .wait();
  }
  // Every DP rank's bytes, in DP rank order, on every DP rank (control data).
  std::vector<py::bytes> all_gather_bytes(const std::string& bytes) {
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    const std::vector<std::vector<std::byte>> all =
        grid_->dp().all_gather_bytes(std::span<const std::byte>(data, bytes.size()));
    std::vector<py::bytes> out;
    for (const std::vector<std::byte>& b : all)
      out.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
    return out;
  }
  // DP rank 0's bytes, on every DP rank (control data: small tensors of other dtypes).
  py::bytes broadcast_bytes(const std::string& bytes) {
    comm::Communicator& dp = grid_->dp();
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    const std::vector<std::vector<std::byte>> all =
        dp.all_gather_bytes(std::span<const std::byte>(data, bytes.size()));
    return py::bytes(reinterpret_cast<const char*>(all[0].data()), all[0].size());
  }
  py::list optimizer_state(py::object self) {
    py::list out;
    for (const engine::StateTensor& t : engines().optimizer_state()) {
      const std::vector<std::int64_t> shape = t.begin < t.end
                                                  ? std::vector<std::int64_t>{t.end - t.begin}
                                                  : std::vector<std::int64_t>{t.rows, t.cols};
      out.append(
          py::make_tuple(t.param, t.state, t.piece, t.begin, t.end, view(t.values, shape, self)));
    }
    return out;
  }
  // The model-space checkpoint (train/parallel_checkpoint.h, params under their own names):
  // save_dir/step-<N> at the engine's step count N, `run` (JSON) recorded in trainer.json.
  // `hf_config` (JSON, or empty): a Hugging Face config written as config.json (the param list
  // then in params.json), so transformers' from_pretrained reads the checkpoint. Collective;
  // returns the directory.
  std::string save(const std::string& save_dir, const std::string& run,
                   const std::string& hf_config) {
    train::SaveContext context;
    if (!hf_config.empty()) context.hf_config = nlohmann::json::parse(hf_config);
    context.spec = &model_;
    context.plan = &plan_;
    ckpt::Manifest& m = context.manifest;
    m.step = engines().step_count();
    m.strategy = strategy_;
    m.dp = grid_->dims().dp;
    m.tp = grid_->dims().tp;
    m.optimizer = optimizer_;
    m.plan_hash = hex64(plan::plan_hash(plan_));
    m.run = nlohmann::json::parse(run);
    return train::save_checkpoint(engines(), context, save_dir);
  }
  // Restores the checkpoint `path` names (a checkpoint or a save directory: its newest) under
  // this engine's grid and plan, whatever DP, TP and strategy wrote it. Collective; returns the
  // checkpoint's directory, step and recorded `run` (JSON).
  std::tuple<std::string, std::int64_t, std::string> load(const std::string& path) {
    const auto [dir, manifest] = train::resolve_checkpoint(grid_->world(), path);
    train::load_checkpoint(engines(), model_, nullptr, optimizer_, dir, manifest);
    return {dir, manifest.step, manifest.run.dump()};
  }
  void close() { engines_.reset(); }
  bool is_matrix(int p) const {
    check_param(p);
    return model_.params[static_cast<std::size_t>(p)].is_matrix();
  }
  int dp_rank() const { return grid_->coord().dp; }
  int tp_rank() const { return grid_->coord().tp; }
  std::string plan_json() const {
    plan::PlanRun run;
    run.plan = plan_;
    run.metrics = plan::compute_metrics(model_, plan_);
    return plan::plan_json(model_, run).dump();
  }

 private:
  void check_param(int p) const {
    CANZONA_REQUIRE(p >= 0 && p < num_params(), "param index ", p, " outside [0, ", num_params(),
                    ")");
  }
  // The shape of what this rank holds of p: its TP-local shape (an expert: whole), or {0} for
  // another EP rank's expert.
  std::vector<std::int64_t> held_shape(int p) {
    if (engines().slot(p).member < 0) return {0};
    return local_shape(p);
  }

  model::ModelSpec model_;
  plan::Plan plan_;
  std::string strategy_, optimizer_;  // the manifest's names
  engine::Trace trace_;
  comm::Grid* grid_;  // the ParallelGrid's (kept alive by the Python object)
  std::unique_ptr<engine::EngineSet> engines_;
  std::vector<int> bucket_offset_;  // [engine set member] its first bucket's number
  int num_buckets_ = 0;
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
  py::class_<PlanArgs> plan_args(m, "PlanArgs");
  // The grid keywords are the fields of launch::PlanningArgs::dims (canzona::ParallelDims).
  using canzona::ParallelDims;
  for (const auto& entry : {std::pair{"dp", &ParallelDims::dp}, std::pair{"tp", &ParallelDims::tp},
                            std::pair{"pp", &ParallelDims::pp}, std::pair{"ep", &ParallelDims::ep},
                            std::pair{"etp", &ParallelDims::etp}}) {
    int ParallelDims::*field = entry.second;
    plan_args.def_property(
        entry.first, [field](const PlanArgs& a) { return a.dims.*field; },
        [field](PlanArgs& a, int v) { a.dims.*field = v; });
  }
  plan_args.def(py::init<>())
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
      .def_readwrite("precision", &PlanArgs::precision)
      .def_readwrite("grad_reduce_in_fp32", &PlanArgs::grad_reduce_in_fp32)
      .def_readwrite("ns_dtype", &PlanArgs::ns_dtype)
      .def_readwrite("ns_algorithm", &PlanArgs::ns_algorithm)
      .def_readwrite("calibration", &PlanArgs::calibration)
      .def_readwrite("alpha", &PlanArgs::alpha)
      .def_readwrite("cmax_mb", &PlanArgs::cmax_mb)
      .def_readwrite("bucket_size", &PlanArgs::bucket_size)
      .def_readwrite("ns_steps", &PlanArgs::ns_steps)
      .def_readwrite("precondition_frequency", &PlanArgs::precondition_frequency)
      .def_readwrite("max_precond_dim", &PlanArgs::max_precond_dim);
  m.def("plan_json", &canzona::python::make_plan_json, py::arg("model"), py::arg("args"));
  // The strategy table (plan/strategy.h), in design order: name, one line about it, whether it
  // runs under ZeRO-3, and which ranks share its optimizer work ("none", "dp" or "grid").
  m.def("strategies", [] {
    py::list out;
    for (const canzona::plan::StrategyInfo& s : canzona::plan::strategy_table()) {
      py::dict row;
      row["name"] = s.name;
      row["about"] = s.about;
      row["zero3"] = s.shards_params;
      row["compute_share"] = s.compute_share == canzona::plan::ComputeShare::kNone ? "none"
                             : s.compute_share == canzona::plan::ComputeShare::kDp ? "dp"
                                                                                   : "grid";
      out.append(row);
    }
    return out;
  });
  // Which library runs Muon's bf16 Newton-Schulz products here (optim/bf16_products.h).
  m.def(
      "bf16_backend_report", [] { return canzona::optim::bf16_backend_report(); },
      "Which library runs Muon's bf16 Newton-Schulz products on this CPU: oneDNN's bf16 matmul, "
      "or the operands widened onto OpenBLAS (docs/optimizers.md).");
  m.def("effective_options", [](const std::string& name, const std::string& options_json) {
    return canzona::optim::effective_options(name, nlohmann::json::parse(options_json)).dump();
  });
  using canzona::python::DistributedEngine;
  using Release = py::call_guard<py::gil_scoped_release>;
  using canzona::python::ParallelGrid;
  py::class_<ParallelGrid>(m, "ParallelGrid")
      .def(py::init<int, int, int, int>(), py::arg("dp"), py::arg("tp"), py::arg("ep") = 0,
           py::arg("etp") = 1)
      .def_property_readonly("dp", &ParallelGrid::dp)
      .def_property_readonly("ep", &ParallelGrid::ep)
      .def_property_readonly("etp", &ParallelGrid::etp)
      .def_property_readonly("ep_rank", &ParallelGrid::ep_rank)
      .def_property_readonly("etp_rank", &ParallelGrid::etp_rank)
      .def_property_readonly("edp", &ParallelGrid::edp)
      .def_property_readonly("edp_rank", &ParallelGrid::edp_rank)
      .def("ep_all_to_all", &ParallelGrid::ep_all_to_all, py::arg("send").noconvert(),
           py::arg("send_counts"), py::arg("recv").noconvert(), py::arg("recv_counts"))
      .def("ep_all_gather_bytes", &ParallelGrid::ep_all_gather_bytes)
      .def("world_all_gather_bytes", &ParallelGrid::world_all_gather_bytes)
      .def_property_readonly("tp", &ParallelGrid::tp)
      .def_property_readonly("dp_rank", &ParallelGrid::dp_rank)
      .def_property_readonly("tp_rank", &ParallelGrid::tp_rank)
      .def("tp_all_reduce", &ParallelGrid::tp_all_reduce, py::arg("values").noconvert())
      .def("tp_all_gather", &ParallelGrid::tp_all_gather, py::arg("send").noconvert(),
           py::arg("recv").noconvert())
      .def("close", &ParallelGrid::close);
  py::class_<DistributedEngine>(m, "DistributedEngine")
      .def(py::init<ParallelGrid&, const py::object&, const PlanArgs&, const std::string&,
                    const std::string&, bool>(),
           py::arg("grid"), py::arg("model"), py::arg("args"), py::arg("optimizer_options"),
           py::arg("adamw_options"), py::arg("pipeline") = true, py::keep_alive<1, 2>())
      .def_property_readonly("num_params", &DistributedEngine::num_params)
      .def_property_readonly("dp_rank", &DistributedEngine::dp_rank)
      .def_property_readonly("tp_rank", &DistributedEngine::tp_rank)
      .def("local_shape", &DistributedEngine::local_shape)
      .def("param",
           [](py::object self, int p) { return self.cast<DistributedEngine&>().param(self, p); })
      .def("grad",
           [](py::object self, int p) { return self.cast<DistributedEngine&>().grad(self, p); })
      .def_property_readonly("precision", &DistributedEngine::precision)
      .def_property_readonly("grad_precision", &DistributedEngine::grad_precision)
      .def("is_matrix", [](DistributedEngine& d, int p) { return d.is_matrix(p); })
      .def("bucket_of", &DistributedEngine::bucket_of)
      .def_property_readonly("num_buckets", &DistributedEngine::num_buckets)
      .def_property_readonly("zero_stage",
                             [](DistributedEngine& d) { return to_int(d.engine().zero_stage()); })
      // Each engine's param buffer as (address, bytes), dense first: a tensor whose data lies
      // inside one is (a view of) a param the engine set holds.
      .def_property_readonly("params_ranges", &DistributedEngine::params_ranges)
      .def(
          "prefetch_params",
          [](DistributedEngine& d, int b) {
            const auto [e, k] = d.bucket(b);
            e->prefetch_params(k);
          },
          Release())
      .def(
          "release_params",
          [](DistributedEngine& d, int b) {
            const auto [e, k] = d.bucket(b);
            e->release_params(k);
          },
          Release())
      .def("memory_held",
           [](DistributedEngine& d) {
             const canzona::engine::MemoryHeld m = d.engines().memory_held();
             return py::dict(py::arg("params_bytes") = m.params_bytes,
                             py::arg("grads_bytes") = m.grads_bytes,
                             py::arg("optimizer_state_bytes") = m.optimizer_state_bytes,
                             py::arg("resident_bytes") = m.resident_bytes);
           })
      .def("broadcast_params", &DistributedEngine::broadcast_params, Release())
      .def(
          "init_main_params", [](DistributedEngine& d) { d.engines().init_main_params(); },
          Release())
      .def("grad_ready", [](DistributedEngine& d, int p) { d.engines().grad_ready(p); })
      .def("progress", [](DistributedEngine& d) { d.engines().progress(); })
      .def(
          "finish_grad_sync", [](DistributedEngine& d) { return d.engines().finish_grad_sync(); },
          Release())
      .def("step",
           [](DistributedEngine& d) {
             const canzona::engine::StepTimes t = d.engines().step();
             return py::dict(py::arg("opt_ms") = t.opt, py::arg("opt_compute_ms") = t.opt_compute,
                             py::arg("opt_comm_ms") = t.opt_comm);
           })
      .def(
          "start_param_sync", [](DistributedEngine& d) { return d.engines().start_param_sync(); },
          Release())
      .def(
          "wait_param_sync",
          [](DistributedEngine& d, int b) {
            const auto [e, k] = d.bucket(b);
            return e->wait_param_sync(k);
          },
          Release())
      .def(
          "finish", [](DistributedEngine& d) { d.engines().finish(); }, Release())
      .def("zero_grads", [](DistributedEngine& d) { d.engines().zero_grads(); })
      .def("set_lr_scales",
           [](DistributedEngine& d, double matrix, double elementwise) {
             d.engines().set_lr_scales(matrix, elementwise);
           })
      .def_property(
          "step_count", [](DistributedEngine& d) { return d.engines().step_count(); },
          [](DistributedEngine& d, std::int64_t s) { d.engines().set_step_count(s); })
      .def("params_fnv", &DistributedEngine::params_fnv, Release())
      .def("optimizer_state",
           [](py::object self) { return self.cast<DistributedEngine&>().optimizer_state(self); })
      .def("set_optimizer_state",
           [](DistributedEngine& d, const std::string& param, const std::string& state, int piece,
              std::int64_t begin, py::array_t<float, py::array::c_style | py::array::forcecast> v) {
             d.engines().set_optimizer_state(param, state, piece, begin,
                                             std::span<const float>(v.data(), v.size()));
           })
      .def("broadcast_floats", &DistributedEngine::broadcast_floats, py::arg("values").noconvert())
      .def("broadcast_bytes", &DistributedEngine::broadcast_bytes)
      .def("all_gather_bytes", &DistributedEngine::all_gather_bytes)
      .def("plan_json", &DistributedEngine::plan_json)
      .def("save", &DistributedEngine::save, py::arg("save_dir"), py::arg("run"),
           py::arg("hf_config") = std::string(), Release())
      .def("load", &DistributedEngine::load, py::arg("path"), Release())
      .def("close", &DistributedEngine::close);
  m.def("mpi_finalize", [] { canzona::python::mpi_session().reset(); });
  m.def("launched_world_size", [] { return canzona::comm::launched_world_size(); });
  m.def("set_collective_timeout", [](double seconds) {
    canzona::comm::set_collective_timeout(seconds, "collective_timeout");
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
