// The training loop on the distributed-optimizer engine (trainer.h).
#include "canzona/train/trainer.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <utility>

#include "bucket_schedule.h"
#include "canzona/comm/timeout.h"
#include "canzona/common/checked.h"
#include "canzona/common/clock.h"
#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/common/fnv.h"
#include "canzona/common/hex.h"
#include "canzona/engine/engine.h"
#include "canzona/engine/engine_set.h"
#include "canzona/engine/trace.h"
#include "canzona/launch/plan_check.h"
#include "canzona/optim/optimizer.h"
#include "canzona/plan/pipeline_schedule.h"
#include "canzona/train/memory.h"
#include "canzona/train/model.h"

namespace canzona::train {
namespace {

// Bounds of validate(), each named in its message.
constexpr std::int64_t kMaxTrainSteps = 10'000'000;
constexpr std::int64_t kMaxSeqLen = 1 << 20;
constexpr std::int64_t kMaxMicroBatch = 1 << 20;
constexpr std::int64_t kMaxGradAccum = 1 << 20;

// The first SIGTERM / SIGINT this process received during train() (0: none).
volatile std::sig_atomic_t g_stop_signal = 0;
// stdout's file status flags when it is a launcher's output channel (a pipe or socket, or under
// Open MPI its pseudo-terminal), else -1 (a file, or a terminal this process shares with a shell).
volatile std::sig_atomic_t g_stdout_flags = -1;

extern "C" void on_stop_signal(int signal) {
  g_stop_signal = signal;
  // mpirun stops draining its ranks' output once it is told to terminate, and gives them one
  // second (odls_base_sigkill_timeout) before SIGKILL: a rank blocked writing a progress line
  // would never reach the agreement and the save. A non-blocking stdout lets that write (restarted
  // by SA_RESTART) return at once; the line is lost, the checkpoint is not. fcntl is
  // async-signal-safe.
  if (g_stdout_flags >= 0) fcntl(STDOUT_FILENO, F_SETFL, g_stdout_flags | O_NONBLOCK);
}

// SIGTERM and SIGINT set g_stop_signal once (SA_RESETHAND: a second one takes the default action
// and ends the process); the previous handlers come back when train() returns, and stdout its
// blocking mode.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct stat out {};
    const int flags = fcntl(STDOUT_FILENO, F_GETFL);
    const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
    g_stdout_flags = flags >= 0 && fstat(STDOUT_FILENO, &out) == 0 &&
                             (S_ISFIFO(out.st_mode) || S_ISSOCK(out.st_mode) ||
                              (launched && S_ISCHR(out.st_mode)))
                         ? flags
                         : -1;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGTERM, &action, &old_term_);
    sigaction(SIGINT, &action, &old_int_);
  }
  ~StopSignals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    if (g_stdout_flags >= 0) fcntl(STDOUT_FILENO, F_SETFL, g_stdout_flags);
    g_stdout_flags = -1;
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Collective over `world`: the largest signal number any rank received (0: none).
  static int agreed(comm::Communicator& world) {
    const comm::ScopedOpLabel op_label("the stop-signal agreement after a step");
    const std::vector<std::uint64_t> all =
        world.all_gather_u64(static_cast<std::uint64_t>(g_stop_signal));
    return static_cast<int>(*std::max_element(all.begin(), all.end()));
  }

 private:
  struct sigaction old_term_ {
  }, old_int_{};
};

const char* signal_name(int signal) {
  return signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "a signal";
}

// Runs `fn` after autograd accumulated a leaf's gradient (Megatron's grad-accumulator hook).
struct AfterAccumulate : torch::autograd::FunctionPostHook {
  explicit AfterAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }
  std::function<void()> fn_;
};

torch::Tensor tokens(const std::vector<std::int64_t>& values, std::int64_t rows,
                     std::int64_t cols) {
  return torch::from_blob(const_cast<std::int64_t*>(values.data()), {rows, cols}, torch::kInt64)
      .clone();
}

// Sum over `comm` in its reduce mode (rank order under kDeterministic).
std::vector<float> sum_over(comm::Communicator& comm, std::vector<float> values) {
  const comm::ScopedOpLabel op_label("loss sum");
  comm.all_reduce(values, values).wait();
  return values;
}

// The first non-finite gradient or param one engine of the set holds, by its model's param order
// ("" when none). Under ZeRO-3 the rank holds its shard only: the reduced gradient and the params
// of its held elements (a non-finite local gradient reaches some rank's reduced shard).
std::string first_non_finite(const engine::EngineSet::Member& member) {
  engine::Engine& engine = *member.engine;
  const model::ModelSpec& spec = *member.model;
  const bool sharded = engine.zero_stage() == ZeroStage::kThree;
  for (const char* what : {"gradient", "param"}) {
    for (std::size_t p = 0; p < spec.params.size(); ++p) {
      const int param = static_cast<int>(p);
      if (engine.bucket_of(param) < 0) continue;  // the other buffer's (MoE)
      const engine::ElementRange held =
          sharded ? engine.held_elements(param)
                  : engine::ElementRange{0, static_cast<std::int64_t>(engine.param(param).size())};
      const ConstTypedSpan typed =
          what[0] == 'g'
              ? (sharded ? engine.reduced_grad(param) : ConstTypedSpan(engine.grad(param)))
              : ConstTypedSpan(engine.param(param)).subspan(held.begin, held.end - held.begin);
      const std::int64_t i = first_non_finite(typed);
      if (i >= 0) {
        float value = 0.0f;  // widened to fp32 (exact), whichever dtype the buffer keeps
        read_f32(typed.subspan(i, 1), std::span<float>(&value, 1));
        return str(what, " of ", spec.params[p].name, " (local element ", held.begin + i, " = ",
                   value, ")");
      }
    }
  }
  return "";
}

