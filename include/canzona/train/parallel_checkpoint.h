// Parallel, atomic checkpoint save and load of a training run on the engine (the
// directory format is ckpt/checkpoint.h, the names ckpt/hf_names.h; docs/checkpoints.md).
//
// Save (collective over the world): every rank lists the optimizer state it holds; the lists are
// gathered so every rank computes the same two safetensors layouts; rank 0 creates the files in
// `.step-<N>.tmp` and reserves their full size (a full disk fails here); then every rank writes
// the byte ranges it is the writer of, in place, with pwrite: params of spec param p by DP rank
// p mod DP (each TP rank its shard; replicated params TP rank 0), each state tensor by the lowest
// world rank that holds it; files are fsynced, hashed (file i by world rank i mod world size),
// trainer.json written last, the directory fsynced and renamed to step-<N>. Any rank's failure
// is every rank's error (the same message everywhere) and removes the temporary directory; the
// previous checkpoints are untouched.
//
// Load (collective): first every check, on every rank, before any state changes (checksums of
// every file, config.json against the model, optimizer kind, every tensor this rank will read
// present with its shape and dtype F32); a failure is a UsageError on every rank. Then each rank
// reads only what it holds: its TP shard of every param and the state of the tasks and slices
// the new plan gives it, under any DP, TP and strategy.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "canzona/ckpt/checkpoint.h"
#include "canzona/comm/grid.h"
#include "canzona/common/error.h"
#include "canzona/engine/engine.h"
#include "canzona/engine/engine_set.h"
#include "canzona/model/load.h"
#include "canzona/model/spec.h"
#include "canzona/plan/plan.h"

namespace canzona::train {

// A failure of a collective checkpoint step (I/O, disk full) that every rank throws alike.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// The CLI flags of the same names.
struct CheckpointOptions {
  std::string save_dir;         // checkpoints step-<N> are written here; empty: none
  std::int64_t save_every = 0;  // every N steps; the last step is always saved; 0: only the last
  int keep = 0;                 // keep the newest K checkpoints of save_dir, delete older; 0: all
  std::string resume;           // a checkpoint directory, or a save_dir (its newest checkpoint)
  std::string init_from;        // HF weights directory (model.safetensors or an index)
};

// What a save records besides the engine's state.
struct SaveContext {
  // The transformer's config (HF names, config.json its HF config); null for a param-list model
  // (each param under its own name, config.json its param list: ckpt/hf_names.h Naming::kOwn).
  const model::TransformerConfig* config = nullptr;
  // With config null: a Hugging Face config (transformers' config.to_dict()) to write as
  // config.json, the param list then going to params.json, so from_pretrained loads the
  // checkpoint of a transformers model trained under canzona.torch; null: config.json is the list.
  nlohmann::json hf_config;
  const model::ModelSpec* spec = nullptr;
  const plan::Plan* plan = nullptr;
  ckpt::Manifest manifest;  // step, strategy, grid, optimizer, plan hash, run (files: filled here)
  // Test hook: called on every rank after the data is written and synced, before the directory
  // gets its final name (a crash here must leave the previous checkpoint the newest).
  std::function<void()> before_publish;
};

// The engines are a run's engine set (engine/engine_set.h). A mixture-of-experts run's checkpoint
// keeps the whole model in one file all the same: each expert under its own name, written by
// expert DP rank p mod expert-DP (p its model index) of the EP rank holding it, and read by every
// rank that holds it, under any EP.

// Writes save_dir/step-<manifest.step> (see above); returns its path. Throws CheckpointError (disk
// full, I/O) identically on every rank.
std::string save_checkpoint(engine::EngineSet& engines, const SaveContext& context,
                            const std::string& save_dir);

// Restores a checkpoint `dir` (resolved, with its manifest) into the engines: params, main params
// (init_main_params), optimizer state, step count. `optimizer` is this run's manifest optimizer
// name; `config` as SaveContext's (null: a param-list model, whose config.json must list the same
// params). Throws UsageError on every rank before any state changes when the checkpoint is
// corrupt or does not fit this run.
void load_checkpoint(engine::EngineSet& engines, const model::ModelSpec& spec,
                     const model::TransformerConfig* config, const std::string& optimizer,
                     const std::string& dir, const ckpt::Manifest& manifest);

// The checkpoint `path` names (ckpt::resolve: a checkpoint, or a save directory's newest) and its
// manifest, read on every rank; a failure on any rank is the same UsageError on every rank.
std::pair<std::string, ckpt::Manifest> resolve_checkpoint(comm::Communicator& world,
                                                          const std::string& path);

// --init-from: the weights of a HF directory (any of F32 / BF16 / F16 / F64) into the engine's
// params, then init_main_params. A vocabulary shorter than the padded one fills the padding rows
// with zeros. Throws UsageError on every rank before any param changes when a tensor is missing
// or has another shape.
void load_weights(engine::EngineSet& engines, const model::ModelSpec& spec, const std::string& dir);

}  // namespace canzona::train
