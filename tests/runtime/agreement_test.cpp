// launch_settings() and check_agreement() without MPI: the settings list has a fixed key order
// whatever the values, every RunOptions/SessionOptions field that changes what ranks execute shows
// up as exactly one differing setting, and check_agreement() over threads standing in for ranks
// names the first differing setting and the lowest differing rank, identically on every rank.
#include "canzona/launch/agreement.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "canzona/common/error.h"
#include "canzona/common/faults.h"
#include "canzona/runtime/run_settings.h"
#include "toy_model.h"

namespace canzona::runtime {
namespace {

using launch::agree_on_launch_error;
using launch::check_agreement;
using launch::kMaxShownValueBytes;
using launch::model_hash;
using launch::PlanAgreementError;
using launch::Settings;
using launch::settings_text;

// Ranks as threads: all_gather_u64 and all_gather_bytes are a generation barrier over shared
// slots. Only control traffic is implemented; float collectives are never called by
// check_agreement().
class ThreadHub {
 public:
  using Bytes = std::vector<std::byte>;

  explicit ThreadHub(int size) : size_(size), slots_(size), result_(size) {}

  std::vector<std::uint64_t> all_gather(int rank, std::uint64_t value) {
    Bytes mine(sizeof value);
    std::memcpy(mine.data(), &value, sizeof value);
    std::vector<std::uint64_t> out;
    for (const Bytes& theirs : all_gather_bytes(rank, std::move(mine))) {
      std::memcpy(&value, theirs.data(), sizeof value);
      out.push_back(value);
    }
    return out;
  }

  std::vector<Bytes> all_gather_bytes(int rank, Bytes value) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    slots_[rank] = std::move(value);
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    return result_;
  }

  int size() const { return size_; }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<Bytes> slots_, result_;
};

class ThreadWorld final : public comm::Communicator {
 public:
  ThreadWorld(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  void barrier() override { hub_.all_gather(rank_, 0); }
  std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) override {
    return hub_.all_gather(rank_, value);
  }
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> bytes) override {
    return hub_.all_gather_bytes(rank_, {bytes.begin(), bytes.end()});
  }

 protected:
  comm::Request do_reduce_scatter(ConstTypedSpan, TypedSpan,
                                  std::span<const std::int64_t>) override {
    throw Error("unused");
  }
  comm::Request do_all_gather(ConstTypedSpan, TypedSpan, std::span<const std::int64_t>,
                              std::span<const std::int64_t>) override {
    throw Error("unused");
  }
  comm::Request do_all_to_all(ConstTypedSpan, std::span<const std::int64_t>,
                              std::span<const std::int64_t>, TypedSpan,
                              std::span<const std::int64_t>,
                              std::span<const std::int64_t>) override {
    throw Error("unused");
  }
  comm::Request do_all_reduce(ConstTypedSpan, TypedSpan) override { throw Error("unused"); }

 private:
  ThreadHub& hub_;
  int rank_;
};

