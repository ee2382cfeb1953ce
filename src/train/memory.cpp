// estimate_memory / available_memory / check_memory_fits (memory.h).
#include "canzona/train/memory.h"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "canzona/common/error.h"
#include "canzona/cost/cost.h"
#include "canzona/layout/layout.h"

namespace canzona::train {
namespace {

constexpr double kFloat = 4.0;

// Every optimizer task of `spec` as (optimizer, rows, cols): a matrix param's pieces (or the
// whole matrix), an element-wise param as one n x 1 block.
template <typename Fn>
void for_each_task(const model::ModelSpec& spec, const TrainOptions& o, Fn&& fn) {
  for (const model::ParamSpec& p : spec.params) {
    if (!p.is_matrix() || o.all_adamw) {
      fn("adamw", p.numel(), std::int64_t{1});
    } else if (p.pieces.empty()) {
      fn(o.job.optimizer, p.rows(), p.cols());
    } else {
      for (const model::Piece& piece : p.pieces) fn(o.job.optimizer, piece.rows(), p.cols());
    }
  }
}

// One micro-batch's activations on a stage of `layers` layers (`head`: it computes the logits).
double activations(const model::TransformerConfig& c, const model::ModelSpec& spec, int tp,
                   std::int64_t micro_batch, std::int64_t seq_len, int layers, bool head) {
  const double t = static_cast<double>(micro_batch) * static_cast<double>(seq_len);
  const double s = static_cast<double>(seq_len);
  const double h = static_cast<double>(c.hidden);
  const double n = static_cast<double>(c.num_heads) / tp;
  const double g = std::max(1.0, static_cast<double>(c.num_query_groups) / tp);
  const double d = static_cast<double>(c.head_dim);
  const double f = static_cast<double>(c.ffn_hidden) / tp;
  const double v = static_cast<double>(spec.arch.padded_vocab_size > 0 ? spec.arch.padded_vocab_size
                                                                       : c.vocab_size) /
                   tp;
  const double layer = 8 * h + 11 * n * d + 9 * g * d + 4 * f + n * s;
  return t * kFloat * ((layers + 1) * layer + 2 * n * s + (head ? 6 * v : 0.0) + 4 * h);
}

MemoryNeed estimate(const model::TransformerConfig& config, const model::ModelSpec& spec,
                    const TrainOptions& o, int dp, int tp) {
  MemoryNeed need;
  double local = 0.0, largest_local = 0.0;
  for (const model::ParamSpec& p : spec.params) {
    const double n = static_cast<double>(p.local_numel(tp));
    local += n;
    largest_local = std::max(largest_local, n);
  }
  // The buffers at their dtypes (--precision, --grad-reduce-in-fp32; engine::grad_dtype).
  const double param_bytes = static_cast<double>(dtype_bytes(o.job.precision));
  const double grad_bytes =
      static_cast<double>(dtype_bytes(o.job.grad_reduce_in_fp32 ? DType::kF32 : o.job.precision));
  need.params_bytes = local * param_bytes;
  need.grads_bytes = local * grad_bytes;
  if (o.job.zero_stage == ZeroStage::kThree && dp > 1) {
    // ZeRO-3: the DP shard (at most one param beyond the mean) and two gathered buckets (the one
    // in use and the prefetched one); gradients: two buckets in flight, or the whole buffer while
    // micro-batches accumulate (they are reduce-scattered in the last one only).
    std::vector<int> all(spec.params.size());
    for (std::size_t p = 0; p < all.size(); ++p) all[p] = static_cast<int>(p);
    const double bucket =
        std::min(local, static_cast<double>(o.job.bucket_size > 0
                                                ? o.job.bucket_size
                                                : layout::layer_bucket_size(spec, all, tp)));
    need.params_bytes = param_bytes * (local / dp + largest_local + 2.0 * bucket);
    need.grads_bytes = grad_bytes * (o.grad_accum > 1 ? local : std::min(local, 2.0 * bucket));
  }
  cost::CostOptions cost;
  cost.matrix_optimizer = o.job.optimizer;
  cost.optimizer_options = o.job.optimizer_options;
  double total_state = 0.0, largest = 0.0, total_main = 0.0, largest_main = 0.0;
  for_each_task(spec, o, [&](const std::string& optimizer, std::int64_t rows, std::int64_t cols) {
    const double bytes = cost::state_bytes(optimizer, rows, cols, cost);
    total_state += bytes;
    largest = std::max(largest, bytes);
    const double main = kFloat * static_cast<double>(rows) * static_cast<double>(cols);
    total_main += main;
    largest_main = std::max(largest_main, main);
  });
  // The strategies run one after another; the largest need of any of them counts.
  for (plan::Strategy strategy : o.strategies) {
    // How many ranks share the optimizer work (the strategy table's compute share).
    const auto share = static_cast<double>(plan::compute_ranks(strategy, dp, tp));
    const double extra = share > 1 ? 1.0 : 0.0;
    need.optimizer_state_bytes =
        std::max(need.optimizer_state_bytes, total_state / share + extra * largest);
    // Buffers of the engine (src/engine/optimizer_shards.cpp, grad_sync.cpp): the fp32 main copy of
    // every task this rank computes, and under a reduce-scatter its DP shard of the gradient buffer
    // (the whole buffer at DP 1).
    const bool reduce_scatter =
        plan::strategy_parts(strategy).dp_sync == plan::DpSync::kReduceScatter;
    const double shard =
        reduce_scatter ? grad_bytes * (local / dp + (dp > 1 ? largest_local : 0.0)) : 0.0;
    need.buffer_bytes =
        std::max(need.buffer_bytes, total_main / share + extra * largest_main + shard);
  }
  need.activations_bytes =
      activations(config, spec, tp, o.micro_batch, o.seq_len, config.num_layers, true);
  return need;
}

// The params of pipeline stage s (assign_stages; the last stage's tied-embedding copy too) as a
// model of their own.
model::ModelSpec stage_spec(const model::TransformerConfig& config, const model::ModelSpec& spec,
                            const TrainOptions& o, int s) {
  const int pp = o.job.dims.pp;
  const std::vector<int> stage_of = model::assign_stages(spec, pp, o.job.pp_layout);
  model::ModelSpec out = spec;
  out.params.clear();
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    const bool copy = s == pp - 1 && pp > 1 && config.tied_embeddings &&
                      spec.params[p].name == "embedding.word_embeddings.weight";
    if (stage_of[p] == s || copy) out.params.push_back(spec.params[p]);
  }
  return out;
}

// The first number of the line of `path` that starts with `key` ("MemAvailable:   123 kB").
double meminfo_kib(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream rest(line.substr(key.size()));
    double value = -1.0;
    rest >> value;
    return rest ? value : -1.0;
  }
  return -1.0;
}

