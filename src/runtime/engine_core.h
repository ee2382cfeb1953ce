// The Engine's state and its three composable parts (engine.h): the DP gradient sync
// (dp_sync.cpp), the TP exchange (tp_exchange.cpp) and the param sync (param_sync.cpp). Each part
// is an interface with one implementation per plan::StrategyParts value; a strategy is a
// combination of them (make_* below), so a new strategy is a new combination, not a new branch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "canzona/comm/request.h"
#include "canzona/optim/optimizer.h"
#include "canzona/runtime/engine.h"
#include "canzona/runtime/shard.h"
#include "timing.h"

namespace canzona::runtime {

// Where a param lives in the stage buffer (TP-local elements).
struct ParamPlace {
  int bucket = -1;
  std::int64_t offset = 0;       // first element in the buffer
  std::int64_t slot_offset = 0;  // first element relative to its bucket
  std::int64_t numel = 0;
};

// A matrix task this rank computes.
struct ComputedTask {
  int task = 0;  // index into StagePlan::tasks
  int param = 0;
  int piece = -1;
  plan::TaskRole role = plan::TaskRole::kLocal;
  std::vector<ShardMap> maps;  // [tp rank]; kLocal: one map, this rank's
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> main;  // (rows, cols) fp32 main param of the task matrix
};

// AdamW on a contiguous slice of an element-wise param.
struct ElementwiseSlice {
  int param = 0;
  std::int64_t begin = 0;       // local elements [begin, begin + numel) of the param
  float* values = nullptr;      // in params
  const float* grad = nullptr;  // reduced gradient (DpGradSync::reduced_grad)
  std::int64_t numel = 0;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// A collective in flight with its trace label.
struct Pending {
  comm::Request request;
  std::string name;
  double posted_us = 0.0;
};

class DpGradSync;
class TpExchangePart;
class ParamSyncPart;

struct Engine::Core {
  comm::Grid& grid;
  const model::ModelSpec& model;
  const plan::StagePlan& stage;
  EngineOptions options;
  Trace& trace;
  plan::RankPlan work;  // what this rank does (plan::decode_rank)
  int dp_rank, tp_rank, dp, tp;

  std::vector<ParamPlace> place;  // [model param]
  std::vector<float> params;      // (layout.numel)
  std::vector<float> grads;       // (layout.numel)
  std::vector<ComputedTask> computed;
  std::vector<int> computed_of_task;  // [stage task] index into computed, -1 when not computed
  std::vector<ElementwiseSlice> elementwise;
  std::vector<float> scratch;  // largest task matrix: its full gradient
  PhaseClock clock;

  std::vector<int> ready;         // [bucket] params marked ready this step
  std::vector<char> param_ready;  // [model param]
  bool main_loaded = false;       // init_main_params() ran
  bool grads_synced = false;      // finish_grad_sync() ran since the last step()
  std::unique_ptr<DpGradSync> dp_sync;
  std::unique_ptr<TpExchangePart> tp_exchange;
  std::unique_ptr<ParamSyncPart> param_sync;

  Core(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
       const EngineOptions& options, Trace& trace);
  ~Core();

  float* local_param(int param) { return params.data() + place[param].offset; }
  // Waits for `pending` if in flight, adds the wall time to exposed_ms and traces it.
  void wait(Pending& pending, double& exposed_ms);
  // One optimizer step of task t given its full gradient (rows x cols, contiguous); writes this
  // rank's rows of the updated main param into params unless the task is hosted.
  void step_task(ComputedTask& t, const float* full_grad);
  // Reduced local gradient of `param` (only where this rank holds it reduced).
  const float* reduced_grad(int param, std::int64_t slot_element = 0) const;
};

// DP gradient sync: one collective per bucket, posted when its last param is ready.
class DpGradSync {
 public:
  virtual ~DpGradSync() = default;
  // Scales bucket b by 1/DP and posts its collective.
  virtual void post(int bucket) = 0;
  // Request::test() on every collective in flight.
  virtual void progress() = 0;
  // Waits for every bucket; returns the exposed ms.
  virtual double wait_all() = 0;
  // The reduced gradient of `param` from element `slot_element` of its slot on, where this rank
  // holds it; CHECK-fails elsewhere.
  virtual const float* reduced_grad(int param, std::int64_t slot_element) const = 0;
  virtual std::vector<GradRange> reduced() const = 0;
  virtual bool sharded() const = 0;
};

// TP exchange of the optimizer step: how the ranks of a TP group get the full gradients of the
// TP-split matrices they compute and the updated rows back.
class TpExchangePart {
 public:
  virtual ~TpExchangePart() = default;
  // The optimizer step: posts the first exchange, runs `local` (element-wise slices and local
  // tasks) while it travels, then completes the exchange and computes its tasks. Adds exposed
  // waits to comm_ms.
  virtual void step(const std::function<void()>& local, double& comm_ms) = 0;
  // Setup: fills the main params of the tasks it computes from the params (no optimizer step).
  virtual void init_main() = 0;
};

// Param sync after the optimizer step.
class ParamSyncPart {
 public:
  virtual ~ParamSyncPart() = default;
  // Posts (or runs and waits) the sync; returns the exposed ms.
  virtual double start() = 0;
  // Waits for bucket b's sync; returns the exposed ms.
  virtual double wait(int bucket) = 0;
};

std::unique_ptr<DpGradSync> make_dp_sync(plan::DpSync kind, Engine::Core& core);
std::unique_ptr<TpExchangePart> make_tp_exchange(plan::TpExchange kind, Engine::Core& core);
std::unique_ptr<ParamSyncPart> make_param_sync(plan::ParamSync kind, Engine::Core& core);

}  // namespace canzona::runtime