// The model bound to the engine set's buffers, and the autograd hooks that drive the engines as
// Megatron's DDP hooks drive its buffers: each param's accumulation hook calls grad_ready on the
// last micro-batch (and lets collectives progress), and one bucket schedule per engine waits for,
// gathers and releases buckets around each forward and backward segment (bucket_schedule.h).
//
// Pipeline stages with tied embeddings (`tied`: the word embedding's index when PP > 1, else -1):
// on the last stage the model's copy is bound without a gradient buffer (its gradient leaves for
// the first stage after each micro-batch, Run::pipelined) and its accumulation hook only
// releases the bucket; on the first stage `before_tied_ready` runs right before grad_ready of the
// embedding, while the buffer still holds this rank's accumulated, unscaled gradient.
class EngineHooks {
 public:
  EngineHooks(engine::EngineSet& engines, Qwen3Model& model, const model::ModelSpec& spec,
              const model::TransformerConfig& config, const TrainOptions& options, int tied,
              std::function<void()> before_tied_ready)
      : engines_(engines), before_tied_ready_(std::move(before_tied_ready)) {
    // One bucket schedule per engine, over the segments' params that engine holds.
    for (int m = 0; m < engines.size(); ++m) {
      std::vector<std::vector<int>> segments;
      for (const std::vector<int>& params : model.forward_segments()) {
        segments.emplace_back();
        for (int p : params)
          if (engines.slot(p).member == m) segments.back().push_back(engines.slot(p).index);
      }
      schedules_.push_back(std::make_unique<BucketSchedule>(*engines.member(m).engine, segments));
    }
    const comm::Grid& grid = *engines.member(0).grid;
    const int tp = grid.dims().tp, tp_rank = grid.coord().tp;
    for (int p = 0; p < model.num_params(); ++p) {
      if (!model.holds(p)) continue;
      const engine::EngineSet::Slot slot = engines.slot(p);
      CANZONA_CHECK(slot.member >= 0, "param ", spec.params[static_cast<std::size_t>(p)].name,
                    " is in neither buffer");
      engine::Engine* engine = engines.engine_of(p);
      BucketSchedule* schedule = schedules_[static_cast<std::size_t>(slot.member)].get();
      const int i = slot.index;
      const bool copy = p == tied && model.stage().last();
      if (copy)
        model.bind_value(p, engine->param(i));
      else
        model.bind(p, engine->param(i), engine->grad(i));
      // ZeRO-3 keeps only the held elements: a param of another rank's shard is not written.
      // An expert is unsplit (expert TP 1): its init is its tp = 1 value on every rank, rounded
      // to the buffer's dtype.
      const engine::ElementRange held = engine->held_elements(i);
      if (options.job.zero_stage == ZeroStage::kOne || held.begin < held.end) {
        const TypedSpan value = engine->param(i);
        std::vector<float> init(static_cast<std::size_t>(value.size()));
        init_param(spec.params[static_cast<std::size_t>(p)], config, tp, tp_rank, options.job.seed,
                   init);
        copy_cast(ConstTypedSpan(init), value);
      }
      auto accumulator = torch::autograd::impl::grad_accumulator(model.param(p));
      const bool original = p == tied && !copy;
      accumulator->add_post_hook(
          std::make_unique<AfterAccumulate>([this, engine, i, schedule, copy, original] {
            if (last_micro_ && !copy) {
              if (original) before_tied_ready_();
              engine->grad_ready(i);
              if (in_backward_) ++grad_ready_in_backward_;
            }
            schedule->accumulated(i);
            if (last_micro_) engines_.progress();
          }));
      accumulators_.push_back(std::move(accumulator));
    }
    model.set_segment_hooks({[this](int s) {
                               for (auto& schedule : schedules_)
                                 param_sync_ms_ += schedule->before_forward(s);
                             },
                             [this](int s) {
                               for (auto& schedule : schedules_)
                                 schedule->after_forward(s, torch::GradMode::is_enabled());
                             },
                             [this](int s) {
                               for (auto& schedule : schedules_)
                                 param_sync_ms_ += schedule->before_backward(s);
                             },
                             [this] {
                               engines_.progress();
                               if (poll_) poll_();
                             }});
  }

  // Also called before every param read (the pipeline's sends in flight progress there).
  void set_poll(std::function<void()> poll) { poll_ = std::move(poll); }

  // The micro-batch about to run is the step's last: its accumulation hooks post the gradients.
  void set_last_micro(bool last) { last_micro_ = last; }
  void set_in_backward(bool in) { in_backward_ = in; }
  // grad_ready calls made inside backward since the last call (Megatron's overlap, counted).
  int take_grad_ready_in_backward() { return std::exchange(grad_ready_in_backward_, 0); }
  // Exposed waits for params in the segment hooks since the last reset.
  double param_sync_ms() const { return param_sync_ms_; }
  void reset_param_sync_ms() { param_sync_ms_ = 0.0; }

 private:
  engine::EngineSet& engines_;
  std::function<void()> before_tied_ready_;
  std::function<void()> poll_;
  std::vector<std::unique_ptr<BucketSchedule>> schedules_;  // [engine set member]
  // Keeps the hooks alive (a shared_ptr in libtorch 1.x, an intrusive_ptr in 2.x).
  std::vector<decltype(torch::autograd::impl::grad_accumulator(torch::Tensor()))> accumulators_;
  bool last_micro_ = false;
  bool in_backward_ = false;
  int grad_ready_in_backward_ = 0;
  double param_sync_ms_ = 0.0;
};

// What a run measures once its steps are done, over the whole world: the memory each rank keeps
// (max over ranks), the params and state hashes, and world rank 0's copy of the final params.
struct Measurement {
  static RunMemory memory(engine::EngineSet& engines, const model::ModelSpec& spec,
                          std::int64_t activations_bytes, std::int64_t base_rss) {
    comm::Grid& grid = *engines.member(0).grid;
    const engine::MemoryHeld held = engines.memory_held();
    const std::vector<std::int64_t> mine = {
        held.params_bytes,
        held.grads_bytes,
        held.optimizer_state_bytes,
        activations_bytes,
        peak_resident_bytes(),
        base_rss,
        held.params_bytes + held.grads_bytes + held.optimizer_state_bytes,
        held.resident_bytes};
    std::vector<std::int64_t> most = mine;
    std::int64_t state_total = 0;
    const comm::ScopedOpLabel op_label("the memory report's gather");
    for (std::size_t i = 0; i < mine.size(); ++i)
      for (std::uint64_t v : grid.world().all_gather_u64(static_cast<std::uint64_t>(mine[i]))) {
        most[i] = std::max(most[i], static_cast<std::int64_t>(v));
        if (i == 2) state_total += static_cast<std::int64_t>(v);
      }
    std::int64_t elements = 0;
    for (const model::ParamSpec& p : spec.params)  // an expert (expert TP 1): one copy
      elements +=
          model::is_expert_param(p) ? p.numel() : p.local_numel(grid.dims().tp) * grid.dims().tp;
    return {most[0], most[1], most[2],
            most[3], most[4], most[5],
            most[6], most[7], state_total + 8 * elements};
  }

  // Waits for the last param syncs, then the params and state hashes, equal on every rank.
  static void hashes(engine::EngineSet& engines, StrategyRun& result) {
    comm::Communicator& world = engines.member(0).grid->world();
    engines.finish();
    // Each engine's params hash folded into the FNV offset, in member order (canzona train's
    // hash since before the engine set: not EngineSet::params_fnv, which starts from the dense).
    std::uint64_t params = kFnvOffset, state = kFnvOffset;
    for (int m = 0; m < engines.size(); ++m) {
      const std::uint64_t fnv = engines.member(m).engine->params_fnv();
      fnv1a_mix(params, &fnv, sizeof fnv);
    }
    for (const engine::StateTensor& s : engines.optimizer_state())
      fnv1a_mix(state, s.values.data(), s.values.size() * sizeof(float));
    const comm::ScopedOpLabel op_label("the params and state hashes' gather");
    const std::vector<std::uint64_t> ranks = world.all_gather_u64(params);
    result.params_hash = fnv1a(ranks.data(), ranks.size() * sizeof(std::uint64_t));
    const std::vector<std::uint64_t> states = world.all_gather_u64(state);
    result.state_hash = fnv1a(states.data(), states.size() * sizeof(std::uint64_t));
  }