// One number from a cgroup file; -1 when absent, unreadable or "max" (no limit).
double read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1.0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && std::isfinite(value) && value >= 0 ? value : -1.0;
}

// This process's cgroup v2 directory ("0::/path" in /proc/self/cgroup), or "".
std::string cgroup_v2_dir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return "";
}

}  // namespace

double MemoryNeed::total() const {
  return params_bytes + grads_bytes + optimizer_state_bytes + buffer_bytes + activations_bytes +
         runtime_bytes;
}

MemoryNeed estimate_memory(const model::TransformerConfig& config, const model::ModelSpec& spec,
                           const TrainOptions& options) {
  const std::vector<MemoryNeed> stages = estimate_stage_memory(config, spec, options);
  return *std::max_element(
      stages.begin(), stages.end(),
      [](const MemoryNeed& a, const MemoryNeed& b) { return a.total() < b.total(); });
}

std::vector<MemoryNeed> estimate_stage_memory(const model::TransformerConfig& config,
                                              const model::ModelSpec& spec,
                                              const TrainOptions& options) {
  const ParallelDims& dims = options.job.dims;
  if (dims.pp == 1) return {estimate(config, spec, options, dims.dp, dims.tp)};
  const std::vector<int> bounds =
      model::stage_bounds(spec.name, config.num_layers, dims.pp, options.job.pp_layout);
  std::vector<MemoryNeed> needs;
  for (int s = 0; s < dims.pp; ++s) {
    MemoryNeed need =
        estimate(config, stage_spec(config, spec, options, s), options, dims.dp, dims.tp);
    const int layers =
        bounds[static_cast<std::size_t>(s) + 1] - bounds[static_cast<std::size_t>(s)];
    const auto in_flight =
        static_cast<double>(std::min<std::int64_t>(dims.pp - s, options.grad_accum));
    need.activations_bytes = in_flight * activations(config, spec, dims.tp, options.micro_batch,
                                                     options.seq_len, layers, s + 1 == dims.pp);
    // A tied embedding's gradients in flight between the first and the last stage: the copy's
    // of each micro-batch the first stage has not taken yet (at most PP of them), the sum sent
    // back.
    if (config.tied_embeddings && (s == 0 || s + 1 == dims.pp)) {
      double embedding = 0.0;
      for (const model::ParamSpec& p : spec.params)
        if (p.name == "embedding.word_embeddings.weight")
          embedding = static_cast<double>(p.local_numel(dims.tp)) * kFloat;
      need.buffer_bytes +=
          embedding *
          (s == 0 ? 1.0 : static_cast<double>(std::min<std::int64_t>(dims.pp, options.grad_accum)));
    }
    need.stage = s;
    needs.push_back(need);
  }
  return needs;
}

