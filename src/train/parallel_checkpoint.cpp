// Parallel, atomic checkpoint save, resume and --init-from (parallel_checkpoint.h).
#include "canzona/train/parallel_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "canzona/ckpt/file_io.h"
#include "canzona/ckpt/hf_names.h"
#include "canzona/ckpt/safetensors.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan_report.h"
#include "checkpoint_parts.h"

namespace canzona::train {
namespace {

namespace fs = std::filesystem;
using ckpt::ElementRun;
using ckpt::HfLayout;
using namespace detail;

// One engine's share of the model (a member of the engine set): the dense engine over the grid
// (its params are the model's, by model index, less the experts of a MoE model), or the expert
// engine over the expert grid.
struct View {
  comm::Grid& grid;
  engine::Engine& engine;
  std::vector<std::pair<int, int>> params;  // (engine param, model param)
  int dp() const { return grid.dims().dp; }
  int dp_rank() const { return grid.coord().dp; }
  int tp() const { return grid.dims().tp; }
  int tp_rank() const { return grid.coord().tp; }
};

// One view per member of the engine set, dense first.
std::vector<View> views_of(engine::EngineSet& engines) {
  std::vector<View> views;
  for (int m = 0; m < engines.size(); ++m) {
    const engine::EngineSet::Member& member = engines.member(m);
    views.push_back({*member.grid, *member.engine, {}});
    for (std::size_t i = 0; i < member.source.size(); ++i)
      if (member.engine->bucket_of(static_cast<int>(i)) >= 0)
        views.back().params.emplace_back(static_cast<int>(i), member.source[i]);
  }
  return views;
}

// Whether model param p is the last stage's copy of a tied embedding (plan::Plan::tied_embedding):
// the first stage's original is the one a save writes; a load fills both.
bool tied_copy(const View& v, const model::ModelSpec& spec, int p) {
  return v.engine.stage().stage > 0 && p == plan::tied_embedding_param(spec);
}

// Every view's held states, in view order (the order of the views' optimizer_state()).
std::vector<HeldState> held_by(const std::vector<View>& views, const model::ModelSpec& spec,
                               const HfLayout& hf) {
  std::vector<HeldState> units;
  for (const View& v : views)
    for (HeldState& u : detail::held_states(v.engine, spec, hf, v.tp_rank()))
      units.push_back(std::move(u));
  return units;
}

// The element runs of model param p (engine param e) this rank holds: all of its TP shard, or
// under ZeRO-3 those of its held elements (Engine::held_elements), in local offsets.
std::vector<ElementRun> param_runs(const View& v, const HfLayout& hf, int e, int p) {
  std::vector<ElementRun> runs = hf.runs(p, v.tp(), v.tp_rank());
  if (v.engine.zero_stage() != ZeroStage::kThree) return runs;
  const engine::ElementRange held = v.engine.held_elements(e);
  runs = clip(runs, held.begin, held.end);
  for (ElementRun& r : runs) r.local += held.begin;
  return runs;
}

std::string serialize(const std::vector<HeldState>& units) {
  std::ostringstream os;
  for (const HeldState& u : units)
    os << u.matrix << ' ' << u.param << ' ' << u.piece << ' ' << u.state_index << ' ' << u.tp_shard
       << ' ' << u.state << ' ' << (u.key.empty() ? "-" : u.key) << ' ' << u.begin << ' ' << u.end
       << ' ' << u.rows << ' ' << u.cols << '\n';
  return os.str();
}

std::vector<HeldState> deserialize(const std::vector<std::byte>& bytes) {
  std::istringstream is(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  std::vector<HeldState> units;
  HeldState u;
  while (is >> u.matrix >> u.param >> u.piece >> u.state_index >> u.tp_shard >> u.state >> u.key >>
         u.begin >> u.end >> u.rows >> u.cols) {
    if (u.key == "-") u.key.clear();
    units.push_back(u);
  }
  return units;
}

// The optimizer file's tensors in canonical order (spec param, then task piece or HF tensor, then
// state order) with their shapes, the same on every rank.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> optimizer_tensors(
    const std::vector<std::vector<HeldState>>& all, const HfLayout& hf) {
  struct Entry {
    std::tuple<int, int, int> order;
    std::string key;
    std::vector<std::int64_t> shape;
  };
  std::map<std::string, Entry> entries;
  std::map<int, std::vector<std::string>> states;  // element-wise param -> state names
  for (const auto& units : all) {
    for (const HeldState& u : units) {
      if (u.matrix) {
        entries.try_emplace(u.key,
                            Entry{{u.param, u.piece + 1, u.state_index}, u.key, {u.rows, u.cols}});
      } else {
        auto& names = states[u.param];
        if (std::find(names.begin(), names.end(), u.state) == names.end()) names.push_back(u.state);
      }
    }
  }
  for (const auto& [p, names] : states) {
    const std::vector<int>& tensors = hf.tensors_of(p);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const ckpt::HfTensor& tensor = hf.tensors()[static_cast<std::size_t>(tensors[t])];
      for (std::size_t s = 0; s < names.size(); ++s) {
        const std::string key = tensor.name + "." + names[s];
        entries.try_emplace(
            key, Entry{{p, static_cast<int>(t), static_cast<int>(s)}, key, tensor.shape});
      }
    }
  }
  std::vector<Entry> sorted;
  for (auto& [key, e] : entries) sorted.push_back(std::move(e));
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry& a, const Entry& b) { return a.order < b.order; });
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (Entry& e : sorted) out.emplace_back(std::move(e.key), std::move(e.shape));
  return out;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> model_tensors(const HfLayout& hf) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const ckpt::HfTensor& t : hf.tensors()) out.emplace_back(t.name, t.shape);
  return out;
}

