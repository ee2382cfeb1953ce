// `canzona train` (the canzona-train executable; `canzona train ARGS` execs it, so the other
// commands never load libtorch): the Qwen3 model trained on real text under DP x TP with the
// engine, every strategy from the same init on the same batches (docs/training.md).
//
// Errors. Bad flags, models, data and tokenizers are found before MPI starts (one line, exit 2;
// under a launcher the ranks agree on it and it is printed once). Then every rank's effective
// configuration is compared before the first collective. A non-finite loss or gradient stops
// every rank at that step with the first non-finite tensor named (exit 1), before the optimizer
// changes anything; nothing is written.
#include <ATen/cpu/Utils.h>
#include <fcntl.h>
#include <sys/file.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "../launch.h"
#include "../planning_flags.h"
#include "canzona/ckpt/checkpoint.h"
#include "canzona/comm/mpi.h"
#include "canzona/comm/timeout.h"
#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/common/fnv.h"
#include "canzona/common/json_io.h"
#include "canzona/launch/job.h"
#include "canzona/optim/blas_env.h"
#include "canzona/train/data.h"
#include "canzona/train/memory.h"
#include "canzona/train/plot.h"
#include "canzona/train/trainer.h"
#include "train_report.h"

namespace canzona::apps {
namespace {

constexpr double kMaxLr = 1000.0;  // --lr / --adamw-lr: the optimizers' kMaxRate

struct TrainFlags : PlanningFlags {
  std::string model;  // "": qwen3-cpu, or the checkpoint's config.json with --resume / --init-from
  std::string strategies = "lb-asc";
  std::string optimizer_options = "{}";
  double lr = 0.0, adamw_lr = 0.0;
  bool lr_given = false, adamw_lr_given = false, warmup_given = false;
  std::int64_t steps = 100, seq_len = 128, micro_batch = 4, grad_accum = 1;
  std::int64_t warmup = 10, eval_every = 25, eval_windows = 64;  // warmup: min(10, --steps)
  std::int64_t log_interval = 10;  // a step line every N steps and after the last
  std::string schedule = "cosine";
  double min_lr_ratio = 0.1;
  train::DataOptions data;
  std::string seed;  // parse_seed; "": 1, or the checkpoint's with --resume
  std::string reduce_mode = "deterministic";
  double collective_timeout = comm::kDefaultCollectiveTimeoutS;
  bool no_pipeline = false, verify = false;
  std::string json, trace, plot, plot_from;
  std::int64_t poison_step = 0;
  int poison_rank = 0;
  train::CheckpointOptions checkpoint;
  std::int64_t kill_step = 0;
  int kill_rank = 0;
  bool kill_in_save = false;
  bool stall = false;  // --test-stall: the kill step stalls the rank instead
};

void add_flags(CLI::App& app, TrainFlags& f) {
  f.optimizer = "muon";
  app.add_option("--model", f.model,
                 "Preset (qwen3-cpu, qwen3-tiny, ...) or HF config.json (default: qwen3-cpu, or "
                 "the config.json of --resume / --init-from)");
  add_planning_flags(&app, f, PlanningCommand::kRun);
  app.get_option("--optimizer")
      ->description("Matrix optimizer: muon | shampoo | soap, or adamw for every param");
  app.add_option("--strategy,--strategies", f.strategies,
                 "Comma list of sc, layerwise, layerwise-paper, asc, lb-asc, fsdp-a2a, or all: "
                 "each trains from the same init")
      ->capture_default_str();
  app.add_option("--optimizer-options", f.optimizer_options,
                 "JSON object of the matrix optimizer's options")
      ->capture_default_str();
  app.add_option("--lr", f.lr, "Base lr of the matrix optimizer (default: its own default)")
      ->each([&f](const std::string&) { f.lr_given = true; });
  app.add_option("--adamw-lr", f.adamw_lr, "Base lr of AdamW (default: its own default)")
      ->each([&f](const std::string&) { f.adamw_lr_given = true; });
  app.add_option("--steps", f.steps, "Optimizer steps")->capture_default_str();
  app.add_option("--seq-len", f.seq_len, "Tokens per sequence")->capture_default_str();
  app.add_option("--micro-batch", f.micro_batch, "Sequences per micro-batch")
      ->capture_default_str();
  app.add_option("--grad-accum", f.grad_accum, "Micro-batches per DP rank and step")
      ->capture_default_str();
  app.add_option("--zero-stage", f.zero_stage,
                 "1: params and gradients whole on every rank; 3: each rank keeps its DP shard "
                 "of them, gathered around their use (asc, lb-asc, fsdp-a2a)")
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "Linear lr warmup steps (default: 10, or --steps if fewer)")
      ->each([&f](const std::string&) { f.warmup_given = true; });
  app.add_option("--schedule", f.schedule, "constant | linear | cosine")->capture_default_str();
  app.add_option("--min-lr-ratio", f.min_lr_ratio, "Final lr / base lr")->capture_default_str();
  app.add_option("--eval-every", f.eval_every, "Validation loss every N steps (0 = off)")
      ->capture_default_str();
  app.add_option("--eval-windows", f.eval_windows, "Held-out sequences per validation")
      ->capture_default_str();
  app.add_option("--log-interval", f.log_interval,
                 "Print a step line every N steps and after the last (--json keeps every step)")
      ->capture_default_str();
  app.add_option("--data", f.data.data,
                 "UTF-8 text (byte tokens), or an llm.c .bin shard (default: Debian fortunes)");
  app.add_option("--val-data", f.data.val_data, "Held-out file (default: the end of --data)");
  app.add_option("--tokenizer", f.data.tokenizer, "SentencePiece model (spm_train) for text data");
  app.add_option("--val-fraction", f.data.val_fraction, "Held-out share of --data")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Init and data sampling (default: 1, or the checkpoint's)");
  app.add_option("--reduce-mode", f.reduce_mode, "deterministic | native")->capture_default_str();
  app.add_option("--collective-timeout", f.collective_timeout,
                 "Seconds one collective or message may take before the rank ends (exit 2)")
      ->capture_default_str();
  app.add_flag("--no-pipeline", f.no_pipeline, "TP micro groups one after another");
  app.add_flag("--verify", f.verify,
               "Compare with a single-process run of the same batches (bitwise at TP = 1)");
  app.add_option("--json", f.json, "Write loss curves and per-step times as JSON to FILE");
  app.add_option("--trace", f.trace, "Chrome trace of the first strategy to FILE");
  app.add_option("--plot", f.plot, "Write the loss curves as SVG to FILE");
  app.add_option("--plot-from", f.plot_from,
                 "Comma list of --json files of earlier runs: only plot their curves to --plot");
  app.add_option("--save-dir", f.checkpoint.save_dir,
                 "Write checkpoints step-<N> here (after the last step, and every --save-every)");
  app.add_option("--save-every", f.checkpoint.save_every,
                 "Checkpoint every N steps (0 = last only)")
      ->capture_default_str();
  app.add_option("--keep", f.checkpoint.keep, "Keep the newest K checkpoints (0 = all)")
      ->capture_default_str();
  app.add_option("--resume", f.checkpoint.resume,
                 "Continue from a checkpoint directory, or the newest one in a --save-dir; any DP, "
                 "TP and strategy");
  app.add_option("--init-from", f.checkpoint.init_from,
                 "Start from the weights of a Hugging Face directory (model.safetensors or a "
                 "sharded index; config.json)");
  app.add_option("--test-kill-step", f.kill_step)->group("");
  app.add_option("--test-kill-rank", f.kill_rank)->group("");
  app.add_flag("--test-kill-in-save", f.kill_in_save)->group("");
  app.add_flag("--test-stall", f.stall)->group("");
  app.add_option("--test-poison-step", f.poison_step)->group("");
  app.add_option("--test-poison-rank", f.poison_rank)->group("");
}

nlohmann::json parse_options_json(const std::string& text) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    CANZONA_REQUIRE(j.is_object(), "--optimizer-options must be a JSON object (got ", text, ")");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str("--optimizer-options is not valid JSON: ", e.what()));
  }
}