  // World rank 0's copy of every param's final value (spec order; empty elsewhere). Under ZeRO-3
  // every DP rank gathers each bucket in turn (collective). A MoE model's experts come from
  // expert DP rank 0 of each EP rank (tp = 1: expert TP 1), sent to every rank.
  static std::vector<std::vector<float>> final_params(engine::EngineSet& engines,
                                                      const model::ModelSpec& spec) {
    comm::Communicator& world = engines.member(0).grid->world();
    const bool root = world.rank() == 0;
    std::vector<std::vector<float>> values(spec.params.size());
    for (int m = 0; m < engines.size(); ++m) {
      const engine::EngineSet::Member& member = engines.member(m);
      engine::Engine& engine = *member.engine;
      const int n = static_cast<int>(member.source.size());
      for (int i = 0; i < n; ++i) {
        const int b = engine.bucket_of(i);
        if (b < 0) continue;
        engine.wait_param_sync(b);
        // Widened to fp32 (exact) from a bf16 buffer.
        const ConstTypedSpan v = engine.param(i);
        std::vector<float>& out =
            values[static_cast<std::size_t>(member.source[static_cast<std::size_t>(i)])];
        out.resize(static_cast<std::size_t>(v.size()));
        read_f32(v, out);
        if (i + 1 == n || engine.bucket_of(i + 1) != b) engine.release_params(b);
      }
    }
    if (const model::ExpertPart* part = engines.expert_part()) {
      // Expert DP rank 0 of each EP rank (of each stage) sends its experts' values.
      const comm::ExpertGroups& groups = *engines.expert_groups();
      std::vector<char> sends(values.size(), 0);
      if (groups.coord.edp == 0 && groups.coord.etp == 0)
        for (int p : part->source) sends[static_cast<std::size_t>(p)] = 1;
      const std::string mine = pack(values, sends);
      for (const auto& bytes : world.all_gather_bytes(std::as_bytes(std::span(mine))))
        if (root) unpack(bytes, values);
    }
    if (engines.member(0).grid->dims().pp > 1) gather_stages(engines, values);
    if (!root) values.clear();
    return values;
  }

  // PP > 1: DP rank 0 of each later stage sends its stage's params to world rank 0 (TP = 1).
  static void gather_stages(engine::EngineSet& engines, std::vector<std::vector<float>>& values) {
    comm::Grid& grid = *engines.member(0).grid;
    std::vector<char> sends(values.size(), 0);
    if (grid.coord().dp == 0 && grid.coord().pp > 0)
      for (std::size_t p = 0; p < values.size(); ++p) sends[p] = values[p].empty() ? 0 : 1;
    const std::string mine = pack(values, sends);
    for (const auto& bytes : grid.world().all_gather_bytes(std::as_bytes(std::span(mine))))
      if (grid.world().rank() == 0) unpack(bytes, values);
  }

  // (param, count, values) of each param `sends` marks that this rank holds.
  static std::string pack(const std::vector<std::vector<float>>& values,
                          const std::vector<char>& sends) {
    std::string out;
    for (std::size_t p = 0; p < values.size(); ++p) {
      if (!sends[p] || values[p].empty()) continue;
      const std::int64_t header[2] = {static_cast<std::int64_t>(p),
                                      static_cast<std::int64_t>(values[p].size())};
      out.append(reinterpret_cast<const char*>(header), sizeof header);
      out.append(reinterpret_cast<const char*>(values[p].data()), values[p].size() * sizeof(float));
    }
    return out;
  }

  // Puts what pack() wrote into `values`: an empty entry takes the values; one filled before (the
  // last stage's copy of a tied embedding, or an expert a rank sent through both the expert and
  // the stage gather) must equal them bitwise, and elements that differ become NaN, so --verify
  // fails there.
  static void unpack(const std::vector<std::byte>& bytes, std::vector<std::vector<float>>& values) {
    for (std::size_t at = 0; at < bytes.size();) {
      std::int64_t header[2];
      CANZONA_CHECK(at + sizeof header <= bytes.size(), "params sent short");
      std::memcpy(header, bytes.data() + at, sizeof header);
      const auto p = static_cast<std::size_t>(header[0]);
      const auto n = static_cast<std::size_t>(header[1]);
      at += sizeof header;
      CANZONA_CHECK(p < values.size() && at + n * sizeof(float) <= bytes.size(),
                    "params sent short");
      std::vector<float> v(n);
      std::memcpy(v.data(), bytes.data() + at, n * sizeof(float));
      at += n * sizeof(float);
      if (values[p].empty()) {
        values[p] = std::move(v);
        continue;
      }
      CANZONA_CHECK_EQ(values[p].size(), n);
      for (std::size_t i = 0; i < n; ++i)
        if (std::memcmp(&values[p][i], &v[i], sizeof(float)) != 0)
          values[p][i] = std::numeric_limits<float>::quiet_NaN();
    }
  }
};

// The point-to-point traffic of this rank's pipeline stage: activations to the next stage and
// their gradients back (grid.pp()), the tied embedding's gradients (the embedding group), and the
// reduced losses from the last stage to the others. A send is posted and completed at the end of
// the step: every receive it feeds is posted by a rank that never waits for this one first (the
// 1F1B order has no cycle), so only receives block, and test() lets the sends move while this
// rank computes (a shared-memory MPI transfer moves only inside MPI calls).
class StagePipe {
 public:
  enum Tag : int {
    kActivation = 1,    // stage s -> s + 1, micro-batches in order
    kGradient = 2,      // stage s + 1 -> s
    kTiedGradient = 3,  // last -> first stage: the output layer's gradient of the tied embedding
    kTiedSum = 4,       // first -> last stage: the embedding's gradient summed over both uses
    kLoss = 5,          // last stage -> the others: the step's (or validation's) reduced losses
    kRouting = 6,       // MoE, s -> s + 1 (before the activation): counts, probability sums, rows
    kChoices = 7,       // MoE, s + 1 -> s (before the gradient): every stage's choices, the rows
  };

  void send(comm::Communicator& comm, int peer, Tag tag, torch::Tensor values) {
    values = values.contiguous();
    comm::Request request =
        comm.isend(std::span<const std::byte>(static_cast<const std::byte*>(values.data_ptr()),
                                              values.nbytes()),
                   peer, tag);
    sends_.push_back({std::move(request), std::move(values)});
  }

  // Blocks until the message arrives; the wait counts as pipeline wait.
  void receive(comm::Communicator& comm, int peer, Tag tag, TypedSpan into) {
    const double t0 = wall_ms();
    comm.irecv(std::span<std::byte>(into.data(), static_cast<std::size_t>(into.size_bytes())), peer,
               tag)
        .wait();
    wait_ms_ += wall_ms() - t0;
  }
  torch::Tensor receive(comm::Communicator& comm, int peer, Tag tag,
                        std::vector<std::int64_t> shape, torch::Dtype dtype = torch::kFloat32) {
    torch::Tensor t = torch::empty(shape, dtype);
    const double t0 = wall_ms();
    comm.irecv(std::span<std::byte>(static_cast<std::byte*>(t.data_ptr()), t.nbytes()), peer, tag)
        .wait();
    wait_ms_ += wall_ms() - t0;
    return t;
  }

  // Lets the sends move, and lets go of the buffers of those that completed.
  void poll() {
    std::erase_if(sends_, [](auto& send) {
      if (!send.first.test()) return false;
      send.first.wait();
      return true;
    });
  }
  void finish() {
    for (auto& [request, values] : sends_) request.wait();
    sends_.clear();
  }
  double take_wait_ms() { return std::exchange(wait_ms_, 0.0); }

 private:
  std::vector<std::pair<comm::Request, torch::Tensor>> sends_;
  double wait_ms_ = 0.0;
};