MemoryNeed estimate_reference_memory(const model::TransformerConfig& config,
                                     const model::ModelSpec& spec, const TrainOptions& options) {
  return estimate(config, spec, options, 1, 1);
}

MemoryAvailable available_memory() {
  MemoryAvailable a;
  const double kib = meminfo_kib("/proc/meminfo", "MemAvailable:");
  if (kib >= 0) {
    a.bytes = kib * 1024.0;
    a.source = "MemAvailable in /proc/meminfo";
  }
  auto consider = [&a](double limit, double usage, const std::string& source) {
    if (limit < 0 || usage < 0) return;
    const double free = std::max(0.0, limit - usage);
    if (a.bytes < 0 || free < a.bytes) {
      a.bytes = free;
      a.source = source;
    }
  };
  const std::string v2 = cgroup_v2_dir();
  for (std::string dir = v2; !dir.empty() && dir.size() >= std::string("/sys/fs/cgroup").size();) {
    consider(read_number(dir + "/memory.max"), read_number(dir + "/memory.current"),
             "the cgroup limit " + dir + "/memory.max less memory.current");
    if (dir == "/sys/fs/cgroup" || dir == "/sys/fs/cgroup/") break;
    const std::size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos) break;
    dir = dir.substr(0, slash);
  }
  consider(read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
           read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
           "the cgroup limit memory.limit_in_bytes less memory.usage_in_bytes");
  return a;
}

int ranks_on_this_node() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* text = std::getenv(name);
    if (text == nullptr) continue;
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && n >= 1 && n <= (1L << 20)) return static_cast<int>(n);
  }
  return 1;
}

namespace {

// A "Name:   123 kB" line of /proc/self/status, in bytes; -1 when absent.
std::int64_t status_kb(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(name) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    return 1024 * std::strtoll(line.c_str() + key.size(), nullptr, 10);
  }
  return -1;
}

}  // namespace

std::int64_t resident_bytes() {
  return status_kb("VmRSS");
}

std::int64_t peak_resident_bytes() {
  return status_kb("VmHWM");
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

std::int64_t heap_in_use_bytes() {
  // tcmalloc (canzona-train links it) answers through its C extension API; glibc's counters
  // stay at zero then, so they are the fallback only.
  using Property = int (*)(const char*, std::size_t*);
  static const auto tcmalloc_property =
      reinterpret_cast<Property>(dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));
  std::size_t bytes = 0;
  if (tcmalloc_property != nullptr &&
      tcmalloc_property("generic.current_allocated_bytes", &bytes) != 0)
    return static_cast<std::int64_t>(bytes);
  const struct mallinfo2 info = mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
}

std::string format_bytes(double bytes) {
  char text[64];
  if (bytes >= 1024.0 * 1024 * 1024 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.3g TiB", bytes / (1024.0 * 1024 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024)
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024));
  else
    std::snprintf(text, sizeof text, "%.0f KiB", bytes / 1024.0);
  return text;
}

void check_memory_fits(const MemoryNeed& need, int ranks, const MemoryAvailable& available,
                       const TrainOptions& o) {
  if (available.bytes < 0) return;
  const double total = need.total() * ranks;
  if (total <= available.bytes) return;
  throw UsageError(str(
      "memory: this run needs about ", format_bytes(need.total()), " per rank",
      o.job.dims.pp > 1 ? str(" on pipeline stage ", need.stage) : std::string(), " (params ",
      format_bytes(need.params_bytes), ", gradients ", format_bytes(need.grads_bytes),
      ", optimizer state ", format_bytes(need.optimizer_state_bytes), ", buffers ",
      format_bytes(need.buffer_bytes), ", activations ", format_bytes(need.activations_bytes),
      " for --seq-len ", o.seq_len, " x --micro-batch ", o.micro_batch, ", runtime ",
      format_bytes(need.runtime_bytes), ")",
      ranks > 1 ? str(" x ", ranks, " ranks on this node = ", format_bytes(total)) : std::string(),
      ", but ", format_bytes(available.bytes), " is available (", available.source,
      "); lower --micro-batch or --seq-len (use --grad-accum for the same tokens per step), or "
      "raise --tp / --dp over more machines"));
}

}  // namespace canzona::train
