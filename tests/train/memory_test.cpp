// estimate_memory's buffers against the engine's allocations derived by hand (engine/engine.cpp:
// one fp32 main copy per computed task; dp_sync.cpp: the DP shard of the gradient buffer under a
// reduce-scatter). With --all-adamw every param is one element-wise task of numel x 1, so the main
// copies of the model are exactly its params.
#include "canzona/train/memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "canzona/model/load.h"
#include "canzona/train/trainer.h"

namespace canzona::train {
namespace {

struct Sizes {
  double params = 0.0, largest = 0.0;  // floats
};

Sizes sizes(const model::ModelSpec& spec) {
  Sizes s;
  for (const model::ParamSpec& p : spec.params) {
    s.params += static_cast<double>(p.numel());
    s.largest = std::max(s.largest, static_cast<double>(p.numel()));
  }
  return s;
}

MemoryNeed need_of(plan::Strategy strategy, int dp, Sizes* out, DType precision = DType::kF32,
                   bool grad_reduce_in_fp32 = false) {
  TrainOptions o;
  o.job.model = "qwen3-tiny";
  o.job.dims.dp = dp;
  o.job.precision = precision;
  o.job.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  o.all_adamw = true;
  o.strategies = {strategy};
  const model::TransformerConfig config = model::preset(o.job.model);
  const model::ModelSpec spec = training_spec(config, o);
  *out = sizes(spec);
  return estimate_memory(config, spec, o);
}

TEST(MemoryEstimate, Dp1LbAscHoldsAMainCopyAndAWholeShard) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kLbAsc, 1, &s);
  EXPECT_EQ(need.params_bytes, 4 * s.params);
  EXPECT_EQ(need.grads_bytes, 4 * s.params);
  EXPECT_EQ(need.buffer_bytes, 4 * (s.params + s.params));
}

TEST(MemoryEstimate, Dp2LbAscHalvesTheMainCopiesAndTheShard) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kLbAsc, 2, &s);
  EXPECT_EQ(need.buffer_bytes, 4 * ((s.params / 2 + s.largest) + (s.params / 2 + s.largest)));
}

TEST(MemoryEstimate, Dp2ScComputesEverythingAndReducesInPlace) {
  Sizes s;
  const MemoryNeed need = need_of(plan::Strategy::kSc, 2, &s);
  EXPECT_EQ(need.buffer_bytes, 4 * s.params);
}

// --precision bf16: params and gradients of 2 bytes (gradients 4 under --grad-reduce-in-fp32),
// the main copies fp32; the reduce-scatter shard at the gradients' bytes.
TEST(MemoryEstimate, Bf16CountsEachBufferAtItsDtype) {
  Sizes s;
  const MemoryNeed bf16 = need_of(plan::Strategy::kLbAsc, 2, &s, DType::kBF16);
  EXPECT_EQ(bf16.params_bytes, 2 * s.params);
  EXPECT_EQ(bf16.grads_bytes, 2 * s.params);
  EXPECT_EQ(bf16.buffer_bytes, 4 * (s.params / 2 + s.largest) + 2 * (s.params / 2 + s.largest));
  const MemoryNeed fp32_grads = need_of(plan::Strategy::kLbAsc, 2, &s, DType::kBF16, true);
  EXPECT_EQ(fp32_grads.params_bytes, 2 * s.params);
  EXPECT_EQ(fp32_grads.grads_bytes, 4 * s.params);
  EXPECT_EQ(fp32_grads.buffer_bytes, 4 * ((s.params / 2 + s.largest) + (s.params / 2 + s.largest)));
}

// Pipeline stages (qwen3-tiny, 2 layers, tied): each stage holds its own params (the last also
// the embedding's copy), so their params add up to the model's plus one embedding; 1F1B keeps
// min(PP - s, grad_accum) micro-batches of activations on stage s, so at 8 micro-batches stage 0
// holds twice what it holds at 1 and stage 1 the same; the run needs the larger stage.
TEST(MemoryEstimate, PipelineStagesHoldTheirParamsAndTheirMicroBatchesInFlight) {
  TrainOptions o;
  o.job.model = "qwen3-tiny";
  o.job.dims.pp = 2;
  o.all_adamw = true;
  o.strategies = {plan::Strategy::kLbAsc};
  const model::TransformerConfig config = model::preset(o.job.model);
  const model::ModelSpec spec = training_spec(config, o);
  const Sizes whole = sizes(spec);
  const double embedding = static_cast<double>(spec.params[0].numel());
  ASSERT_EQ(spec.params[0].name, "embedding.word_embeddings.weight");
  o.grad_accum = 1;
  const std::vector<MemoryNeed> one = estimate_stage_memory(config, spec, o);
  o.grad_accum = 8;
  const std::vector<MemoryNeed> eight = estimate_stage_memory(config, spec, o);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(eight.size(), 2u);
  EXPECT_EQ(eight[0].stage, 0);
  EXPECT_EQ(eight[1].stage, 1);
  EXPECT_EQ(one[0].params_bytes + one[1].params_bytes, 4 * (whole.params + embedding));
  EXPECT_GT(one[0].activations_bytes, 0.0);
  EXPECT_EQ(eight[0].activations_bytes, 2 * one[0].activations_bytes);
  EXPECT_EQ(eight[1].activations_bytes, one[1].activations_bytes);
  const MemoryNeed run = estimate_memory(config, spec, o);
  EXPECT_EQ(run.total(), std::max(eight[0].total(), eight[1].total()));
  o.job.dims.pp = 1;
  EXPECT_EQ(estimate_stage_memory(config, spec, o).size(), 1u);
}

}  // namespace
}  // namespace canzona::train

// keep_freed_memory (trainer.h): a freed large block is reused, so a second step's activations
// of the same size fault in no new pages. Without it glibc unmaps the 64 MiB block on free and
// the second block is faulted in (and zeroed by the kernel) page by page again.
namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Faults taken to allocate and write one block of `bytes`, which is then freed.
long faults_of_one_block(std::size_t bytes) {
  const long before = minor_faults();
  char* block = static_cast<char*>(std::malloc(bytes));
  std::memset(block, 1, bytes);
  asm volatile("" : : "r"(block) : "memory");  // the writes and the block stay observable
  const long after = minor_faults();
  std::free(block);
  return after - before;
}

}  // namespace

TEST(KeepFreedMemory, ASecondLargeBlockReusesTheFirstBlocksPages) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc malloc, whose options this sets";
#endif
  canzona::train::keep_freed_memory();
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  const long first = faults_of_one_block(kBytes);
  const long second = faults_of_one_block(kBytes);
  EXPECT_GT(first, 0);
  EXPECT_LE(second * 8, first) << "first block " << first << " faults, second " << second;
}