// One strategy's training run on this rank: the plan, the engine set, the model and its hooks
// (constructor), the step (top-down: forward and backward per micro-batch, gradient sync, the
// finiteness check, the optimizer step, the param sync), validation, and the measurement.
class Run {
 public:
  Run(comm::Grid& grid, const model::TransformerConfig& config, const model::ModelSpec& spec,
      const TrainOptions& options, const Corpus& corpus, plan::Strategy strategy,
      engine::Trace& trace, comm::ExpertGroups* experts)
      : grid_(grid),
        spec_(spec),
        options_(options),
        trace_(trace),
        aux_coef_(static_cast<float>(config.router_aux_loss_coef)),
        sampler_(corpus.train, options.seq_len, options.micro_batch, options.grad_accum,
                 options.job.seed),
        plan_(plan::make_plan(spec, launch::plan_options(options.job, strategy))) {
    launch::validate_plan(spec, plan_, grid.dims());
    launch::check_plan_agreement(grid.world(), plan_);
    result_.strategy = strategy;
    result_.plan_hash = plan::plan_hash(plan_);
    engines_ = std::make_unique<engine::EngineSet>(
        grid, spec, plan_, launch::engine_options(options.job), trace, experts);
    EpGroup ep;
    if (experts != nullptr && plan_.expert)
      ep = {experts->ep.get(), grid.dims().ep, experts->coord.ep};
    stage_ = {grid.coord().pp, grid.dims().pp, options.job.pp_layout};
    hidden_ = config.hidden;
    num_experts_ = config.is_moe() ? config.num_experts : 0;
    model_ = std::make_unique<Qwen3Model>(
        config, spec, TpGroup{&grid.tp(), grid.dims().tp, grid.coord().tp},
        Qwen3Model::Storage::kBound, ep, stage_, options.job.precision);
    if (plan_.tied_embedding >= 0 && model_->holds(plan_.tied_embedding))
      tied_ = plan_.tied_embedding;
    hooks_ = std::make_unique<EngineHooks>(*engines_, *model_, spec, config, options,
                                           plan_.tied_embedding, [this] { send_tied_sum(); });
    hooks_->set_poll([this] { pipe_.poll(); });
    validation_ = validation_batches(corpus.val, options.seq_len, options.micro_batch,
                                     options.eval_windows, grid.dims().dp, grid.coord().dp);
  }

  StrategyRun& result() { return result_; }
  engine::EngineSet& engines() { return *engines_; }
  const plan::Plan& plan() const { return plan_; }

  StepRecord step(std::int64_t step) {
    StepRecord record;
    record.step = step;
    record.lr_scale = lr_factor(options_.schedule, step);
    const double t0 = wall_ms();
    hooks_->reset_param_sync_ms();
    engines_->set_lr_scale(record.lr_scale);
    engines_->zero_grads();
    const auto [loss, aux] =
        stage_.count == 1 ? forward_backward(step, record) : pipelined(step, record);
    record.grad_sync_ms = engines_->finish_grad_sync();
    // The loss is the last stage's: summed over DP there, then sent along the pipeline.
    std::vector<float> sums = {0.0f, 0.0f};
    if (stage_.last()) sums = sum_over(grid_.dp(), {loss, aux});
    share_from_last_stage(sums);
    record.loss = static_cast<double>(sums[0] / static_cast<float>(grid_.dims().dp));
    record.aux_loss = static_cast<double>(sums[1] / static_cast<float>(grid_.dims().dp));
    pipe_.take_wait_ms();  // the loss's wait is not the pipeline's
    check_finite(step, record.loss);
    const std::int64_t dp0 = engines_->dp_bytes(), tp0 = engines_->tp_bytes();
    record.opt_ms = engines_->step().opt;
    record.opt_dp_bytes = engines_->dp_bytes() - dp0;
    record.opt_tp_bytes = engines_->tp_bytes() - tp0;
    record.param_sync_ms = hooks_->param_sync_ms() + engines_->start_param_sync();
    pipe_.finish();
    record.step_ms = wall_ms() - t0;
    record.tokens_per_s =
        static_cast<double>(options_.tokens_per_step()) / (record.step_ms / 1000.0);
    record.peak_rss_bytes = peak_resident_bytes();
    return record;
  }

  // Mean held-out loss over every rank's validation windows (TP ranks of one DP index agree).
  // Under PP each batch passes the stages in turn (forwards only); the last stage sums.
  double validate() {
    torch::NoGradGuard no_grad;
    float sum = 0.0f, count = 0.0f;
    for (const Batch& batch : validation_) {
      const torch::Tensor out = model_->stage_forward(
          stage_input(batch), tokens(batch.targets, batch.micro_batch, batch.seq_len));
      if (!stage_.last()) {
        pipe_.send(grid_.pp(), stage_.index + 1, StagePipe::kActivation, out);
        continue;
      }
      sum += out.sum().item<float>();
      count += static_cast<float>(out.numel());
    }
    std::vector<float> total = {0.0f, 0.0f};
    if (stage_.last()) total = sum_over(grid_.dp(), {sum, count});
    share_from_last_stage(total);
    pipe_.finish();
    pipe_.take_wait_ms();
    return static_cast<double>(total[0] / total[1]);
  }

  // The run's memory, max over ranks (call after the last step, before finish()).
  void measure_memory(std::int64_t base_rss) {
    result_.memory = Measurement::memory(*engines_, spec_, activations_bytes_, base_rss);
  }

  void finish() {
    Measurement::hashes(*engines_, result_);
    if (options_.keep_final_params && grid_.dims().tp == 1)
      final_params_ = Measurement::final_params(*engines_, spec_);
  }

  std::vector<std::vector<float>> take_final_params() { return std::move(final_params_); }

 private:
  // Every micro-batch's forward and backward (the accumulation hooks post the gradients on the
  // last); returns this rank's loss and load-balancing loss, each averaged over micro-batches.
  std::pair<float, float> forward_backward(std::int64_t step, StepRecord& record) {
    float local_loss = 0.0f, local_aux = 0.0f;
    const float inv_accum = 1.0f / static_cast<float>(options_.grad_accum);
    double compute_ms = 0.0;
    for (std::int64_t m = 0; m < options_.grad_accum; ++m) {
      const comm::ScopedOpLabel op_label(str("forward-backward of micro-batch ", m));
      const Batch batch = sampler_.batch(step, grid_.coord().dp, static_cast<int>(m));
      hooks_->set_last_micro(m + 1 == options_.grad_accum);
      const double c0 = wall_ms(), sync0 = hooks_->param_sync_ms();
      const std::int64_t heap0 = heap_in_use_bytes();
      torch::Tensor loss =
          model_
              ->token_losses(tokens(batch.inputs, batch.micro_batch, batch.seq_len),
                             tokens(batch.targets, batch.micro_batch, batch.seq_len))
              .mean() *
          inv_accum;
      if (m == 0 && faults::fires(faults::Fault::kPoisonLoss, grid_.world().rank(), step))
        loss = loss * std::numeric_limits<float>::quiet_NaN();
      local_loss += loss.item<float>();
      // HF Qwen3-MoE: loss + router_aux_loss_coef x the load-balancing loss; the reported loss is
      // the language-model loss alone.
      const torch::Tensor balance = model_->load_balancing_loss();
      if (balance.defined()) {
        local_aux += balance.item<float>() * inv_accum;
        loss = loss + balance * (aux_coef_ * inv_accum);
      }
      activations_bytes_ = std::max(activations_bytes_, heap_in_use_bytes() - heap0);
      hooks_->set_in_backward(true);
      loss.backward();
      hooks_->set_in_backward(false);
      compute_ms += wall_ms() - c0 - (hooks_->param_sync_ms() - sync0);
    }
    hooks_->set_last_micro(false);
    record.grad_ready_in_backward = hooks_->take_grad_ready_in_backward();
    record.fwd_bwd_ms = compute_ms;
    return {local_loss, local_aux};
  }

