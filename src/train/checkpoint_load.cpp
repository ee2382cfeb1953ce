// Checkpoint load: resume and --init-from (checkpoint.h).
#include <algorithm>
#include <filesystem>
#include <memory>

#include "canzona/ckpt/file_io.h"
#include "canzona/ckpt/hf_names.h"
#include "canzona/ckpt/safetensors.h"
#include "canzona/common/error.h"
#include "canzona/train/parallel_checkpoint.h"
#include "checkpoint_parts.h"

namespace canzona::train {
namespace {

namespace fs = std::filesystem;
using ckpt::ElementRun;
using ckpt::HfLayout;
using namespace detail;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text.append(i ? ", " : "").append(std::to_string(shape[i]));
  return text + "]";
}

// Throws UsageError unless `header` (of `path`) has `name` as F32 of `shape`.
void require_tensor(const std::string& path, const ckpt::Header& header, const std::string& name,
                    const std::vector<std::int64_t>& shape, bool any_dtype = false) {
  const ckpt::TensorEntry* e = header.find(name);
  CANZONA_REQUIRE(e != nullptr, path, ": missing tensor '", name, "'");
  CANZONA_REQUIRE(any_dtype || e->dtype == ckpt::Dtype::kF32, path, ": tensor '", name,
                  "' has dtype ", ckpt::to_string(e->dtype), ", expected F32");
  CANZONA_REQUIRE(e->shape == shape, path, ": tensor '", name, "' has shape ", shape_text(e->shape),
                  ", this model needs ", shape_text(shape));
}

void read_runs(const ckpt::InFile& file, const ckpt::Header& header, const HfLayout& hf,
               const std::vector<ElementRun>& runs, std::span<float> out) {
  for (const ElementRun& r : runs) {
    const ckpt::TensorEntry& t =
        entry(header, hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
    file.pread(file_offset(header, t, r.hf),
               std::as_writable_bytes(out.subspan(static_cast<std::size_t>(r.local),
                                                  static_cast<std::size_t>(r.count))));
  }
}

}  // namespace

void load_checkpoint(comm::Grid& grid, engine::Engine& engine, const model::ModelSpec& spec,
                     const model::TransformerConfig& config, const std::string& optimizer,
                     const std::string& dir, const ckpt::Manifest& manifest) {
  comm::Communicator& world = grid.world();
  const HfLayout hf(spec);
  const int tp = grid.shape().tp, tp_rank = grid.coord().tp;
  const std::string model_path = (fs::path(dir) / ckpt::kModelFile).string();
  const std::string optimizer_path = (fs::path(dir) / ckpt::kOptimizerFile).string();
  const std::vector<HeldState> units = held_states(engine, spec, hf, tp_rank);
  ckpt::Header model_header, optimizer_header;

  // Every check first, on every rank.
  collectively(world, [&] {
    const char* files[] = {ckpt::kModelFile, ckpt::kOptimizerFile, ckpt::kConfigFile,
                           ckpt::kPlanFile};
    for (int i = 0; i < 4; ++i)
      if (i % world.size() == world.rank())
        ckpt::verify_file(dir, files[i], manifest.files.at(files[i]));
    const std::string config_path = (fs::path(dir) / ckpt::kConfigFile).string();
    const std::string diff = ckpt::config_difference(model::read_hf_config(config_path), config);
    CANZONA_REQUIRE(diff.empty(), config_path, ": does not match the model being trained (", diff,
                    ")");
    CANZONA_REQUIRE(manifest.optimizer == optimizer, dir, "/trainer.json: saved with optimizer '",
                    manifest.optimizer, "', this run uses '", optimizer,
                    "' (optimizer state cannot change kind)");
    model_header = ckpt::read_header(model_path);
    optimizer_header = ckpt::read_header(optimizer_path);
    for (const ckpt::HfTensor& t : hf.tensors())
      require_tensor(model_path, model_header, t.name, t.shape);
    for (const HeldState& u : units) {
      if (u.matrix) {
        require_tensor(optimizer_path, optimizer_header, u.key, {u.rows, u.cols});
        continue;
      }
      for (int t : hf.tensors_of(u.param)) {
        const ckpt::HfTensor& tensor = hf.tensors()[static_cast<std::size_t>(t)];
        require_tensor(optimizer_path, optimizer_header, tensor.name + "." + u.state, tensor.shape);
      }
    }
  });

  collectively(world, [&] {
    const ckpt::InFile file(model_path);
    for (std::size_t p = 0; p < spec.params.size(); ++p)
      read_runs(file, model_header, hf, hf.runs(static_cast<int>(p), tp, tp_rank),
                engine.param(static_cast<int>(p)));
  });
  engine.init_main_params();
  collectively(world, [&] {
    const ckpt::InFile file(optimizer_path);
    std::size_t u = 0;
    for (const engine::StateTensor& st : engine.optimizer_state()) {
      if (st.state == "main") continue;
      const HeldState& unit = units[u++];
      if (unit.matrix) {
        const std::int64_t offset =
            file_offset(optimizer_header, entry(optimizer_header, unit.key), 0);
        const std::vector<std::int64_t> logical = reorder_of(hf, unit, st, tp);
        if (logical.empty()) {
          file.pread(offset, std::as_writable_bytes(st.values));
        } else {
          std::vector<float> stored(st.values.size());
          file.pread(offset, std::as_writable_bytes(std::span<float>(stored)));
          from_logical(stored, st.values, st.rows, st.cols, st.row_axes, logical);
        }
        continue;
      }
      for (const ElementRun& r : clip(hf.runs(unit.param, tp, tp_rank), unit.begin, unit.end)) {
        const std::string key =
            hf.tensors()[static_cast<std::size_t>(r.tensor)].name + "." + unit.state;
        file.pread(file_offset(optimizer_header, entry(optimizer_header, key), r.hf),
                   std::as_writable_bytes(st.values.subspan(static_cast<std::size_t>(r.local),
                                                            static_cast<std::size_t>(r.count))));
      }
    }
    engine.set_step_count(manifest.step);
  });
}

void load_weights(comm::Grid& grid, engine::Engine& engine, const model::ModelSpec& spec,
                  const std::string& dir) {
  comm::Communicator& world = grid.world();
  const HfLayout hf(spec);
  const int tp = grid.shape().tp, tp_rank = grid.coord().tp;
  std::unique_ptr<ckpt::WeightsDir> weights;
  collectively(world, [&] {
    weights = std::make_unique<ckpt::WeightsDir>(dir);
    for (const ckpt::HfTensor& t : hf.tensors()) {
      const ckpt::WeightsDir::Found found = weights->find(t.name);
      const std::vector<std::int64_t>& shape = found.tensor->shape;
      const bool vocab = t.name == "model.embed_tokens.weight" || t.name == "lm_head.weight";
      const bool fits = vocab
                            ? shape.size() == 2 && shape[1] == t.shape[1] && shape[0] <= t.shape[0]
                            : shape == t.shape;
      CANZONA_REQUIRE(fits, *found.path, ": tensor '", t.name, "' has shape ", shape_text(shape),
                      ", this model needs ", shape_text(t.shape),
                      vocab ? " (or fewer rows: padding)" : "");
    }
  });
  collectively(world, [&] {
    for (std::size_t p = 0; p < spec.params.size(); ++p) {
      const std::span<float> values = engine.param(static_cast<int>(p));
      for (const ElementRun& r : hf.runs(static_cast<int>(p), tp, tp_rank)) {
        const ckpt::WeightsDir::Found found =
            weights->find(hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
        const std::int64_t have =
            std::clamp<std::int64_t>(found.tensor->numel() - r.hf, 0, r.count);
        std::span<float> out =
            values.subspan(static_cast<std::size_t>(r.local), static_cast<std::size_t>(r.count));
        if (have > 0)
          ckpt::read_f32(*found.path, *found.header, *found.tensor, r.hf,
                         out.first(static_cast<std::size_t>(have)));
        std::fill(out.begin() + have, out.end(), 0.0f);
      }
    }
  });
  engine.init_main_params();
}

}  // namespace canzona::train