model::TransformerConfig load_config(const std::string& arg) {
  for (const std::string& name : model::preset_names())
    if (name == arg) return model::preset(arg);
  CANZONA_REQUIRE(arg.size() > 5 && arg.ends_with(".json"), "--model '", arg,
                  "' is neither a preset nor a Hugging Face config.json");
  const nlohmann::json j = read_json_file(arg);
  CANZONA_REQUIRE(!j.contains("params"), "--model ", arg,
                  ": train needs a preset or a Hugging Face config.json, not a param list");
  model::TransformerConfig config = model::read_hf_config(arg);
  CANZONA_REQUIRE(config.unsupported_rope.empty(), "--model ", arg, ": ", config.unsupported_rope,
                  " is not supported by train (only the default RoPE is modelled)");
  return config;
}

// --save-dir must be a directory we can write (created when missing), found before training.
void check_save_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  CANZONA_REQUIRE(!ec && std::filesystem::is_directory(dir, ec), "--save-dir ", dir,
                  ": cannot create directory", ec ? ": " + ec.message() : std::string());
  CANZONA_REQUIRE(::access(dir.c_str(), W_OK) == 0, "--save-dir ", dir, ": not writable");
}

// World rank as the launcher tells it before MPI starts (OMPI_COMM_WORLD_RANK or PMI_RANK); 0
// when not launched by MPI.
int world_rank_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* text = std::getenv(name);
    if (text == nullptr) continue;
    char* end = nullptr;
    const long rank = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && rank >= 0) return static_cast<int>(rank);
  }
  return 0;
}