  // The first stage's input is the batch's tokens; another stage's the previous stage's output.
  torch::Tensor stage_input(const Batch& batch) {
    if (stage_.first()) return tokens(batch.inputs, batch.micro_batch, batch.seq_len);
    return pipe_.receive(grid_.pp(), stage_.index - 1, StagePipe::kActivation,
                         {batch.micro_batch, batch.seq_len, hidden_}, torch_dtype(model_->dtype()));
  }

  // The last stage's values (the losses summed over DP) reach every other stage of its pipeline.
  void share_from_last_stage(std::vector<float>& values) {
    if (stage_.count == 1) return;
    comm::Communicator& pipe = grid_.pp();
    if (!stage_.last()) {
      pipe_.receive(pipe, stage_.count - 1, StagePipe::kLoss, TypedSpan(values));
      return;
    }
    const torch::Tensor t = torch::tensor(values, torch::kFloat32);
    for (int s = 0; s + 1 < stage_.count; ++s) pipe_.send(pipe, s, StagePipe::kLoss, t);
  }

  // First stage, last micro-batch, right before the embedding's grad_ready: this rank's gradient
  // of the tied embedding (both uses, every micro-batch, in PP = 1's order) goes to the last
  // stage's copy.
  void send_tied_sum() {
    if (stage_.count == 1) return;
    const TypedSpan g = engines_->grad(tied_);
    pipe_.send(grid_.embedding(), 1, StagePipe::kTiedSum,
               torch::from_blob(g.data(), {g.size()}, torch_dtype(g.dtype())).clone());
  }

  // Megatron's 1F1B (pipeline_schedule.h) over this rank's stage: forwards take the previous
  // stage's activations and send theirs on; backwards take the next stage's gradient and send
  // the input's gradient back. The last stage's loss backward is PP = 1's; the other stages'
  // backward starts from the received gradient of their output. Tied embeddings: after each
  // backward the last stage sends its copy's gradient (the output layer's use) to the first
  // stage, whose backward of that micro-batch feeds it to the embedding together with the
  // lookup's gradient, so autograd sums the two uses once per micro-batch as at PP = 1; after
  // the last micro-batch the first stage sends the accumulated gradient back (send_tied_sum) and
  // the copy takes the same step.
  std::pair<float, float> pipelined(std::int64_t step, StepRecord& record) {
    const int micro = static_cast<int>(options_.grad_accum);
    const float inv_accum = 1.0f / static_cast<float>(options_.grad_accum);
    comm::Communicator& pipe = grid_.pp();
    std::vector<torch::Tensor> inputs(static_cast<std::size_t>(micro));
    std::vector<torch::Tensor> outputs(static_cast<std::size_t>(micro));
    std::vector<std::int64_t> shape;
    float local_loss = 0.0f, local_aux = 0.0f;
    double compute_ms = 0.0;
    const bool moe = num_experts_ > 0;
    const int num_experts = num_experts_;
    std::vector<RoutingStats> routing(moe ? static_cast<std::size_t>(micro) : 0);
    pipe_.take_wait_ms();
    for (const plan::PipelineOp& op : plan::one_f_one_b(stage_.count, stage_.index, micro)) {
      const bool forward = op.kind == plan::PipelineOp::Kind::kForward;
      const comm::ScopedOpLabel op_label(str(forward ? "forward" : "backward", " of micro-batch ",
                                             op.micro, " on pipeline stage ", stage_.index));
      const auto m = static_cast<std::size_t>(op.micro);
      const double c0 = wall_ms(), sync0 = hooks_->param_sync_ms();
      const double us0 = trace_.now_us();
      double waited = 0.0;
      if (op.kind == plan::PipelineOp::Kind::kForward) {
        const Batch batch = sampler_.batch(step, grid_.coord().dp, op.micro);
        shape = {batch.micro_batch, batch.seq_len, hidden_};
        torch::Tensor input = stage_input(batch);
        waited = pipe_.take_wait_ms();
        if (!stage_.first()) input.set_requires_grad(true);
        const std::int64_t heap0 = heap_in_use_bytes();
        torch::Tensor out =
            model_->stage_forward(input, tokens(batch.targets, batch.micro_batch, batch.seq_len));
        if (moe) {
          forward_routing(m, routing);
          waited += pipe_.take_wait_ms();
        }
        if (stage_.last()) {
          out = out.mean() * inv_accum;
          if (op.micro == 0 &&
              faults::fires(faults::Fault::kPoisonLoss, grid_.world().rank(), step))
            out = out * std::numeric_limits<float>::quiet_NaN();
          local_loss += out.item<float>();
          if (moe) {
            // HF Qwen3-MoE's loss + coef x the load-balancing loss: here this stage's share of
            // it; the reported value is the whole loss (to rounding: the stages' probability
            // sums add in stage order, PP 1's mean in one pass).
            const RoutingStats& r = routing[m];
            const torch::Tensor prob_sums =
                r.totals.narrow(0, num_experts, num_experts).to(torch::kFloat32);
            local_aux +=
                static_cast<float>(num_experts) *
                (r.choices * (prob_sums / static_cast<double>(r.rows))).sum().item<float>() *
                inv_accum;
            if (r.share.defined()) out = out + r.share * (aux_coef_ * inv_accum);
          }
        } else {
          pipe_.send(pipe, stage_.index + 1, StagePipe::kActivation, out.detach());
        }
        activations_bytes_ = std::max(activations_bytes_, heap_in_use_bytes() - heap0);
        inputs[m] = std::move(input);
        outputs[m] = std::move(out);
      } else {
        hooks_->set_last_micro(op.micro + 1 == micro);
        hooks_->set_in_backward(true);
        if (stage_.last()) {
          if (moe && stage_.count > 1) send_choices(routing[m]);
          outputs[m].backward();
        } else {
          std::vector<torch::Tensor> roots = {outputs[m]};
          std::vector<torch::Tensor> grads = {pipe_.receive(
              pipe, stage_.index + 1, StagePipe::kGradient, shape, torch_dtype(model_->dtype()))};
          if (moe) {
            // This stage's share of the load-balancing loss, with every stage's choices.
            RoutingStats& r = routing[m];
            receive_choices(r);
            if (!stage_.first()) send_choices(r);
            if (r.probs.defined()) {
              roots.push_back(load_balancing_share(r.probs, r.choices, r.rows, num_experts) *
                              (aux_coef_ * inv_accum));
              grads.push_back(torch::ones({}, torch::kFloat32));
            }
          }
          if (tied_ >= 0 && stage_.first()) {
            torch::Tensor& weight = model_->param(tied_);
            roots.push_back(weight.view_as(weight));
            grads.push_back(pipe_.receive(grid_.embedding(), 1, StagePipe::kTiedGradient,
                                          weight.sizes().vec(), weight.scalar_type()));
          }
          waited = pipe_.take_wait_ms();
          torch::autograd::backward(roots, grads);
        }
        hooks_->set_in_backward(false);
        if (!stage_.first())
          pipe_.send(pipe, stage_.index - 1, StagePipe::kGradient, inputs[m].grad());
        if (tied_ >= 0 && stage_.last()) {
          torch::Tensor& copy = model_->param(tied_);
          pipe_.send(grid_.embedding(), 0, StagePipe::kTiedGradient, copy.grad());
          copy.mutable_grad() = torch::Tensor();
        }
        inputs[m] = torch::Tensor();
        outputs[m] = torch::Tensor();
        if (moe) routing[m] = RoutingStats{};
      }
      if (trace_.enabled()) {
        const double us1 = us0 + 1000.0 * waited;
        if (waited > 0.0) trace_.span(engine::kPipelineTrack, "pipeline", "wait", us0, us1);
        trace_.span(engine::kPipelineTrack, "pipeline",
                    str(op.kind == plan::PipelineOp::Kind::kForward ? "F" : "B", op.micro), us1,
                    trace_.now_us());
      }
      record.pipeline_wait_ms += waited;
      compute_ms += wall_ms() - c0 - waited - (hooks_->param_sync_ms() - sync0);
    }
    if (tied_ >= 0 && stage_.last()) {
      // The copy's gradient is the first stage's sum; then it is ready like any other.
      engine::Engine* engine = engines_->engine_of(tied_);
      const int i = engines_->slot(tied_).index;
      pipe_.receive(grid_.embedding(), 0, StagePipe::kTiedSum, engine->grad(i));
      record.pipeline_wait_ms += pipe_.take_wait_ms();
      engine->grad_ready(i);
    }
    hooks_->set_last_micro(false);
    record.grad_ready_in_backward = hooks_->take_grad_ready_in_backward();
    record.fwd_bwd_ms = compute_ms;
    return {local_loss, local_aux};
  }

