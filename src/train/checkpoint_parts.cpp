// What the checkpoint save and load share (checkpoint_parts.h).
#include "checkpoint_parts.h"

#include <algorithm>
#include <map>

#include "canzona/common/error.h"
#include "canzona/train/parallel_checkpoint.h"

namespace canzona::train::detail {
namespace {

int param_index(const model::ModelSpec& spec, const std::string& name) {
  for (std::size_t p = 0; p < spec.params.size(); ++p)
    if (spec.params[p].name == name) return static_cast<int>(p);
  CANZONA_CHECK(false, "no param ", name);
  return -1;
}

}  // namespace

using ckpt::ElementRun;
using ckpt::HfLayout;

void collectively(comm::Communicator& world, const std::function<void()>& fn) {
  std::string status = "0";
  try {
    fn();
  } catch (const UsageError& e) {
    status = std::string("2").append(e.what());
  } catch (const std::exception& e) {
    status = std::string("1").append(e.what());
  }
  const auto all = world.all_gather_bytes(std::as_bytes(std::span(status.data(), status.size())));
  for (const auto& bytes : all) {
    CANZONA_CHECK(!bytes.empty());
    const char kind = static_cast<char>(bytes[0]);
    if (kind == '0') continue;
    const std::string message(reinterpret_cast<const char*>(bytes.data()) + 1, bytes.size() - 1);
    if (kind == '2') throw UsageError(message);
    throw CheckpointError(message);
  }
}

std::string HeldState::id() const {
  return matrix ? key : str(param, "/", state, "/", tp_shard, "/", begin, "/", end);
}

bool saved_state(const engine::Engine& engine, const engine::StateTensor& st) {
  return st.state != "main" || engine.param_dtype() == DType::kBF16;
}

std::vector<HeldState> held_states(engine::Engine& engine, const model::ModelSpec& spec,
                                   const HfLayout& hf, int tp_rank) {
  std::vector<HeldState> units;
  std::map<std::pair<int, int>, int> order;  // task -> states seen
  for (const engine::StateTensor& st : engine.optimizer_state()) {
    if (!saved_state(engine, st)) continue;
    HeldState u;
    u.param = param_index(spec, st.param);
    u.state = st.state;
    const model::ParamSpec& param = spec.params[static_cast<std::size_t>(u.param)];
    if (param.is_matrix()) {
      u.matrix = true;
      u.piece = st.piece;
      u.state_index = order[{u.param, u.piece}]++;
      u.key = hf.task_name(u.param, u.piece) + "." + st.state;
      u.rows = st.rows;
      u.cols = st.cols;
    } else {
      u.tp_shard = param.tp_split_dim >= 0 ? tp_rank : 0;
      u.begin = st.begin;
      u.end = st.end;
    }
    units.push_back(u);
  }
  return units;
}

std::vector<ElementRun> clip(const std::vector<ElementRun>& runs, std::int64_t begin,
                             std::int64_t end) {
  std::vector<ElementRun> out;
  for (const ElementRun& r : runs) {
    const std::int64_t lo = std::max(begin, r.local), hi = std::min(end, r.local + r.count);
    if (lo >= hi) continue;
    out.push_back({r.tensor, lo - begin, r.hf + (lo - r.local), hi - lo});
  }
  return out;
}

namespace {

std::int64_t source_index(std::int64_t i, std::int64_t j, std::int64_t cols, int axes) {
  return axes & 4 ? std::min(i, j) * cols + std::max(i, j) : i * cols + j;
}

}  // namespace

void to_logical(std::span<const float> task, std::span<float> file, std::int64_t rows,
                std::int64_t cols, int axes, const std::vector<std::int64_t>& logical) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t li = axes & 1 ? logical[static_cast<std::size_t>(i)] : i;
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t lj = axes & 2 ? logical[static_cast<std::size_t>(j)] : j;
      file[static_cast<std::size_t>(li * cols + lj)] =
          task[static_cast<std::size_t>(source_index(i, j, cols, axes))];
    }
  }
}

void from_logical(std::span<const float> file, std::span<float> task, std::int64_t rows,
                  std::int64_t cols, int axes, const std::vector<std::int64_t>& logical) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t li = axes & 1 ? logical[static_cast<std::size_t>(i)] : i;
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t lj = axes & 2 ? logical[static_cast<std::size_t>(j)] : j;
      task[static_cast<std::size_t>(i * cols + j)] =
          file[static_cast<std::size_t>(source_index(li, lj, cols, axes))];
    }
  }
}

std::vector<std::int64_t> reorder_of(const HfLayout& hf, const HeldState& unit,
                                     const engine::StateTensor& st, int tp) {
  if (st.row_axes == 0 || st.values.empty()) return {};
  std::vector<std::int64_t> logical = hf.task_logical_rows(unit.param, unit.piece, tp);
  if (!logical.empty()) {
    const auto n = static_cast<std::int64_t>(logical.size());
    CANZONA_CHECK(
        ((st.row_axes & 1) == 0 || st.rows == n) && ((st.row_axes & 2) == 0 || st.cols == n),
        unit.key, ": ", st.rows, " x ", st.cols, " state of a ", n, "-row task");
  }
  return logical;
}

const ckpt::TensorEntry& entry(const ckpt::Header& header, const std::string& name) {
  const ckpt::TensorEntry* e = header.find(name);
  CANZONA_CHECK(e != nullptr, "tensor ", name);
  return *e;
}

std::int64_t file_offset(const ckpt::Header& header, const ckpt::TensorEntry& tensor,
                         std::int64_t element) {
  return header.data_offset + tensor.begin +
         element * static_cast<std::int64_t>(ckpt::dtype_bytes(tensor.dtype));
}

}  // namespace canzona::train::detail