// Runs check_agreement on one thread per entry of `settings`; returns each rank's error ("" =
// agreed).
std::vector<std::string> agree(const std::vector<Settings>& settings) {
  ThreadHub hub(static_cast<int>(settings.size()));
  std::vector<std::string> errors(settings.size());
  std::vector<std::thread> ranks;
  for (std::size_t r = 0; r < settings.size(); ++r) {
    ranks.emplace_back([&, r] {
      ThreadWorld world(hub, static_cast<int>(r));
      try {
        check_agreement(world, settings[r]);
      } catch (const PlanAgreementError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  return errors;
}

const std::vector<plan::Strategy> kAll = {plan::Strategy::kSc, plan::Strategy::kLbAsc};

Settings settings_of(const RunOptions& o, const SessionOptions& s = {},
                     const std::vector<plan::Strategy>& strategies = kAll) {
  return launch_settings(o, s, strategies, testing::toy_model());
}

// One changed field per row: the key that must differ.
struct Change {
  const char* key;
  std::function<void(RunOptions&, SessionOptions&)> apply;
};

const std::vector<Change> kChanges = {
    {"--model", [](RunOptions& o, SessionOptions&) { o.model = "qwen3-mini"; }},
    {"--split-qkv", [](RunOptions& o, SessionOptions&) { o.qkv_split = model::QkvSplit::kQkv; }},
    {"--split-fc1", [](RunOptions& o, SessionOptions&) { o.split_fc1 = true; }},
    {"--dp", [](RunOptions& o, SessionOptions&) { o.dims.dp = 2; }},
    {"--tp", [](RunOptions& o, SessionOptions&) { o.dims.tp = 2; }},
    {"--optimizer-options lr",
     [](RunOptions& o, SessionOptions&) {
       o.optimizer_options = {{"lr", 0.5}};
     }},
    {"adamw options lr",
     [](RunOptions& o, SessionOptions&) {
       o.adamw_options = {{"lr", 0.5}};
     }},
    {"--planner", [](RunOptions& o, SessionOptions&) { o.planner = plan::PlannerVariant::kPaper; }},
    {"--alpha", [](RunOptions& o, SessionOptions&) { o.alpha = 0.5; }},
    {"--cmax-mb", [](RunOptions& o, SessionOptions&) { o.cmax_mb = 64.0; }},
    {"--cost", [](RunOptions& o, SessionOptions&) { o.cost = cost::CostKind::kNumel; }},
    {"--bucket-size", [](RunOptions& o, SessionOptions&) { o.bucket_size = 1000; }},
    {"--steps", [](RunOptions& o, SessionOptions&) { o.steps = 3; }},
    {"--warmup", [](RunOptions& o, SessionOptions&) { o.warmup = 0; }},
    {"--compute-scale", [](RunOptions& o, SessionOptions&) { o.compute_scale = 0.02; }},
    {"--tokens", [](RunOptions& o, SessionOptions&) { o.tokens = 8; }},
    {"--seed", [](RunOptions& o, SessionOptions&) { o.seed = 2; }},
    {"--no-pipeline", [](RunOptions& o, SessionOptions&) { o.pipeline = false; }},
    {"--reduce-mode",
     [](RunOptions& o, SessionOptions&) { o.reduce_mode = comm::ReduceMode::kNative; }},
    {"--test-perturb-plan-rank",
     [](RunOptions&, SessionOptions&) { faults::arm(faults::Fault::kPerturbPlan, {0}); }},
    {"--test-corrupt-rank",
     [](RunOptions&, SessionOptions&) { faults::arm(faults::Fault::kCorruptParams, {0}); }},
    {"--verify", [](RunOptions&, SessionOptions& s) { s.verify = true; }},
    {"verify tolerance", [](RunOptions&, SessionOptions& s) { s.verify_tolerance = 1.0; }},
    {"--trace", [](RunOptions&, SessionOptions& s) { s.trace_path = "t.json"; }},
};

TEST(LaunchSettings, EachFieldIsExactlyOneSettingInAFixedOrder) {
  const Settings base = settings_of(RunOptions{});
  for (const Change& c : kChanges) {
    SCOPED_TRACE(c.key);
    RunOptions o;
    SessionOptions s;
    c.apply(o, s);
    const Settings changed = settings_of(o, s);
    faults::disarm_all();
    ASSERT_EQ(changed.size(), base.size());
    int differing = 0;
    for (std::size_t i = 0; i < base.size(); ++i) {
      EXPECT_EQ(changed[i].key, base[i].key);
      if (changed[i].value != base[i].value) {
        ++differing;
        EXPECT_EQ(changed[i].key, c.key);
      }
    }
    EXPECT_EQ(differing, 1);
  }
}

TEST(LaunchSettings, StrategiesAndModelAreSettings) {
  const Settings base = settings_of(RunOptions{});
  const Settings one = settings_of(RunOptions{}, {}, {plan::Strategy::kSc});
  model::ModelSpec other = testing::toy_model();
  other.params[0].shape[0] += 1;
  const Settings grown = launch_settings(RunOptions{}, {}, kAll, other);
  const std::string text = settings_text(base);
  EXPECT_NE(text.find("--strategy=sc,lb-asc\n"), std::string::npos) << text;
  EXPECT_NE(settings_text(one), text);
  EXPECT_NE(model_hash(other), model_hash(testing::toy_model()));
  EXPECT_NE(settings_text(grown).find("model spec="), std::string::npos);
  EXPECT_NE(settings_text(grown), text);
}

// Ranks agree on the options the optimizers run with, not on how they were written.
TEST(LaunchSettings, OptimizerOptionsAreComparedAfterDefaults) {
  const std::string base = settings_text(settings_of(RunOptions{}));
  RunOptions spelled;
  spelled.optimizer_options = {{"ns_steps", 5}, {"lr", 0.02}};
  spelled.adamw_options = {{"beta2", 0.999}};
  EXPECT_EQ(settings_text(settings_of(spelled)), base);
  RunOptions changed;
  changed.optimizer_options = {{"ns_steps", 6}};
  EXPECT_NE(settings_text(settings_of(changed)), base);
  RunOptions adam;
  adam.adamw_options = {{"eps", 1e-6}};
  EXPECT_NE(settings_text(settings_of(adam)), base);
}

TEST(CheckAgreement, SameSettingsPass) {
  const Settings s = settings_of(RunOptions{});
  for (int ranks : {1, 2, 5})
    EXPECT_EQ(agree(std::vector<Settings>(ranks, s)), std::vector<std::string>(ranks));
}

TEST(CheckAgreement, NamesTheFirstDifferingSettingAndRankOnEveryRank) {
  RunOptions steps3;
  steps3.steps = 3;
  RunOptions seed_too = steps3;
  seed_too.seed = 9;
  const Settings base = settings_of(RunOptions{});
  const std::vector<std::string> errors =
      agree({base, base, settings_of(steps3), settings_of(seed_too)});
  for (const std::string& e : errors) {
    EXPECT_EQ(e, errors[0]);
    EXPECT_NE(e.find("ranks disagree on --steps: rank 2 has 3, rank 0 has 5"), std::string::npos)
        << e;
  }
}

// Another optimizer has other option keys (a different count of settings): the --optimizer
// setting, which comes first, is the one named.
TEST(LaunchSettings, AnotherOptimizerDiffersFirstOnTheOptimizer) {
  RunOptions soap;
  soap.optimizer = "soap";
  const Settings a = settings_of(RunOptions{}), b = settings_of(soap);
  EXPECT_NE(a.size(), b.size());  // muon has 8 options, soap 9
  const std::vector<std::string> errors = agree({a, b, a});
  for (const std::string& e : errors)
    EXPECT_NE(e.find("ranks disagree on --optimizer: rank 1 has soap, rank 0 has muon"),
              std::string::npos)
        << e;
}

// Every option is its own setting, named by its key, whichever comes late in the JSON.
TEST(CheckAgreement, NamesTheDifferingOptionKey) {
  RunOptions with_options;
  with_options.optimizer_options = {{"weight_decay", 0.25}};
  const std::vector<std::string> e = agree({settings_of(RunOptions{}), settings_of(with_options)});
  EXPECT_NE(e[0].find("ranks disagree on --optimizer-options weight_decay: rank 1 has 0.25, rank 0 "
                      "has 0.0"),
            std::string::npos)
      << e[0];
}

TEST(CheckAgreement, ShowsLongAndEmptyValuesCut) {
  RunOptions long_model;
  long_model.model = std::string(100, 'm');
  SessionOptions traced;
  traced.trace_path = "trace.json";
  const std::vector<std::string> e1 = agree({settings_of(RunOptions{}), settings_of(long_model)});
  EXPECT_NE(e1[1].find(str("ranks disagree on --model: rank 1 has ", std::string(64, 'm'),
                           "..., rank 0 has qwen3-tiny")),
            std::string::npos)
      << e1[1];
  const std::vector<std::string> e2 =
      agree({settings_of(RunOptions{}), settings_of(RunOptions{}, traced)});
  EXPECT_NE(e2[0].find("ranks disagree on --trace: rank 1 has trace.json, rank 0 has ''"),
            std::string::npos)
      << e2[0];
}

TEST(CheckAgreement, DifferentSettingCountsAreReportedNotHung) {
  Settings shorter = settings_of(RunOptions{});
  shorter.pop_back();
  const std::vector<std::string> errors = agree({settings_of(RunOptions{}), shorter});
  EXPECT_NE(errors[1].find("ranks disagree on the set of settings"), std::string::npos)
      << errors[1];
}

}  // namespace
}  // namespace canzona::runtime