  // MoE under PP, one micro-batch: this stage's routing (probabilities, autograd-connected) and
  // the running totals of every stage so far: expert counts [E], probability sums [E] and rows.
  // The last stage turns the totals into the choices (counts / rows, as load_balancing_loss
  // forms them) and sends them back with the gradients, so each stage's backward can add its
  // share of the loss (load_balancing_share).
  struct RoutingStats {
    torch::Tensor probs;    // [rows of this stage, E]; undefined without MoE layers here
    torch::Tensor totals;   // [2E + 1] fp64: counts, probability sums, rows (stages 0..s)
    torch::Tensor choices;  // [E] fp32
    torch::Tensor share;    // the last stage's share, autograd-connected
    std::int64_t rows = 0;  // every stage's
  };

  void forward_routing(std::size_t m, std::vector<RoutingStats>& routing) {
    const int e = num_experts_;
    RoutingStats& r = routing[m];
    const StageRouting mine = model_->stage_routing();
    torch::Tensor totals = torch::zeros({2 * e + 1}, torch::kFloat64);
    if (!stage_.first())
      totals = pipe_.receive(grid_.pp(), stage_.index - 1, StagePipe::kRouting, {2 * e + 1},
                             torch::kFloat64);
    if (mine.probs.defined()) {
      r.probs = mine.probs;
      totals.narrow(0, 0, e).add_(mine.counts);  // whole numbers: exact in fp64
      totals.narrow(0, e, e).add_(mine.probs.detach().sum(0));
      totals[2 * e] += static_cast<double>(mine.probs.size(0));
    }
    r.totals = totals;
    if (!stage_.last()) {
      pipe_.send(grid_.pp(), stage_.index + 1, StagePipe::kRouting, totals.clone());
      return;
    }
    r.rows = static_cast<std::int64_t>(totals[2 * e].item<double>());
    // As load_balancing_loss forms them: fp32 counts over the rows.
    r.choices = totals.narrow(0, 0, e).to(torch::kFloat32) / static_cast<double>(r.rows);
    if (r.probs.defined()) r.share = load_balancing_share(r.probs, r.choices, r.rows, e);
  }

  // [E + 1] fp64: the choices (fp32 values, exact in fp64) and the rows.
  void send_choices(const RoutingStats& r) {
    const torch::Tensor message =
        torch::cat({r.choices.to(torch::kFloat64),
                    torch::full({1}, static_cast<double>(r.rows), torch::kFloat64)});
    pipe_.send(grid_.pp(), stage_.index - 1, StagePipe::kChoices, message);
  }

  void receive_choices(RoutingStats& r) {
    const int e = num_experts_;
    const torch::Tensor message =
        pipe_.receive(grid_.pp(), stage_.index + 1, StagePipe::kChoices, {e + 1}, torch::kFloat64);
    r.choices = message.narrow(0, 0, e).to(torch::kFloat32);
    r.rows = static_cast<std::int64_t>(message[e].item<double>());
  }

  // A non-finite gradient is as fatal as a non-finite loss: every rank checks its gradients and
  // params, and every rank throws the same NonFiniteLoss before the optimizer step.
  void check_finite(std::int64_t step, double loss) {
    std::string bad;
    for (int m = 0; m < engines_->size() && bad.empty(); ++m)
      bad = first_non_finite(engines_->member(m));
    const float bad_any = sum_over(grid_.world(), {bad.empty() ? 0.0f : 1.0f})[0];
    if (std::isfinite(loss) && bad_any == 0.0f) return;
    const auto names = grid_.world().all_gather_bytes(
        std::as_bytes(std::span<const char>(bad.data(), bad.size())));
    std::string first = "none found";
    for (std::size_t r = 0; r < names.size(); ++r) {
      if (names[r].empty()) continue;
      first = str(std::string(reinterpret_cast<const char*>(names[r].data()), names[r].size()),
                  " on world rank ", r);
      break;
    }
    throw NonFiniteLoss(str("step ", step, ": non-finite training state (loss ", loss,
                            "); first non-finite tensor: ", first,
                            "; stopped before the optimizer step, nothing written"));
  }

  comm::Grid& grid_;
  const model::ModelSpec& spec_;
  const TrainOptions& options_;
  engine::Trace& trace_;
  float aux_coef_;  // router_aux_loss_coef
  Sampler sampler_;
  plan::Plan plan_;  // the engines keep references into it
  StrategyRun result_;
  std::unique_ptr<engine::EngineSet> engines_;
  std::unique_ptr<Qwen3Model> model_;
  std::unique_ptr<EngineHooks> hooks_;
  std::vector<Batch> validation_;
  std::vector<std::vector<float>> final_params_;
  std::int64_t activations_bytes_ = 0;
  PipelineStage stage_;
  std::int64_t hidden_ = 0;
  int num_experts_ = 0;  // a MoE model's experts per layer, 0 for a dense one
  int tied_ = -1;        // the tied embedding (original or copy) this rank's stage holds at PP > 1
  StagePipe pipe_;
};

