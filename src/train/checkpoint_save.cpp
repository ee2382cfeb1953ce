// Parallel, atomic checkpoint save (checkpoint.h).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "canzona/ckpt/file_io.h"
#include "canzona/ckpt/hf_names.h"
#include "canzona/ckpt/safetensors.h"
#include "canzona/common/error.h"
#include "canzona/common/json_io.h"
#include "canzona/plan/metrics.h"
#include "canzona/plan/plan_report.h"
#include "canzona/train/parallel_checkpoint.h"
#include "checkpoint_parts.h"

namespace canzona::train {
namespace {

namespace fs = std::filesystem;
using ckpt::ElementRun;
using ckpt::HfLayout;
using namespace detail;

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

}  // namespace

std::string save_checkpoint(comm::Grid& grid, engine::Engine& engine, const SaveContext& context,
                            const std::string& save_dir) {
  comm::Communicator& world = grid.world();
  const model::ModelSpec& spec = *context.spec;
  const HfLayout hf(spec);
  const int dp = grid.shape().dp, dp_rank = grid.coord().dp, tp_rank = grid.coord().tp;
  const std::string name = ckpt::step_dir_name(context.manifest.step);
  const fs::path final_dir = fs::path(save_dir) / name;
  const fs::path tmp = fs::path(save_dir) / ("." + name + ".tmp");
  const std::string model_path = (tmp / ckpt::kModelFile).string();
  const std::string optimizer_path = (tmp / ckpt::kOptimizerFile).string();

  // Who holds what: gathered, so every rank lays the files out alike and knows its writes.
  const std::vector<HeldState> mine = held_states(engine, spec, hf, tp_rank);
  const std::string text = serialize(mine);
  std::vector<std::vector<HeldState>> all;
  for (const auto& bytes :
       world.all_gather_bytes(std::as_bytes(std::span(text.data(), text.size()))))
    all.push_back(deserialize(bytes));
  std::set<std::string> claimed;  // units a lower rank writes
  for (int r = 0; r < world.rank(); ++r)
    for (const HeldState& u : all[static_cast<std::size_t>(r)]) claimed.insert(u.id());
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const ckpt::Layout model_layout = ckpt::layout_f32(model_tensors(hf), metadata);
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
      for (std::size_t p = 0; p < spec.params.size(); ++p) {
        const bool split = spec.params[p].tp_split_dim >= 0;
        if (static_cast<int>(p % static_cast<std::size_t>(dp)) != dp_rank ||
            (!split && tp_rank != 0))
          continue;
        const std::span<const float> values = engine.param(static_cast<int>(p));
        for (const ElementRun& r : hf.runs(static_cast<int>(p), grid.shape().tp, tp_rank)) {
          const ckpt::TensorEntry& t =
              entry(model_layout.header, hf.tensors()[static_cast<std::size_t>(r.tensor)].name);
          model_file.pwrite(file_offset(model_layout.header, t, r.hf),
                            bytes_of(values.subspan(static_cast<std::size_t>(r.local),
                                                    static_cast<std::size_t>(r.count))));
        }
      }
      model_file.sync();
      model_file.close();
      ckpt::OutFile optimizer_file(optimizer_path, false);
      const std::vector<engine::StateTensor> states = engine.optimizer_state();
      std::size_t u = 0;
      for (const engine::StateTensor& st : states) {
        if (st.state == "main") continue;
        const HeldState& unit = mine[u++];
        if (claimed.count(unit.id())) continue;
        const ckpt::Header& header = optimizer_layout.header;
        if (unit.matrix) {
          const std::vector<std::int64_t> logical = reorder_of(hf, unit, st, grid.shape().tp);
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
        const std::vector<ElementRun> runs =
            clip(hf.runs(unit.param, grid.shape().tp, tp_rank), unit.begin, unit.end);
        for (const ElementRun& r : runs) {
          const std::string key =
              hf.tensors()[static_cast<std::size_t>(r.tensor)].name + "." + unit.state;
          optimizer_file.pwrite(file_offset(header, entry(header, key), r.hf),
                                bytes_of(st.values.subspan(static_cast<std::size_t>(r.local),
                                                           static_cast<std::size_t>(r.count))));
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
      const model::TransformerConfig& config = *context.config;
      write_json_file((tmp / ckpt::kConfigFile).string(),
                      ckpt::hf_config(config, spec.arch.padded_vocab_size));
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
