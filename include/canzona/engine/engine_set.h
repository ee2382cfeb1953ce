// A model's engines as one optimizer, in the shape of Megatron-LM's ChainedOptimizer: the dense
// buffer's Engine over the DP x TP grid and, for a mixture-of-experts plan (plan.expert), the
// expert buffer's Engine over this rank's expert grid (expert DP x expert TP), holding the experts
// of this rank's EP rank (model::expert_part). A client addresses params by their index in the
// whole model; the set maps each to (engine, index there) and forwards every call to both engines,
// dense first: gradients, the step, the param sync, the optimizer state, what a checkpoint needs.
//
// The expert engine scales its buckets by the dense DP (EngineOptions::grad_scaling_dp: Megatron's
// expert_gradient_scaling_factor), so a sum over expert DP of gradients each averaged over the
// dense DP is the dense model's mean. A dense plan has one member, and the set is exactly its
// Engine.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canzona/comm/grid.h"
#include "canzona/engine/engine.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::engine {

class EngineSet {
 public:
  // One engine's share of the model: its grid, its model and, for each of its params, the
  // param's index in the whole model (the dense engine indexes the whole model, so its source is
  // 0..n-1; it holds the params its stage lists).
  struct Member {
    Engine* engine = nullptr;
    comm::Grid* grid = nullptr;
    const model::ModelSpec* model = nullptr;  // the engine's model (the expert part's for experts)
    std::vector<int> source;                  // [engine param] whole-model index
  };
  // Where a whole-model param lives: member m's param `index`; member -1 for another EP rank's
  // expert (this rank holds nothing of it).
  struct Slot {
    int member = -1;
    int index = -1;
  };

  // Collective as Engine's constructor on each grid. A plan with `expert` needs `experts`, this
  // rank's expert groups (comm/grid.h), which must outlive the set. Trace is borrowed.
  EngineSet(comm::Grid& grid, const model::ModelSpec& model, const plan::Plan& plan,
            const EngineOptions& options, Trace& trace, comm::ExpertGroups* experts = nullptr);
  ~EngineSet();
  EngineSet(const EngineSet&) = delete;
  EngineSet& operator=(const EngineSet&) = delete;

  // 1 (dense) or 2 (dense, expert).
  int size() const { return static_cast<int>(members_.size()); }
  const Member& member(int m) const { return members_[static_cast<std::size_t>(m)]; }
  Engine& dense() { return *engines_[0]; }
  const Engine& dense() const { return *engines_[0]; }
  Engine* expert() { return engines_.size() > 1 ? engines_[1].get() : nullptr; }
  // The expert part this rank's expert engine holds (null for a dense plan).
  const model::ExpertPart* expert_part() const { return part_.get(); }
  comm::ExpertGroups* expert_groups() const { return groups_; }

  Slot slot(int p) const;
  // Whole-model param p's engine (null when this rank holds none of it) and its index there.
  Engine* engine_of(int p);
  TypedSpan param(int p);  // empty when this rank holds none of p
  TypedSpan grad(int p);

  // Forwarded to every engine (dense, then expert).
  void init_main_params();
  void grad_ready(int p);
  void progress();
  void zero_grads();
  double finish_grad_sync();
  // The opt* fields summed over the engines (the dense step, then the expert step).
  StepTimes step();
  double start_param_sync();
  void finish();
  void set_lr_scale(double scale);
  void set_lr_scales(double matrix, double elementwise);
  double wait_cpu_ms() const;
  std::int64_t state_bytes() const;
  int computed_tasks() const;
  // Summed over the engines.
  MemoryHeld memory_held() const;
  // Bytes every member's DP and TP communicators posted so far (comm::Communicator::bytes()).
  std::int64_t dp_bytes() const;
  std::int64_t tp_bytes() const;
  // The dense engine's Engine::params_fnv with the expert engine's folded in (FNV-1a): a dense
  // set's is its Engine's. Collective as Engine::params_fnv.
  std::uint64_t params_fnv();
  // Every member's optimizer state, dense first (StateTensor::param: the model's names).
  std::vector<StateTensor> optimizer_state();
  std::int64_t step_count() const;  // the most of the engines' (every engine steps together)
  void set_step_count(std::int64_t steps);
  // Engine::set_optimizer_state on the engine holding the model's param named `param`. Throws
  // UsageError when the model has no such param or this rank holds none of it (or as Engine's).
  void set_optimizer_state(const std::string& param, const std::string& state, int piece,
                           std::int64_t begin, std::span<const float> values);

 private:
  std::unique_ptr<model::ExpertPart> part_;  // before engines_: the expert engine refers to it
  std::vector<std::unique_ptr<Engine>> engines_;
  comm::ExpertGroups* groups_ = nullptr;
  std::vector<Member> members_;
  std::vector<Slot> slots_;  // [whole-model param]
};

}  // namespace canzona::engine
