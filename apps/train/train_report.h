// What `canzona train` prints and writes: progress lines, the Figure-4-style breakdown of every
// strategy side by side, the --json document and the loss-curve SVG.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "canzona/train/memory.h"
#include "canzona/train/trainer.h"

namespace canzona::apps {

struct TrainHeader {
  std::string model;
  std::int64_t params = 0;         // model numel (padded vocabulary included)
  std::int64_t active_params = 0;  // a token's: a MoE model's experts counted top-k / E
  std::int64_t matmul_params = 0;  // active params in products: all but an untied input embedding
  int dp = 1, tp = 1, pp = 1;
  int ep = 0;  // a MoE model's expert parallelism; 0 for a dense model
  std::string optimizer;
  std::string data;
  std::int64_t train_tokens = 0, val_tokens = 0, vocab = 0;
  double unigram_entropy = 0.0;  // nats per token of the train part
  double sgemm_gflops = 0.0;     // measured on world rank 0, one thread
  // --precision bf16: libtorch's bf16 matmul rate, measured as sgemm's (the MFU's reference
  // then); and the CPU's native bf16 instructions libtorch can use ("AMX-BF16, AVX512-BF16"),
  // empty when it has none and libtorch emulates bf16 with fp32 instructions.
  double bf16_gflops = 0.0;
  std::string bf16_native;
  std::string blas_core;         // optim::blas_core_name()
  std::string blas_core_source;  // optim::blas_core_source()
  train::MemoryNeed memory;      // estimated need per rank (train/memory.h)
  double memory_available = -1;  // bytes available on this node (< 0: unknown)
  int ranks_on_node = 1;
  std::vector<train::MemoryNeed> stage_memory;  // PP > 1: the estimate of each stage
};

std::string format_header(const TrainHeader& header, const train::TrainOptions& options);
// One step's line; with `val`, that step's validation loss after its training loss. A MoE run's
// lines end with the step's load-balancing loss ("balance").
std::string format_step(const train::StrategyRun& run, const train::StepRecord& step,
                        std::int64_t steps, bool moe, const train::ValRecord* val = nullptr);
std::string format_val(const train::StrategyRun& run, const train::ValRecord& val);

// Median over steps 2.. (the first step pays one-time allocations) of each phase.
train::StepRecord median_step(const std::vector<train::StepRecord>& steps);
// Forward-backward model FLOP utilisation: 6 x matmul_params / tp x tokens per rank per step
// (attention's score and context products left out, as in the usual 6 N T) over the median
// fwd-bwd time, divided by the measured sgemm rate (under --precision bf16 the measured bf16
// matmul rate).
double mfu(const TrainHeader& header, const train::TrainOptions& options,
           const train::StepRecord& median);

// True when every strategy's losses (train and validation, as doubles) and final params hash
// equal the first's.
bool bitwise_identical(const std::vector<train::StrategyRun>& runs);
std::string format_summary(const TrainHeader& header, const train::TrainOptions& options,
                           const std::vector<train::StrategyRun>& runs);
nlohmann::json train_json(const TrainHeader& header, const train::TrainOptions& options,
                          const std::vector<train::StrategyRun>& runs);

}  // namespace canzona::apps