// One run per --save-dir: world rank 0 holds an exclusive flock on DIR/.lock (with its pid in
// it) until the process ends, so a second run into the same directory is refused before it
// trains instead of interleaving checkpoints. The lock dies with the process, so a crashed run
// never leaves the directory locked.
void lock_save_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / ".lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  CANZONA_REQUIRE(fd >= 0, "--save-dir ", dir, ": cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw UsageError(str("--save-dir ", dir, ": another run is writing checkpoints there (", path,
                         " is locked", error == EWOULDBLOCK && !pid.empty() ? " by pid " + pid : "",
                         "); give each run its own --save-dir"));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    const ssize_t written = ::pwrite(fd, pid.data(), pid.size(), 0);
    (void)written;  // the pid is information only; the lock is what counts
  }
  // fd stays open (and locked) for the life of the process.
}

struct Launch {
  train::MemoryNeed memory;
  train::MemoryAvailable available;
  train::TrainOptions options;
  model::TransformerConfig config;
  model::ModelSpec spec;
  train::Corpus corpus;
  launch::Settings settings;
};

Launch prepare(TrainFlags& f) {
  Launch l;
  train::TrainOptions& o = l.options;
  launch::JobOptions& r = o.job;
  r.optimizer_options = parse_options_json(f.optimizer_options);
  apply_planning_flags(f, "train", r);  // after the options: --ns-* join them
  r.reduce_mode = comm::parse_reduce_mode(f.reduce_mode);
  comm::set_collective_timeout(f.collective_timeout);
  r.pipeline = !f.no_pipeline;
  // --resume / --init-from: the checkpoint's model and (resume) data seed unless given.
  std::string resume_dir, seed = f.seed.empty() ? "1" : f.seed;
  ckpt::Manifest m;
  if (!f.checkpoint.resume.empty()) {
    resume_dir = ckpt::resolve(f.checkpoint.resume);
    m = ckpt::read_manifest(resume_dir);
    const nlohmann::json& run_seed = m.run.contains("seed") ? m.run["seed"] : nlohmann::json();
    CANZONA_REQUIRE(run_seed.is_number_unsigned(), resume_dir,
                    "/trainer.json: key 'run.seed' must be a non-negative integer (got ",
                    run_seed.dump(), ")");
    const std::string saved = std::to_string(run_seed.get<std::uint64_t>());
    CANZONA_REQUIRE(f.seed.empty() || parse_seed(f.seed) == parse_seed(saved), "--seed ", f.seed,
                    " differs from the seed ", saved, " of ", resume_dir,
                    " (the data sampler continues from it)");
    seed = saved;
  }
  CANZONA_REQUIRE(
      !f.verify || (f.checkpoint.resume.empty() && f.checkpoint.init_from.empty()),
      "--verify replays the run from its init; it cannot follow --resume or --init-from");
  if (!f.checkpoint.init_from.empty()) {
    std::error_code ec;
    const std::string& dir = f.checkpoint.init_from;
    CANZONA_REQUIRE(std::filesystem::exists(dir, ec), "--init-from ", dir, ": no such directory");
    CANZONA_REQUIRE(std::filesystem::is_directory(dir, ec), "--init-from ", dir,
                    ": not a directory (give the Hugging Face model directory holding "
                    "config.json and model.safetensors or its sharded index)");
  }
  const bool model_given = !f.model.empty();
  const std::string weights_dir = !resume_dir.empty() ? resume_dir : f.checkpoint.init_from;
  if (f.model.empty())
    f.model = weights_dir.empty() ? "qwen3-cpu" : weights_dir + "/" + ckpt::kConfigFile;
  r.seed = parse_seed(seed);
  r.model = f.model;
  // --optimizer adamw: every param element-wise; the matrix optimizer then updates nothing.
  o.all_adamw = f.optimizer == "adamw";
  r.optimizer = o.all_adamw ? "muon" : f.optimizer;
  // Given learning rates are range-checked here (an optimizer's own check would name the option
  // key, not the flag); an absent one leaves the optimizer's default.
  for (const auto& [given, value, flag] : {std::tuple{f.lr_given, f.lr, "--lr"},
                                           std::tuple{f.adamw_lr_given, f.adamw_lr, "--adamw-lr"}})
    CANZONA_REQUIRE(!given || (std::isfinite(value) && value >= 0.0 && value <= kMaxLr), flag,
                    " = ", value, " must be a finite number in [0, ", kMaxLr, "]");
  if (f.lr_given) (o.all_adamw ? r.adamw_options : r.optimizer_options)["lr"] = f.lr;
  if (f.adamw_lr_given && !o.all_adamw) r.adamw_options["lr"] = f.adamw_lr;
  CANZONA_REQUIRE(!(o.all_adamw && f.adamw_lr_given),
                  "--adamw-lr is for --optimizer muon|shampoo|soap; with adamw use --lr");
  o.steps = f.steps;
  o.seq_len = f.seq_len;
  o.micro_batch = f.micro_batch;
  o.grad_accum = f.grad_accum;
  o.eval_every = f.eval_every;
  o.keep_final_params = f.verify;
  o.eval_windows = f.eval_windows;
  o.schedule.schedule = train::parse_schedule(f.schedule);
  o.schedule.warmup = f.warmup_given ? f.warmup : std::min<std::int64_t>(f.warmup, f.steps);
  o.schedule.total = f.steps;
  o.schedule.min_ratio = f.min_lr_ratio;
  // Under ZeRO-3 "all" is every strategy that shards params along its cuts.
  o.strategies = plan::strategies_for_stage(f.strategies, o.job.zero_stage);
  o.trace_path = f.trace;
  o.checkpoint = f.checkpoint;
  if (!resume_dir.empty()) o.checkpoint.resume = resume_dir;  // resolved once
  for (const auto& [value, flag] :
       {std::pair{f.kill_step, "--test-kill-step"}, std::pair{f.poison_step, "--test-poison-step"},
        std::pair{std::int64_t{f.kill_rank}, "--test-kill-rank"},
        std::pair{std::int64_t{f.poison_rank}, "--test-poison-rank"}})
    require_in_range(value, 0, 1 << 30, flag, "2^30");
  // The hidden test flags arm faults (common/faults.h); step 0 = off.
  if (f.poison_step > 0) faults::arm(faults::Fault::kPoisonLoss, {f.poison_rank, f.poison_step});
  if (f.kill_step > 0)
    faults::arm(f.kill_in_save ? faults::Fault::kKillInSave
                : f.stall      ? faults::Fault::kStallAfterStep
                               : faults::Fault::kKillAfterStep,
                {f.kill_rank, f.kill_step});
  train::validate(o);
  require_in_range(f.log_interval, 1, std::int64_t{1} << 40, "--log-interval", "2^40");
  if (!o.checkpoint.save_dir.empty()) {
    check_save_dir(o.checkpoint.save_dir);
    if (world_rank_from_launcher() == 0) lock_save_dir(o.checkpoint.save_dir);
  }
  for (const std::string* path : {&f.json, &f.trace, &f.plot})
    if (!path->empty())
      check_output_path(*path, path == &f.json    ? "--json"
                               : path == &f.trace ? "--trace"
                                                  : "--plot");
  l.config = load_config(f.model);
  if (!model_given && !resume_dir.empty())  // the model's own name, not the directory's
    l.config.name = m.run.value("model", l.config.name);
  require_in_range(o.seq_len, 1, l.config.max_position_embeddings, "--seq-len",
                   str("max_position_embeddings of --model ", f.model));
  l.spec = train::training_spec(l.config, o);
  // Megatron's grid: the world is DP x TP x PP and EP is carved out of DP x TP. A launch sized
  // as if EP were another axis gets the grid it meant spelled out.
  const int world = comm::launched_world_size();
  const int per_dp = o.job.dims.tp * o.job.dims.pp;
  const bool fits = world % per_dp == 0 && (world / o.job.dims.pp) % o.job.dims.ep == 0;
  CANZONA_REQUIRE(o.job.dims.ep == 1 || world == 1 || world == o.job.dims.world(), "world size ",
                  world,
                  " != ", to_string(ParallelDims{o.job.dims.dp, o.job.dims.tp, o.job.dims.pp}),
                  ": expert parallelism is carved out of DP x TP as in Megatron (expert DP = DP x "
                  "TP / EP)",
                  fits ? str(", so ", world, " ranks at --ep ", o.job.dims.ep, " and --tp ",
                             o.job.dims.tp, " are --dp ", world / per_dp, " --ep ", o.job.dims.ep)
                       : std::string());
  // Memory a run cannot have is refused here, before MPI starts and anything is allocated.
  train::MemoryNeed need = train::estimate_memory(l.config, l.spec, o);
  if (f.verify && world_rank_from_launcher() == 0) {
    const train::MemoryNeed reference = train::estimate_reference_memory(l.config, l.spec, o);
    if (reference.total() > need.total()) need = reference;
  }
  l.memory = need;
  l.available = train::available_memory();
  train::check_memory_fits(need, train::ranks_on_this_node(), l.available, o);
  l.corpus = train::load_corpus(f.data, o.seq_len + 1);
  CANZONA_REQUIRE(l.corpus.vocab_size <= l.config.vocab_size, "--",
                  f.data.tokenizer.empty() ? "data" : "tokenizer", ": vocabulary of ",
                  l.corpus.vocab_size, " tokens (", l.corpus.tokenizer,
                  ") is larger than the model's vocab_size ", l.config.vocab_size, " (--model ",
                  f.model, ")");
  l.settings = launch::job_settings(r, o.strategies, l.spec);
  const auto add = [&l](const char* key, const std::string& value) {
    l.settings.push_back({key, value});
  };
  add("--verify", f.verify ? "true" : "false");
  add("--trace", f.trace);
  // The job's --optimizer is the matrix optimizer (muon under --optimizer adamw); the flag as
  // given says both, so the one setting of that name carries it.
  for (launch::Setting& s : l.settings)
    if (s.key == "--optimizer") s.value = f.optimizer;
  add("--steps", std::to_string(o.steps));
  add("--seq-len", std::to_string(o.seq_len));
  add("--micro-batch", std::to_string(o.micro_batch));
  add("--grad-accum", std::to_string(o.grad_accum));
  add("--warmup", std::to_string(o.schedule.warmup));
  add("--schedule", f.schedule);
  add("--min-lr-ratio", str(o.schedule.min_ratio));
  add("--eval-every", std::to_string(o.eval_every));
  add("--eval-windows", std::to_string(o.eval_windows));
  // The tokens themselves, hashed: ranks that read a file while it changed, or different files
  // under one name, disagree here instead of training on different data.
  std::uint64_t tokens_hash = kFnvOffset;
  for (const std::vector<std::int32_t>* part : {&l.corpus.train, &l.corpus.val})
    fnv1a_mix(tokens_hash, part->data(), part->size() * sizeof(std::int32_t));
  add("corpus", str(l.corpus.train.size(), "+", l.corpus.val.size(), " tokens, vocab ",
                    l.corpus.vocab_size, ", ", l.corpus.source));
  add("corpus tokens FNV-1a", str(tokens_hash));
  add("--json", f.json);
  add("--plot", f.plot);
  add("--save-dir", f.checkpoint.save_dir);
  add("--save-every", std::to_string(f.checkpoint.save_every));
  add("--keep", std::to_string(f.checkpoint.keep));
  add("--resume", resume_dir);
  add("--init-from", f.checkpoint.init_from);
  return l;
}

