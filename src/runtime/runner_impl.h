// StrategyRunner's state, shared by runner.cpp (step loop, DP collectives), runner_setup.cpp
// (work lists from the plan) and tp_exchange.cpp (TP All-Gather and micro-group pipeline).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canzona/comm/request.h"
#include "canzona/optim/optimizer.h"
#include "canzona/runtime/runner.h"
#include "canzona/runtime/shard.h"
#include "timing.h"
#include "workload.h"

namespace canzona::runtime {

// Where a param lives in the stage buffer (TP-local elements).
struct ParamPlace {
  int bucket = -1;
  std::int64_t offset = 0;       // first element in the buffer
  std::int64_t slot_offset = 0;  // first element relative to its bucket
  std::int64_t numel = 0;
};

// How a computed task gets its full gradient.
enum class TaskSource {
  kLocal,     // the local shard is the whole matrix (tp == 1 or a replicated param)
  kTpGather,  // sc / layerwise: fused TP All-Gather of the param's gradient shards
  kHosted,    // asc / lb-asc: this rank hosts it in a micro group
};

// A matrix task this rank computes.
struct ComputedTask {
  int task = 0;  // index into StagePlan::tasks
  int param = 0;
  TaskSource source = TaskSource::kLocal;
  std::vector<ShardMap> maps;  // [tp rank]; kLocal: one map, this rank's
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> main;  // (rows, cols) fp32 main param of the task matrix
};

// AdamW on a contiguous slice of an element-wise param.
struct ElementwiseSlice {
  float* param = nullptr;       // in params
  const float* grad = nullptr;  // in grads (All-Reduce) or shard (Reduce-Scatter)
  std::int64_t numel = 0;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// sc / layerwise with tp > 1: one fused TP All-Gather per step of the local gradient shards of
// every TP-split matrix param this rank computes; block = floats per TP rank.
struct TpGatherSet {
  std::vector<int> params;              // stage order
  std::vector<std::int64_t> offset_of;  // [model param] offset in a block, -1 when not in the set
  std::int64_t block = 0;
  std::vector<float> send;                   // (block)
  std::vector<float> recv;                   // (tp, block)
  std::vector<std::int64_t> counts, displs;  // [tp rank]
};

// This rank's shard of one task of a micro group.
struct GroupPart {
  int param = 0;
  ShardMap map;
  std::int64_t offset = 0;  // in the gather send buffer == in the scatter receive buffer
};

// A task of the group this rank hosts.
struct GroupHosted {
  int computed = 0;                   // index into Impl::computed
  std::vector<std::int64_t> offsets;  // [tp rank] in the gather receive buffer == scatter send
};

// A collective in flight with its trace label.
struct Pending {
  comm::Request request;
  std::string name;
  double posted_us = 0.0;
};

// One micro group: gather = every rank's shards to the hosts; scatter = updated shards back.
struct GroupExchange {
  int index = 0;
  std::vector<GroupPart> parts;
  std::vector<GroupHosted> hosted;
  std::vector<std::int64_t> send_counts, send_displs;  // gather; scatter receives with these
  std::vector<std::int64_t> recv_counts, recv_displs;  // gather; scatter sends with these
  std::vector<float> send, recv;                       // gather buffers
  std::vector<float> back_send, back_recv;             // scatter buffers (sizes of recv and send)
  Pending gather, scatter;
};

// layerwise: every DP rank's owned params, concatenated, All-Gather-v over DP.
struct ParamAllGather {
  std::vector<std::vector<int>> params;  // [dp rank] owned params, stage order
  std::vector<std::int64_t> counts, displs;
  std::vector<float> buffer;
};

struct StrategyRunner::Impl {
  comm::Grid& grid;
  const model::ModelSpec& model;
  const plan::Plan& plan;
  const plan::StagePlan& stage;
  RunOptions options;
  Trace& trace;
  plan::Strategy strategy;
  int dp_rank, tp_rank, dp, tp;
  bool reduce_scatter;  // asc / lb-asc

  std::vector<ParamPlace> place;                          // [model param]
  std::vector<float> params;                              // (layout.numel)
  std::vector<float> grads;                               // (layout.numel)
  std::vector<float> shard;                               // (sum of own counts)
  std::vector<std::int64_t> shard_offset;                 // [bucket]
  std::vector<std::vector<std::int64_t>> counts, displs;  // [bucket][dp rank]

  std::vector<ComputedTask> computed;
  std::vector<int> computed_of_task;  // [stage task] index into computed, -1 when not computed
  std::vector<ElementwiseSlice> elementwise;
  TpGatherSet tp_gather;
  std::vector<GroupExchange> groups;
  ParamAllGather layerwise_sync;
  std::vector<float> scratch;  // largest task matrix: its full gradient

  std::vector<Pending> grad_sync;                     // [bucket]
  std::vector<Pending> param_sync;                    // [bucket]
  std::vector<double> forward_flops, backward_flops;  // [bucket] simulated compute
  Workload workload;
  PhaseClock clock;
  StepBytes step_bytes;  // of the last step

  Impl(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
       const RunOptions& options, Trace& trace);

  // runner_setup.cpp
  void build_places();
  void build_dp_collectives();
  void build_tasks();
  void build_elementwise();
  void build_layerwise_sync();
  void init_params();
  void init_main_params();

  // Reduced local gradient of `param` (only where this rank holds it reduced).
  const float* reduced_grad(int param, std::int64_t slot_element = 0) const;
  float* local_param(int param) { return params.data() + place[param].offset; }

  // tp_exchange.cpp
  void build_tp_gather();
  void build_groups();
  Pending post_tp_gather(bool use_params);
  void gathered_to_task(const ComputedTask& t, float* task) const;
  void pack_group(GroupExchange& g, bool use_params);
  void post_gather(GroupExchange& g);
  void hosted_to_task(const GroupExchange& g, const GroupHosted& h, float* task) const;
  // Computes g's hosted tasks; between tasks drives `in_flight` (the next group's gather) so it
  // moves while this rank computes.
  void compute_group(GroupExchange& g, comm::Request* in_flight);
  void post_scatter(GroupExchange& g);
  void apply_group(GroupExchange& g);
  void run_groups(bool group0_posted, double& comm_ms);
  // One optimizer step of task t given its full gradient (rows x cols, contiguous); writes this
  // rank's rows of the updated main param into params unless the task is hosted.
  void step_task(ComputedTask& t, const float* full_grad);

  // runner.cpp
  void wait(Pending& pending, double& exposed_ms);
  void forward(int step, StepTimes& times);
  void backward(int step, StepTimes& times);
  // Request::test() on every gradient collective in flight (progress during backward).
  void drive_grad_sync();
  void optimizer_step(StepTimes& times);
  void sync_params(StepTimes& times);
};

}  // namespace canzona::runtime