std::span<const std::byte> bytes_of(std::span<const float> values) {
  return std::as_bytes(values);
}

std::span<const std::byte> typed_bytes(ConstTypedSpan values) {
  return {values.data(), static_cast<std::size_t>(values.size_bytes())};
}

// model.safetensors keeps the params in the run's dtype (what a Hugging Face user loads).
ckpt::Dtype file_dtype(DType dtype) {
  return dtype == DType::kBF16 ? ckpt::Dtype::kBF16 : ckpt::Dtype::kF32;
}

ckpt::Naming naming(const model::TransformerConfig* config) {
  return config ? ckpt::Naming::kHuggingFace : ckpt::Naming::kOwn;
}

}  // namespace

std::string save_checkpoint(engine::EngineSet& engines, const SaveContext& context,
                            const std::string& save_dir) {
  comm::Communicator& world = engines.member(0).grid->world();
  const model::ModelSpec& spec = *context.spec;
  const HfLayout hf(spec, naming(context.config));
  const std::vector<View> views = views_of(engines);
  const std::string name = ckpt::step_dir_name(context.manifest.step);
  const fs::path final_dir = fs::path(save_dir) / name;
  const fs::path tmp = fs::path(save_dir) / ("." + name + ".tmp");
  const std::string model_path = (tmp / ckpt::kModelFile).string();
  const std::string optimizer_path = (tmp / ckpt::kOptimizerFile).string();

  // Who holds what: gathered, so every rank lays the files out alike and knows its writes.
  const std::vector<HeldState> mine = held_by(views, spec, hf);
  const std::string text = serialize(mine);
  std::vector<std::vector<HeldState>> all;
  for (const auto& bytes :
       world.all_gather_bytes(std::as_bytes(std::span(text.data(), text.size()))))
    all.push_back(deserialize(bytes));
  std::set<std::string> claimed;  // units a lower rank writes
  for (int r = 0; r < world.rank(); ++r)
    for (const HeldState& u : all[static_cast<std::size_t>(r)]) claimed.insert(u.id());
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const ckpt::Layout model_layout = ckpt::layout(
      model_tensors(hf), file_dtype(engines.member(0).engine->param_dtype()), metadata);
  const ckpt::Layout optimizer_layout = ckpt::layout_f32(optimizer_tensors(all, hf), metadata);

  auto remove_tmp = [&] {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  };
  try {
    collectively(world, [&] {
      if (world.rank() != 0) return;
      std::error_code ec;
      fs::create_directories(save_dir, ec);
      CANZONA_REQUIRE(!ec, save_dir, ": cannot create the save directory: ", ec.message());
      // Leftovers of saves a crash interrupted (never taken for checkpoints) go now.
      for (const fs::directory_entry& e : fs::directory_iterator(save_dir, ec)) {
        const std::string leftover = e.path().filename().string();
        if (leftover.rfind(".step-", 0) == 0 &&
            (leftover.ends_with(".tmp") || leftover.ends_with(".old")))
          fs::remove_all(e.path(), ec);
      }
      CANZONA_REQUIRE(fs::create_directory(tmp, ec) && !ec, tmp.string(),
                      ": cannot create directory: ", ec.message());
      for (const auto* layout : {&model_layout, &optimizer_layout}) {
        ckpt::OutFile file(layout == &model_layout ? model_path : optimizer_path, true);
        file.allocate(layout->header.file_bytes);
        file.pwrite(0, std::as_bytes(std::span(layout->bytes.data(), layout->bytes.size())));
        file.close();
      }
    });
    collectively(world, [&] {
      ckpt::OutFile model_file(model_path, false);
      for (const View& v : views) {
        for (const auto& [e, p] : v.params) {
          const bool split = spec.params[static_cast<std::size_t>(p)].tp_split_dim >= 0;
          if ((!split && v.tp_rank() != 0) || tied_copy(v, spec, p)) continue;
          // ZeRO-3: each DP rank writes the elements it holds; stage 1: every DP rank holds every
          // param, so params go round-robin over DP (an expert: over its expert DP group).
          if (v.engine.zero_stage() != ZeroStage::kThree && p % v.dp() != v.dp_rank()) continue;
          const ConstTypedSpan values = v.engine.param(e);
          for (const ElementRun& r : param_runs(v, hf, e, p)) {
            const ckpt::TensorEntry& t =
                entry(model_layout.header, hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
            model_file.pwrite(file_offset(model_layout.header, t, r.hf),
                              typed_bytes(values.subspan(r.local, r.count)));
          }
        }
      }
      model_file.sync();
      model_file.close();
      ckpt::OutFile optimizer_file(optimizer_path, false);
      const ckpt::Header& header = optimizer_layout.header;
      std::size_t u = 0;
      for (const View& v : views) {
        for (const engine::StateTensor& st : v.engine.optimizer_state()) {
          if (!saved_state(v.engine, st)) continue;
          const HeldState& unit = mine[u++];
          if (claimed.count(unit.id()) || tied_copy(v, spec, unit.param)) continue;
          if (unit.matrix) {
            const std::vector<std::int64_t> logical = reorder_of(hf, unit, st, v.tp());
            std::vector<float> reordered;
            if (!logical.empty()) {
              reordered.resize(st.values.size());
              to_logical(st.values, reordered, st.rows, st.cols, st.row_axes, logical);
            }
            optimizer_file.pwrite(
                file_offset(header, entry(header, unit.key), 0),
                bytes_of(logical.empty() ? st.values : std::span<const float>(reordered)));
            continue;
          }
          for (const ElementRun& r :
               clip(hf.runs(unit.param, v.tp(), v.tp_rank()), unit.begin, unit.end)) {
            const std::string key =
                hf.tensors()[static_cast<std::size_t>(r.tensor)].name + "." + unit.state;
            optimizer_file.pwrite(file_offset(header, entry(header, key), r.hf),
                                  bytes_of(st.values.subspan(static_cast<std::size_t>(r.local),
                                                             static_cast<std::size_t>(r.count))));
          }
        }
      }
      optimizer_file.sync();
      optimizer_file.close();
    });
    // Checksums of the two large files, one rank each.
    std::string hashes;
    collectively(world, [&] {
      for (int i = 0; i < 2; ++i) {
        if (i % world.size() != world.rank()) continue;
        const ckpt::FileInfo info = ckpt::file_info(i == 0 ? model_path : optimizer_path);
        hashes += str(i, ' ', info.bytes, ' ', info.sha256, '\n');
      }
    });
    ckpt::Manifest manifest = context.manifest;
    for (const auto& bytes :
         world.all_gather_bytes(std::as_bytes(std::span(hashes.data(), hashes.size())))) {
      std::istringstream is(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      int i = 0;
      ckpt::FileInfo info;
      while (is >> i >> info.bytes >> info.sha256)
        manifest.files[i == 0 ? ckpt::kModelFile : ckpt::kOptimizerFile] = info;
    }
    if (context.before_publish) context.before_publish();
    collectively(world, [&] {
      if (world.rank() != 0) return;
      const bool own_hf_config = !context.config && !context.hf_config.is_null();
      nlohmann::json config_json =
          context.config ? ckpt::hf_config(*context.config, spec.arch.padded_vocab_size)
                         : nlohmann::json();
      // The dtype model.safetensors holds (from_pretrained's torch_dtype="auto" keeps it).
      if (context.config && engines.member(0).engine->param_dtype() == DType::kBF16)
        config_json["torch_dtype"] = "bfloat16";
      write_json_file((tmp / ckpt::kConfigFile).string(), context.config ? config_json
                                                          : own_hf_config
                                                              ? context.hf_config
                                                              : model::param_list_json(spec));
      if (own_hf_config) {
        write_json_file((tmp / ckpt::kParamsFile).string(), model::param_list_json(spec));
        manifest.files[ckpt::kParamsFile] = ckpt::file_info((tmp / ckpt::kParamsFile).string());
      }
      plan::PlanRun run;
      run.label = manifest.strategy;
      run.plan = *context.plan;
      run.metrics = plan::compute_metrics(spec, run.plan);
      // With the model build flags, as `canzona plan --json` writes them, so `canzona plan
      // --from-plan DIR/plan.json` can re-make this plan for a new grid.
      nlohmann::json plan_doc = plan::plan_json(spec, run);
      plan_doc["split_qkv"] = manifest.run.value("split_qkv", "none");
      plan_doc["split_fc1"] = manifest.run.value("split_fc1", false);
      write_json_file((tmp / ckpt::kPlanFile).string(), plan_doc);
      for (const char* file : {ckpt::kConfigFile, ckpt::kPlanFile})
        manifest.files[file] = ckpt::file_info((tmp / file).string());
      write_json_file((tmp / ckpt::kTrainerFile).string(), ckpt::to_json(manifest));
      ckpt::sync_dir(tmp.string());
      std::error_code ec;
      const fs::path old = fs::path(save_dir) / ("." + name + ".old");
      if (fs::exists(final_dir, ec)) {
        fs::remove_all(old, ec);
        fs::rename(final_dir, old, ec);
        CANZONA_REQUIRE(!ec, final_dir.string(), ": cannot replace: ", ec.message());
      }
      fs::rename(tmp, final_dir, ec);
      CANZONA_REQUIRE(!ec, tmp.string(), ": cannot rename to ", final_dir.string(), ": ",
                      ec.message());
      ckpt::sync_dir(save_dir);
      fs::remove_all(old, ec);
    });
  } catch (const CheckpointError& e) {
    if (world.rank() == 0) remove_tmp();
    throw CheckpointError(str("checkpoint save at step ", context.manifest.step, " failed: ",
                              e.what(), "; older checkpoints in ", save_dir, " are untouched"));
  }
  return final_dir.string();
}

}  // namespace canzona::train

// Load: resume and --init-from (the save half's aliases and using-declarations hold here too).

namespace canzona::train {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text.append(i ? ", " : "").append(std::to_string(shape[i]));
  return text + "]";
}

// Throws UsageError unless `header` (of `path`) has `name` as F32 (or, `params`, F32 or BF16:
// model.safetensors of an fp32 or a bf16 run) of `shape`.
void require_tensor(const std::string& path, const ckpt::Header& header, const std::string& name,
                    const std::vector<std::int64_t>& shape, bool params = false) {
  const ckpt::TensorEntry* e = header.find(name);
  CANZONA_REQUIRE(e != nullptr, path, ": missing tensor '", name, "'");
  CANZONA_REQUIRE(e->dtype == ckpt::Dtype::kF32 || (params && e->dtype == ckpt::Dtype::kBF16), path,
                  ": tensor '", name, "' has dtype ", ckpt::to_string(e->dtype),
                  params ? ", expected F32 or BF16" : ", expected F32");
  CANZONA_REQUIRE(e->shape == shape, path, ": tensor '", name, "' has shape ", shape_text(e->shape),
                  ", this model needs ", shape_text(shape));
}

// The param list a param-list model's checkpoint keeps as config.json.
model::ModelSpec saved_param_list(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  CANZONA_REQUIRE(j.is_object() && j.contains("params"), path,
                  ": is a transformer's config, not a param list (the checkpoint was written by "
                  "canzona train, not for a model of your own)");
  return model::param_list_from_json(j, path);
}

// The runs of a param from model.safetensors into `out`, a param buffer: the bytes as they are
// when the file's dtype is the buffer's, else widened (BF16 into fp32: exact) or rounded (F32
// into bf16: to nearest even) on the way.
void read_runs(const ckpt::InFile& file, const std::string& path, const ckpt::Header& header,
               const HfLayout& hf, const std::vector<ElementRun>& runs, TypedSpan out) {
  std::vector<float> wide;
  for (const ElementRun& r : runs) {
    const ckpt::TensorEntry& t =
        entry(header, hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
    const TypedSpan into = out.subspan(r.local, r.count);
    if (file_dtype(out.dtype()) == t.dtype) {
      file.pread(file_offset(header, t, r.hf),
                 std::span<std::byte>(into.data(), static_cast<std::size_t>(into.size_bytes())));
      continue;
    }
    wide.resize(static_cast<std::size_t>(r.count));
    ckpt::read_f32(path, header, t, r.hf, wide);
    copy_cast(ConstTypedSpan(wide), into);
  }
}

}  // namespace

void load_checkpoint(engine::EngineSet& engines, const model::ModelSpec& spec,
                     const model::TransformerConfig* config, const std::string& optimizer,
                     const std::string& dir, const ckpt::Manifest& manifest) {
  comm::Communicator& world = engines.member(0).grid->world();
  const HfLayout hf(spec, naming(config));
  const std::vector<View> views = views_of(engines);
  const std::string model_path = (fs::path(dir) / ckpt::kModelFile).string();
  const std::string optimizer_path = (fs::path(dir) / ckpt::kOptimizerFile).string();
  const std::vector<HeldState> units = held_by(views, spec, hf);
  ckpt::Header model_header, optimizer_header;
  // A bf16 run's checkpoint keeps its fp32 main params; a bf16 run reads them from it, and takes
  // them from its params (init_main_params) after an fp32 checkpoint (docs/checkpoints.md).
  const bool saved_main = manifest.run.value("precision", "fp32") == "bf16";

  // Every check first, on every rank.
  collectively(world, [&] {
    const char* files[] = {ckpt::kModelFile, ckpt::kOptimizerFile, ckpt::kConfigFile,
                           ckpt::kPlanFile};
    for (int i = 0; i < 4; ++i)
      if (i % world.size() == world.rank())
        ckpt::verify_file(dir, files[i], manifest.files.at(files[i]));
    // A param-list model saved with a Hugging Face config keeps its list in params.json.
    const bool params_file = manifest.files.contains(ckpt::kParamsFile);
    if (params_file && 4 % world.size() == world.rank())
      ckpt::verify_file(dir, ckpt::kParamsFile, manifest.files.at(ckpt::kParamsFile));
    const std::string config_path =
        (fs::path(dir) / (!config && params_file ? ckpt::kParamsFile : ckpt::kConfigFile)).string();
    const std::string diff =
        config ? ckpt::config_difference(model::read_hf_config(config_path), *config)
               : ckpt::params_difference(saved_param_list(config_path), spec);
    CANZONA_REQUIRE(diff.empty(), config_path,
                    ": does not match the model being trained (saved vs this run: ", diff, ")");
    CANZONA_REQUIRE(manifest.optimizer == optimizer, dir, "/trainer.json: saved with optimizer '",
                    manifest.optimizer, "', this run uses '", optimizer,
                    "' (optimizer state cannot change kind)");
    model_header = ckpt::read_header(model_path);
    optimizer_header = ckpt::read_header(optimizer_path);
    for (const ckpt::HfTensor& t : hf.tensors())
      require_tensor(model_path, model_header, t.name, t.shape, true);
    for (const HeldState& u : units) {
      if (u.state == "main" && !saved_main) continue;  // an fp32 checkpoint into a bf16 run
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
    for (const View& v : views)
      for (const auto& [e, p] : v.params)
        read_runs(file, model_path, model_header, hf, param_runs(v, hf, e, p), v.engine.param(e));
  });
  for (const View& v : views) v.engine.init_main_params();
  collectively(world, [&] {
    const ckpt::InFile file(optimizer_path);
    std::size_t u = 0;
    for (const View& v : views) {
      for (const engine::StateTensor& st : v.engine.optimizer_state()) {
        if (!saved_state(v.engine, st)) continue;
        const HeldState& unit = units[u++];
        if (unit.state == "main" && !saved_main) continue;
        if (unit.matrix) {
          const std::int64_t offset =
              file_offset(optimizer_header, entry(optimizer_header, unit.key), 0);
          const std::vector<std::int64_t> logical = reorder_of(hf, unit, st, v.tp());
          if (logical.empty()) {
            file.pread(offset, std::as_writable_bytes(st.values));
          } else {
            std::vector<float> stored(st.values.size());
            file.pread(offset, std::as_writable_bytes(std::span<float>(stored)));
            from_logical(stored, st.values, st.rows, st.cols, st.row_axes, logical);
          }
          continue;
        }
        for (const ElementRun& r :
             clip(hf.runs(unit.param, v.tp(), v.tp_rank()), unit.begin, unit.end)) {
          const std::string key =
              hf.tensors()[static_cast<std::size_t>(r.tensor)].name + "." + unit.state;
          file.pread(file_offset(optimizer_header, entry(optimizer_header, key), r.hf),
                     std::as_writable_bytes(st.values.subspan(static_cast<std::size_t>(r.local),
                                                              static_cast<std::size_t>(r.count))));
        }
      }
      v.engine.set_step_count(manifest.step);
    }
  });
}

std::pair<std::string, ckpt::Manifest> resolve_checkpoint(comm::Communicator& world,
                                                          const std::string& path) {
  std::pair<std::string, ckpt::Manifest> out;
  collectively(world, [&] {
    out.first = ckpt::resolve(path);
    out.second = ckpt::read_manifest(out.first);
  });
  return out;
}

void load_weights(engine::EngineSet& engines, const model::ModelSpec& spec,
                  const std::string& dir) {
  comm::Communicator& world = engines.member(0).grid->world();
  const HfLayout hf(spec);
  const std::vector<View> views = views_of(engines);
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
    for (const View& v : views)
      for (const auto& [e, p] : v.params) {
        // Read as fp32 (exact from BF16, F16 and F32), then into the buffer's dtype: a bf16
        // buffer takes a BF16 tensor's bits unchanged and rounds the others to nearest even.
        const TypedSpan values = v.engine.param(e);
        std::vector<float> wide;
        for (const ElementRun& r : param_runs(v, hf, e, p)) {
          const ckpt::WeightsDir::Found found =
              weights->find(hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
          const std::int64_t have =
              std::clamp<std::int64_t>(found.tensor->numel() - r.hf, 0, r.count);
          wide.assign(static_cast<std::size_t>(r.count), 0.0f);
          if (have > 0)
            ckpt::read_f32(*found.path, *found.header, *found.tensor, r.hf,
                           std::span<float>(wide).first(static_cast<std::size_t>(have)));
          copy_cast(ConstTypedSpan(wide), values.subspan(r.local, r.count));
        }
      }
  });
  for (const View& v : views) v.engine.init_main_params();
}

}  // namespace canzona::train
