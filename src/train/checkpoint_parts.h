// Internal to the train layer: what the checkpoint save and load (parallel_checkpoint.cpp)
// share.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "canzona/ckpt/hf_names.h"
#include "canzona/ckpt/safetensors.h"
#include "canzona/comm/communicator.h"
#include "canzona/engine/engine.h"
#include "canzona/model/spec.h"

namespace canzona::train::detail {

// Runs `fn` on every rank; when it throws on any rank, every rank throws the lowest failing
// rank's error (UsageError stays UsageError, anything else becomes CheckpointError), so no rank
// goes on alone.
void collectively(comm::Communicator& world, const std::function<void()>& fn);

// One optimizer-state tensor (or slice) a rank holds, as every rank sees it after the gather.
// Matrix task state: the whole tensor `key` (rows x cols). Element-wise state: local elements
// [begin, end) of TP shard `tp_shard` (0 for replicated params) of param `param`, under state
// `state`.
struct HeldState {
  bool matrix = false;
  int param = 0;        // model param index
  int piece = -1;       // matrix task piece, -1 = whole param
  int state_index = 0;  // matrix: this state's position among its task's states
  int tp_shard = 0;     // element-wise: the TP shard it lies in
  std::string state, key;
  std::int64_t begin = 0, end = 0, rows = 0, cols = 0;
  // Equal for the copies of one tensor or slice that several ranks hold.
  std::string id() const;
};

// Whether a checkpoint keeps state tensor `st` of `engine`: every optimizer state, and the fp32
// main params of a bf16 engine (its params are their bf16 roundings); an fp32 engine's main
// params equal its params, which model.safetensors holds.
bool saved_state(const engine::Engine& engine, const engine::StateTensor& st);

// The states of engine.optimizer_state() a checkpoint keeps (saved_state), in its order.
std::vector<HeldState> held_states(engine::Engine& engine, const model::ModelSpec& spec,
                                   const ckpt::HfLayout& hf, int tp_rank);

// The part of `runs` inside local elements [begin, end), re-based to begin.
std::vector<ckpt::ElementRun> clip(const std::vector<ckpt::ElementRun>& runs, std::int64_t begin,
                                   std::int64_t end);

// A task state tensor (rows x cols) between the task's row order and the logical one the file
// keeps (hf_names.h: an unsplit fc1 at TP > 1): element (i, j) of the task's tensor is element
// (L(i), L'(j)) of the file's, L = `logical` when bit 0 of `axes` is set, L' when bit 1 is, the
// identity otherwise. With bit 2 (only the upper triangle kept) the value moved is always the
// upper one, (min, max) of the source indices, so the target's upper triangle is right whatever
// the reordering does to which side of the diagonal an element falls on.
void to_logical(std::span<const float> task, std::span<float> file, std::int64_t rows,
                std::int64_t cols, int axes, const std::vector<std::int64_t>& logical);
void from_logical(std::span<const float> file, std::span<float> task, std::int64_t rows,
                  std::int64_t cols, int axes, const std::vector<std::int64_t>& logical);
// The task's logical row order when its state must be reordered for the file, else empty.
std::vector<std::int64_t> reorder_of(const ckpt::HfLayout& hf, const HeldState& unit,
                                     const engine::StateTensor& st, int tp);

const ckpt::TensorEntry& entry(const ckpt::Header& header, const std::string& name);
// Where element `element` of `tensor` (of its dtype) sits in its file.
std::int64_t file_offset(const ckpt::Header& header, const ckpt::TensorEntry& tensor,
                         std::int64_t element);

}  // namespace canzona::train::detail