// Per-step times of every rank -> max over ranks, on world rank 0; under PP also the max over
// each stage's ranks (run.stage_steps).
void max_over_ranks(comm::Grid& grid, StrategyRun& run) {
  std::vector<StepRecord>& steps = run.steps;
  constexpr std::size_t kFields = 9;
  std::vector<double> mine;
  for (const StepRecord& s : steps)
    mine.insert(mine.end(),
                {s.step_ms, s.fwd_bwd_ms, s.grad_sync_ms, s.opt_ms, s.param_sync_ms,
                 static_cast<double>(s.peak_rss_bytes), static_cast<double>(s.opt_dp_bytes),
                 static_cast<double>(s.opt_tp_bytes), s.pipeline_wait_ms});
  const auto all = grid.world().all_gather_bytes(
      std::as_bytes(std::span<const double>(mine.data(), mine.size())));
  const int pp = grid.dims().pp;
  if (pp > 1)
    run.stage_steps.assign(static_cast<std::size_t>(pp), std::vector<StageStep>(steps.size()));
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& bytes = all[r];
    CANZONA_CHECK_EQ(bytes.size(), mine.size() * sizeof(double));
    if (bytes.empty()) continue;  // a run resumed at its last step took no step
    std::vector<double> theirs(mine.size());
    std::memcpy(theirs.data(), bytes.data(), bytes.size());
    const int stage = grid.dims().coord(static_cast<int>(r)).pp;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      StepRecord& s = steps[i];
      const double* t = theirs.data() + kFields * i;
      if (pp > 1) {
        StageStep& st = run.stage_steps[static_cast<std::size_t>(stage)][i];
        st.step_ms = std::max(st.step_ms, t[0]);
        st.fwd_bwd_ms = std::max(st.fwd_bwd_ms, t[1]);
        st.opt_ms = std::max(st.opt_ms, t[3]);
        st.pipeline_wait_ms = std::max(st.pipeline_wait_ms, t[8]);
      }
      s.step_ms = std::max(s.step_ms, t[0]);
      s.fwd_bwd_ms = std::max(s.fwd_bwd_ms, t[1]);
      s.grad_sync_ms = std::max(s.grad_sync_ms, t[2]);
      s.opt_ms = std::max(s.opt_ms, t[3]);
      s.param_sync_ms = std::max(s.param_sync_ms, t[4]);
      s.peak_rss_bytes = std::max(s.peak_rss_bytes, static_cast<std::int64_t>(t[5]));
      s.opt_dp_bytes = std::max(s.opt_dp_bytes, static_cast<std::int64_t>(t[6]));
      s.opt_tp_bytes = std::max(s.opt_tp_bytes, static_cast<std::int64_t>(t[7]));
      s.pipeline_wait_ms = std::max(s.pipeline_wait_ms, t[8]);
    }
  }
}

// The manifest's optimizer: what kind of state the checkpoint holds.
std::string checkpoint_optimizer(const TrainOptions& o) {
  return o.all_adamw ? "adamw" : o.job.optimizer;
}

// trainer.json of a save after `step`: the data position and RNG are the step (the sampler is
// counter-based on (seed, step, DP rank, micro-batch, row)), the lr schedule position too.
ckpt::Manifest manifest_of(const TrainOptions& o, const std::string& model, plan::Strategy strategy,
                           std::uint64_t plan_hash, std::int64_t step) {
  ckpt::Manifest m;
  m.step = step;
  m.strategy = plan::to_string(strategy);
  m.dp = o.job.dims.dp;
  m.tp = o.job.dims.tp;
  m.optimizer = checkpoint_optimizer(o);
  m.plan_hash = hex64(plan_hash);
  const double next_lr = step < o.schedule.total ? lr_factor(o.schedule, step + 1) : 0.0;
  m.run = {{"model", model},
           {"seed", o.job.seed},
           {"steps", o.steps},
           {"seq_len", o.seq_len},
           {"micro_batch", o.micro_batch},
           {"grad_accum", o.grad_accum},
           {"zero_stage", to_int(o.job.zero_stage)},  // informational: either stage resumes either
           {"data_position",
            {{"sampler", "counter(seed, step, dp_rank, micro, row)"}, {"next_step", step + 1}}},
           {"schedule",
            {{"kind", to_string(o.schedule.schedule)},
             {"warmup", o.schedule.warmup},
             {"total", o.schedule.total},
             {"min_lr_ratio", o.schedule.min_ratio},
             {"next_step", step + 1},
             {"next_lr_factor", next_lr}}},
           {"optimizer_options",
            o.all_adamw ? nlohmann::json::object()
                        : optim::effective_options(o.job.optimizer, o.job.optimizer_options)},
           {"adamw_options", optim::effective_options("adamw", o.job.adamw_options)},
           {"split_qkv", model::to_string(o.job.qkv_split)},
           {"split_fc1", o.job.split_fc1},
           {"ep", o.job.dims.ep},  // informational: a MoE checkpoint resumes under any EP
           {"reduce_mode", comm::to_string(o.job.reduce_mode)},
           // bf16: model.safetensors is BF16, optimizer.safetensors has the fp32 main params
           {"precision", to_string(o.job.precision)},
           {"grad_reduce_in_fp32", o.job.grad_reduce_in_fp32}};
  return m;
}

// --keep: deletes the oldest complete checkpoints of the save directory beyond the newest K.
void prune_checkpoints(const CheckpointOptions& o) {
  if (o.keep <= 0) return;
  const auto found = ckpt::list_checkpoints(o.save_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(o.keep) < found.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove_all(found[i].second, ec);
  }
}

}  // namespace

std::int64_t TrainOptions::tokens_per_step() const {
  return job.dims.dp * grad_accum * micro_batch * seq_len;
}

bool validates_after(const TrainOptions& options, std::int64_t step) {
  return options.eval_every > 0 && (step % options.eval_every == 0 || step == options.steps);
}

void validate(const TrainOptions& o) {
  require_in_range(o.steps, 1, kMaxTrainSteps, "--steps", "kMaxTrainSteps");
  require_in_range(o.seq_len, 1, kMaxSeqLen, "--seq-len", "kMaxSeqLen");
  require_in_range(o.micro_batch, 1, kMaxMicroBatch, "--micro-batch", "kMaxMicroBatch");
  require_in_range(o.grad_accum, 1, kMaxGradAccum, "--grad-accum", "kMaxGradAccum");
  require_in_range(o.eval_every, 0, kMaxTrainSteps, "--eval-every", "kMaxTrainSteps");
  require_in_range(o.eval_windows, 1, kMaxMicroBatch, "--eval-windows", "kMaxMicroBatch");
  CANZONA_REQUIRE(!o.strategies.empty(), "--strategies names no strategy");
  validate(o.schedule);
  CANZONA_REQUIRE(o.schedule.total == o.steps, "schedule total ", o.schedule.total,
                  " differs from --steps ", o.steps);
  const CheckpointOptions& c = o.checkpoint;
  require_in_range(c.save_every, 0, kMaxTrainSteps, "--save-every", "kMaxTrainSteps");
  require_in_range(c.keep, 0, 1 << 20, "--keep", "2^20");
  CANZONA_REQUIRE(c.save_dir.empty() || o.strategies.size() == 1,
                  "--save-dir needs a single strategy (--strategies names ", o.strategies.size(),
                  ")");
  CANZONA_REQUIRE(c.resume.empty() || o.strategies.size() == 1,
                  "--resume needs a single strategy (--strategies names ", o.strategies.size(),
                  ")");
  CANZONA_REQUIRE(c.resume.empty() || c.init_from.empty(),
                  "--resume and --init-from exclude each other (a checkpoint has its weights)");
  CANZONA_REQUIRE(c.save_every == 0 || !c.save_dir.empty(), "--save-every needs --save-dir");
  CANZONA_REQUIRE(c.keep == 0 || !c.save_dir.empty(), "--keep needs --save-dir");
  plan::check_zero_stage(o.job.zero_stage, o.strategies);
  launch::validate(o.job);
}

