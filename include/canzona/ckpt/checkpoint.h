// A training checkpoint (docs/checkpoints.md): a directory in model space, so nothing in
// it depends on which rank owned what and any DP x TP x strategy can resume from it.
//
//   model.safetensors      every weight under its Hugging Face name, full shape, F32 (hf_names.h)
//   optimizer.safetensors  every optimizer-state tensor as "<name>.<state>", F32: for a matrix
//                          task its optimizer's tensors (Muon "momentum_buffer", Shampoo / SOAP
//                          factors) under the task's name, of the task's shapes; for an
//                          element-wise param AdamW's "exp_avg" / "exp_avg_sq" under each HF
//                          tensor's name, of its full shape. (fp32 main params equal the weights
//                          in fp32 training and are not stored twice.)
//   config.json            the HF config of the model (vocab_size = the padded vocabulary); for a
//                          param-list model (the Python package's) its param list instead, as
//                          model::write_param_list writes it (`--model` takes either)
//   plan.json              `canzona plan --json` of the plan it was saved under
//   trainer.json           the Manifest below, with the size and SHA-256 of every other file
//
// A save writes `.step-<N>.tmp` beside the final directory, syncs every file and the directory and
// renames it to `step-<N>` (8 digits) only when complete; a crash leaves the previous checkpoint
// as it was. No MPI and no libtorch here; the parallel save and load are
// train/parallel_checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/model/load.h"

namespace canzona::ckpt {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kFormatName = "canzona-checkpoint";
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kPlanFile = "plan.json";
// A param-list model saved with a Hugging Face config (canzona.torch on a transformers model):
// config.json is then that config, so transformers' from_pretrained reads the checkpoint, and the
// param list moves here. Optional: listed in trainer.json's files only when written.
inline constexpr const char* kParamsFile = "params.json";
inline constexpr const char* kTrainerFile = "trainer.json";

struct FileInfo {
  std::int64_t bytes = 0;
  std::string sha256;  // 64 lower-case hex digits
};

// trainer.json.
struct Manifest {
  std::int64_t step = 0;  // optimizer steps taken; a resumed run continues with step + 1
  std::string strategy;   // plan::to_string
  int dp = 1, tp = 1;
  std::string optimizer;  // matrix optimizer's registry name, or "adamw" for all-AdamW runs
  std::string plan_hash;  // 16 hex digits
  nlohmann::json run;     // the trainer's options: data position and RNG (counter-based: seed
                          // and step), lr schedule, optimizer options, batch shape
  std::map<std::string, FileInfo> files;  // every file of the directory but trainer.json
};

nlohmann::json to_json(const Manifest& manifest);
// Throws UsageError "<path>: <key>: <what is wrong>" for a wrong format name or version, a missing
// key or one of the wrong type.
Manifest manifest_from_json(const nlohmann::json& value, const std::string& path);
// Reads and checks dir/trainer.json (as above).
Manifest read_manifest(const std::string& dir);

// Checks that dir/name exists with the manifest's size and SHA-256. Throws UsageError
// "<dir>/<name>: missing", "...: N bytes, trainer.json says M", "...: checksum mismatch:
// trainer.json says X, file has Y".
void verify_file(const std::string& dir, const std::string& name, const FileInfo& info);
FileInfo file_info(const std::string& path);  // size and SHA-256 of a file

// The Hugging Face config.json of `config` (model_type qwen3 when it has q/k norm, qwen2 when it
// has QKV bias, llama otherwise) with vocab_size = padded_vocab, so reading it back
// (model::read_hf_config) and padding for any TP that divides it gives the same model.
nlohmann::json hf_config(const model::TransformerConfig& config, std::int64_t padded_vocab);
// Names the first field where two configs differ ("" when they describe the same model); the
// name is not compared.
std::string config_difference(const model::TransformerConfig& a, const model::TransformerConfig& b);

// Names the first param where two param lists differ in count, name, shape, TP split dim or
// optimizer class ("" when they describe the same model; layers, stages and pieces are the
// plan's, not the model's, and are not compared).
std::string params_difference(const model::ModelSpec& a, const model::ModelSpec& b);

// "step-00000012".
std::string step_dir_name(std::int64_t step);
// The checkpoint `path` names: `path` itself when it holds trainer.json, else the highest
// step-<N> directory in it that holds trainer.json (a save directory). Throws UsageError naming the
// path when there is none.
std::string resolve(const std::string& path);
// Complete checkpoints (step-<N> directories with trainer.json) in a save directory, ascending.
std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& save_dir);

}  // namespace canzona::ckpt