// One thread's matmul rate (GFLOP/s) in `dtype` (fp32: sgemm): the best of three 0.1 s trials of
// 1024^3 products (the best, so a neighbour's burst on a shared core does not lower the
// reference).
double measure_matmul_gflops(torch::Dtype dtype = torch::kFloat32) {
  const torch::Tensor a = torch::rand({1024, 1024}).to(dtype),
                      b = torch::rand({1024, 1024}).to(dtype);
  torch::mm(a, b);
  double best = 0.0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
    int n = 0;
    double seconds = 0.0;
    while (seconds < 0.1) {
      torch::mm(a, b);
      ++n;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    best = std::max(best, 2.0 * 1024.0 * 1024.0 * 1024.0 * n / seconds / 1e9);
  }
  return best;
}

// The native bf16 instructions of this CPU that libtorch detects (its cpuinfo), named; "" when
// none (libtorch then emulates bf16 arithmetic with fp32 instructions).
std::string bf16_instructions() {
  const auto caps = at::cpu::get_cpu_capabilities();
  std::string out;
  for (const auto& [key, name] :
       {std::pair{"amx_bf16", "AMX-BF16"}, {"avx512_bf16", "AVX512-BF16"}}) {
    const auto it = caps.find(key);
    if (it != caps.end() && it->second.isBool() && it->second.toBool())
      out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

// The curves of every run of a --json document, labelled "<optimizer> (<strategy>)". Throws
// UsageError naming `where` when the document lacks a key.
void add_curves(const nlohmann::json& doc, const std::string& where,
                std::vector<train::RunCurves>& runs) {
  try {
    for (const nlohmann::json& run : doc.at("runs")) {
      train::RunCurves r;
      r.label = str(doc.at("optimizer").get<std::string>(), " (",
                    run.at("strategy").get<std::string>(), ")");
      for (const nlohmann::json& v : run.at("val")) {
        r.val.x.push_back(v.at("step").get<double>());
        r.val.y.push_back(v.at("loss").get<double>());
      }
      for (const nlohmann::json& st : run.at("steps")) {
        r.train.x.push_back(st.at("step").get<double>());
        r.train.y.push_back(st.at("loss").get<double>());
      }
      runs.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str(where, ": not a canzona train --json document (", e.what(), ")"));
  }
}

std::string loss_svg(const std::vector<train::RunCurves>& curves, const std::string& title,
                     double unigram_entropy) {
  train::PlotOptions p;
  p.title = title;
  p.reference_y = unigram_entropy;
  p.reference_label = "unigram entropy of the training tokens";
  return train::loss_plot_svg(curves, p);
}

// TP > 1 changes the summation order of the row-parallel products and of the vocabulary-parallel
// softmax, so losses agree with the single process only to rounding: fp32 rounding (~1e-7
// relative) amplified over a few steps by the optimizer stays orders of magnitude below this.
constexpr double kTpLossTolerance = 1e-4;
// The same under --precision bf16, whose activations round to 2^-9 relative: the other order
// rounds other activations. Measured: 1.07e-4 at qwen3-tiny DP 2 x TP 2, 3 steps, on an AMD EPYC
// with AVX2 only (libtorch's bf16 matmul without bf16 instructions), below 1e-4 on an Intel Xeon
// with AMX; 1e-3 keeps 9x of margin and stays far below what a wrong shard or sum gives (the
// training loss moves by more than 1e-2 per step here).
constexpr double kTpLossToleranceBf16 = 1e-3;

// --verify on world rank 0: returns false when a TP = 1 run is not bitwise the reference (under
// kDeterministic), or its losses differ from the reference's by more than kTpLossTolerance
// (kTpLossToleranceBf16 in bf16; relative) where it need not be bitwise: at TP > 1, EP > 1 or under
// kNative (another summation order). One line per strategy: bitwise identical, within the bound (x
// of y), or FAILED.
bool verify(const Launch& l, const std::vector<train::StrategyRun>& runs) {
  const train::ReferenceRun ref = train::run_reference(l.config, l.spec, l.options, l.corpus);
  // Bitwise on TP = 1, except for a MoE model under EP > 1: there an expert's weight gradient is
  // one GEMM over its EP group's tokens, the reference's a sum of one GEMM per DP rank.
  const bool ep = l.config.is_moe() && l.options.job.dims.ep > 1;
  const bool native = l.options.job.reduce_mode != comm::ReduceMode::kDeterministic;
  const bool exact = l.options.job.dims.tp == 1 && !ep && !native;
  const char* why = l.options.job.dims.tp > 1 ? "TP > 1" : ep ? "EP > 1" : "native reduction";
  const double tolerance =
      l.options.job.precision == DType::kBF16 ? kTpLossToleranceBf16 : kTpLossTolerance;
  bool ok = true;
  for (const train::StrategyRun& r : runs) {
    double max_rel = 0.0;
    bool bitwise = true;
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
      const double a = r.steps[i].loss, b = ref.losses[i];
      max_rel = std::max(max_rel, std::fabs(a - b) / std::max(std::fabs(b), 1e-30));
      bitwise = bitwise && std::memcmp(&a, &b, sizeof a) == 0;
    }
    bool params_bitwise = l.options.job.dims.tp == 1;
    for (std::size_t p = 0; params_bitwise && p < ref.params.size(); ++p)
      params_bitwise = r.final_params[p].size() == ref.params[p].size() &&
                       std::memcmp(r.final_params[p].data(), ref.params[p].data(),
                                   ref.params[p].size() * sizeof(float)) == 0;
    std::string status;
    if (exact && bitwise && params_bitwise) {
      status =
          "loss curve bitwise identical, max relative loss difference 0, final params "
          "bitwise identical";
    } else if (exact) {
      ok = false;
      status = str("FAILED: loss curve ", bitwise ? "bitwise identical" : "differs",
                   ", final params ", params_bitwise ? "bitwise identical" : "differ",
                   ", max relative loss difference ", max_rel, " (bitwise required at TP = 1)");
    } else if (max_rel <= tolerance) {
      status = str("within bound (max relative loss difference ", max_rel, " of ", tolerance, ", ",
                   why, ")");
    } else {
      ok = false;
      status = str("FAILED: max relative loss difference ", max_rel, " exceeds the bound ",
                   tolerance, " (", why, ")");
    }
    std::printf("verify %-*s vs single process: %s\n", plan::strategy_name_width(),
                plan::to_string(r.strategy), status.c_str());
  }
  return ok;
}

// --plot-from: the curves of earlier --json files in one SVG (no MPI, no training).
int plot_from(const TrainFlags& flags) {
  CANZONA_REQUIRE(!flags.plot.empty(), "--plot-from needs --plot FILE");
  check_output_path(flags.plot, "--plot");
  std::vector<train::RunCurves> curves;
  nlohmann::json last;
  std::stringstream list(flags.plot_from);
  for (std::string path; std::getline(list, path, ',');) {
    last = read_json_file(path);
    add_curves(last, "--plot-from " + path, curves);
  }
  CANZONA_REQUIRE(last.contains("model") && last.contains("unigram_entropy"),
                  "--plot-from names no canzona train --json document");
  write_text_file(flags.plot,
                  loss_svg(curves, str(last["model"].get<std::string>(), ": loss per optimizer"),
                           last["unigram_entropy"].get<double>()));
  std::cout << "loss curves: " << flags.plot << "\n";
  return 0;
}

int execute(TrainFlags& flags) {
  if (!flags.plot_from.empty()) return plot_from(flags);
  Launch launch;
  LaunchSteps steps;
  steps.prepare = [&] {
    launch = prepare(flags);
    return launch.settings;
  };
  steps.grid_dims = [&] { return launch.options.job.dims; };
  steps.reduce_mode = [&] { return launch.options.job.reduce_mode; };
  const auto train_on = [&](comm::Grid& grid) {
    const train::TrainOptions& o = launch.options;
    int exit_code = 0;
    const bool reporter = grid.world().rank() == 0;
    TrainHeader h;
    h.model = launch.spec.name;
    h.params = launch.spec.total_numel();
    h.active_params = launch.spec.active_numel();
    h.matmul_params = h.active_params;   // a token's experts only
    if (!launch.config.tied_embeddings)  // the input embedding is a lookup, not a product
      h.matmul_params -= launch.spec.params.front().numel();
    h.dp = o.job.dims.dp;
    h.tp = o.job.dims.tp;
    h.pp = o.job.dims.pp;
    if (h.pp > 1) h.stage_memory = train::estimate_stage_memory(launch.config, launch.spec, o);
    h.ep = launch.config.is_moe() ? o.job.dims.ep : 0;
    h.optimizer = flags.optimizer;
    h.data = launch.corpus.source;
    h.train_tokens = static_cast<std::int64_t>(launch.corpus.train.size());
    h.val_tokens = static_cast<std::int64_t>(launch.corpus.val.size());
    h.vocab = launch.corpus.vocab_size;
    h.blas_core = optim::blas_core_name();
    h.blas_core_source = optim::blas_core_source();
    h.memory = launch.memory;
    h.memory_available = launch.available.bytes;
    h.ranks_on_node = train::ranks_on_this_node();
    if (reporter) {
      h.unigram_entropy = train::unigram_entropy(launch.corpus.train);
      h.sgemm_gflops = measure_matmul_gflops();
      if (o.job.precision == DType::kBF16) {
        h.bf16_gflops = measure_matmul_gflops(torch::kBFloat16);
        h.bf16_native = bf16_instructions();
      }
      std::cout << format_header(h, o) << std::flush;
    }
    train::Progress progress;
    // A step line every --log-interval steps and after the last; a step that validates carries
    // its validation loss on the same line (held until the validation reports), other
    // validations get a line of their own.
    struct StepLines {
      const train::StrategyRun* run = nullptr;
      train::StepRecord held;
      bool holding = false;
    };
    auto lines = std::make_shared<StepLines>();
    progress.step = [&o, moe = h.ep > 0, every = flags.log_interval, lines](
                        const train::StrategyRun& r, const train::StepRecord& s) {
      if (s.step % every != 0 && s.step != o.steps) return;
      if (train::validates_after(o, s.step)) {
        *lines = {&r, s, true};
        return;
      }
      std::cout << format_step(r, s, o.steps, moe) << std::flush;
    };
    progress.val = [&o, moe = h.ep > 0, lines](const train::StrategyRun& r,
                                               const train::ValRecord& v) {
      if (lines->holding && lines->run == &r && lines->held.step == v.step)
        std::cout << format_step(r, lines->held, o.steps, moe, &v) << std::flush;
      else
        std::cout << format_val(r, v) << std::flush;
      lines->holding = false;
    };
    progress.saved = [](const std::string& dir, double ms) {
      std::printf("checkpoint saved: %s (%.0f ms)\n", dir.c_str(), ms);
      std::fflush(stdout);
    };
    progress.loaded = [](const std::string& dir, double ms) {
      std::printf("checkpoint loaded: %s (%.0f ms)\n", dir.c_str(), ms);
      std::fflush(stdout);
    };
    // A MoE model's expert groups (Megatron's expert DP and EP), collective.
    comm::ExpertGroups experts;
    if (launch.config.is_moe()) experts = comm::make_mpi_expert_groups(grid, o.job.reduce_mode);
    const std::vector<train::StrategyRun> runs =
        train::train(grid, launch.config, launch.spec, o, launch.corpus, progress,
                     experts.grid ? &experts : nullptr);
    // Rank 0 reports and writes the outputs; a failure there (a full disk under --json) is
    // shared with every rank, so all of them end the same way.
    std::string report_error;
    if (reporter) {
      try {
        std::cout << format_summary(h, o, runs) << std::flush;
        if (!flags.json.empty()) write_json_file(flags.json, train_json(h, o, runs));
        if (!flags.plot.empty()) {
          std::vector<train::RunCurves> curves;
          add_curves(train_json(h, o, runs), "--plot", curves);
          write_text_file(flags.plot, loss_svg(curves,
                                               str(h.model, ", DP ", h.dp, " x TP ", h.tp,
                                                   h.ep > 0 ? str(" x EP ", h.ep) : std::string()),
                                               h.unigram_entropy));
          std::cout << "loss curves: " << flags.plot << "\n";
        }
        if (!flags.trace.empty()) std::cout << "trace: " << flags.trace << "\n";
        if (flags.verify && !verify(launch, runs)) exit_code = 1;
        std::cout << std::flush;
      } catch (const std::exception& e) {
        report_error = e.what();
      }
    }
    const auto errors = grid.world().all_gather_bytes(
        std::as_bytes(std::span<const char>(report_error.data(), report_error.size())));
    if (!errors[0].empty())
      throw UsageError(
          std::string(reinterpret_cast<const char*>(errors[0].data()), errors[0].size()));
    const std::vector<float> code = {static_cast<float>(exit_code)};
    std::vector<float> agreed = code;
    grid.world().all_reduce(agreed, agreed).wait();
    return agreed[0] > 0.0f ? 1 : 0;
  };
  steps.run = [&](comm::Grid& grid) {
    try {
      return train_on(grid);
    } catch (const train::Interrupted& e) {
      comm::end_job(e.what(), e.exit_code());  // a signal, seen alike by every rank
    }
  };
  return run_launched(steps);
}

}  // namespace
}  // namespace canzona::apps

int main(int argc, char** argv) {
  // A checkpoint write past RLIMIT_FSIZE must fail with EFBIG (a clear error), not kill us.
  std::signal(SIGXFSZ, SIG_IGN);
  canzona::optim::ensure_blas_core(argc, argv);
  torch::set_num_threads(1);
  CLI::App app{"Train a Qwen3-architecture model under DP x TP with the Canzona engine",
               "canzona train"};
  canzona::apps::TrainFlags flags;
  canzona::apps::add_flags(app, flags);
  try {
    app.parse(argc, argv);
    return canzona::apps::execute(flags);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (canzona::comm::launched_world_size() > 1) return canzona::apps::launch_error_exit(e.what());
    std::fprintf(stderr, "canzona: error: %s\n", e.what());
    return 2;
  } catch (const canzona::UsageError& e) {
    std::fprintf(stderr, "canzona: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canzona: failed: %s\n", e.what());
    return 1;
  }
}