model::ModelSpec training_spec(const model::TransformerConfig& config,
                               const TrainOptions& options) {
  const launch::JobOptions& job = options.job;
  model::ModelSpec spec = model::build_transformer(config, launch::build_options(job));
  if (options.all_adamw) {
    for (model::ParamSpec& p : spec.params) {
      p.optimizer = model::OptimizerClass::kElementwise;
      p.pieces.clear();
    }
  }
  model::validate(spec, job.dims.tp);
  model::assign_stages(spec, job.dims.pp, job.pp_layout);  // --pp / --pp-layout, named
  // Both copies of a tied embedding reduce the same gradient over DP in their own buckets: equal
  // results need the rank-order sum.
  CANZONA_REQUIRE(!config.tied_embeddings || job.dims.pp == 1 || job.dims.dp == 1 ||
                      job.reduce_mode == comm::ReduceMode::kDeterministic,
                  "--reduce-mode native with --pp ", job.dims.pp, " and --dp ", job.dims.dp,
                  ": model '", config.name,
                  "' ties its embeddings, and the last stage's copy, reduced over DP in other "
                  "buckets than the first stage's, would drift from it (use --reduce-mode "
                  "deterministic)");
  if (config.is_moe() || job.dims.ep != 1 || job.dims.etp != 1) {
    // The expert grid's own checks: a MoE model, ep dividing the experts and ep x etp the grid.
    model::expert_part(spec, job.dims.ep, job.dims.etp, 0);
    job.dims.check();
    CANZONA_REQUIRE(job.dims.etp == 1, "--etp ", job.dims.etp,
                    ": train keeps each expert whole on its EP rank (expert TP 1); plan, simulate, "
                    "run and compare take --etp");
  }
  return spec;
}

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    // glibc serves blocks over its mmap threshold (128 KiB, rising to 32 MiB at most) with a
    // fresh mmap and unmaps them on free, and trims the heap top past 128 KiB: every step's
    // activations (hundreds of MiB) were faulted in and zeroed by the kernel again, about 20% of
    // a step. From the heap, never trimmed, a step reuses the previous step's pages.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    mallopt(M_TOP_PAD, 64 << 20);
  });
}

std::vector<StrategyRun> train(comm::Grid& grid, const model::TransformerConfig& config,
                               const model::ModelSpec& spec, const TrainOptions& options,
                               const Corpus& corpus, const Progress& progress,
                               comm::ExpertGroups* experts) {
  keep_freed_memory();
  std::vector<StrategyRun> runs;
  const StopSignals stop_signals;
  const bool reporter = grid.world().rank() == 0;
  const CheckpointOptions& ckpt_options = options.checkpoint;
  // The checkpoint to resume: every rank reads the same manifest.
  std::string resume_dir;
  ckpt::Manifest resumed;
  if (!ckpt_options.resume.empty()) {
    resume_dir = ckpt::resolve(ckpt_options.resume);
    resumed = ckpt::read_manifest(resume_dir);
    CANZONA_REQUIRE(resumed.step <= options.steps, "--resume: ", resume_dir, " is at step ",
                    resumed.step, ", past --steps ", options.steps);
  }
  for (std::size_t k = 0; k < options.strategies.size(); ++k) {
    const plan::Strategy strategy = options.strategies[k];
    engine::Trace trace(k == 0 && !options.trace_path.empty());
    if (reporter && progress.start) progress.start(strategy);
    reset_peak_resident();
    const std::int64_t base_rss = resident_bytes();
    Run run(grid, config, spec, options, corpus, strategy, trace, experts);
    const double t0 = wall_ms();
    if (!resume_dir.empty()) {
      load_checkpoint(run.engines(), spec, &config, checkpoint_optimizer(options), resume_dir,
                      resumed);
      run.result().first_step = resumed.step + 1;
    } else if (!ckpt_options.init_from.empty()) {
      load_weights(run.engines(), spec, ckpt_options.init_from);
    } else {
      run.engines().init_main_params();
    }
    if (reporter && progress.loaded && (!resume_dir.empty() || !ckpt_options.init_from.empty()))
      progress.loaded(resume_dir.empty() ? ckpt_options.init_from : resume_dir, wall_ms() - t0);
    auto save = [&](std::int64_t step) {
      SaveContext context;
      context.config = &config;
      context.spec = &spec;
      context.plan = &run.plan();
      context.manifest = manifest_of(options, config.name, strategy, run.result().plan_hash, step);
      if (faults::site(faults::Fault::kKillInSave).step == step)
        context.before_publish = [&] {
          if (faults::fires(faults::Fault::kKillInSave, grid.world().rank(), step))
            std::raise(SIGKILL);
        };
      const double s0 = wall_ms();
      const std::string dir = save_checkpoint(run.engines(), context, ckpt_options.save_dir);
      if (reporter) prune_checkpoints(ckpt_options);
      if (reporter && progress.saved) progress.saved(dir, wall_ms() - s0);
    };
    for (std::int64_t s = run.result().first_step; s <= options.steps; ++s) {
      const StepRecord record = run.step(s);
      run.result().steps.push_back(record);
      if (reporter && progress.step) progress.step(run.result(), record);
      if (validates_after(options, s)) {
        const ValRecord val{s, run.validate()};
        run.result().val.push_back(val);
        if (reporter && progress.val) progress.val(run.result(), val);
      }
      if (!ckpt_options.save_dir.empty() &&
          ((ckpt_options.save_every > 0 && s % ckpt_options.save_every == 0) || s == options.steps))
        save(s);
      if (faults::fires(faults::Fault::kKillAfterStep, grid.world().rank(), s)) std::raise(SIGKILL);
      if (faults::fires(faults::Fault::kStallAfterStep, grid.world().rank(), s))
        for (;;) pause();
      if (const int signal = StopSignals::agreed(grid.world())) {
        const bool saved_now = !ckpt_options.save_dir.empty() &&
                               ((ckpt_options.save_every > 0 && s % ckpt_options.save_every == 0) ||
                                s == options.steps);
        if (!ckpt_options.save_dir.empty() && !saved_now) save(s);
        throw Interrupted(
            str("stopped by ", signal_name(signal), " after step ", s, " of ",
                plan::to_string(strategy),
                ckpt_options.save_dir.empty()
                    ? std::string("; nothing saved (no --save-dir)")
                    : str("; checkpoint step ", s, " saved in ", ckpt_options.save_dir,
                          " (continue with --resume ", ckpt_options.save_dir, ")")),
            signal);
      }
    }
    // A run resumed at its last step saves that step again (e.g. in its new shape).
    if (!ckpt_options.save_dir.empty() && run.result().first_step > options.steps)
      save(options.steps);
    run.measure_memory(base_rss);
    run.finish();
    max_over_ranks(grid, run.result());
    if (trace.enabled()) engine::write_chrome_trace(grid, trace, options.trace_path);
    runs.push_back(std::move(run.result()));
    runs.back().final_params = run.take_final_params();
  }
  return runs;
}

}  // namespace canzona::train
