// What the trainer's thread-grid tests share (trainer_test.cpp, moe_trainer_test.cpp): a small
// corpus the test writes, and train() on threads as ranks with a MoE model's expert groups.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "canzona/comm/thread.h"
#include "canzona/train/trainer.h"

namespace canzona::train::test_util {

// `lines` repeated 300 times in the order (i x stride) mod lines.size(), written to the test's
// temp directory `name`, 10% held out (no dependency on the installed default corpus).
inline Corpus write_corpus(const std::string& name, const std::vector<std::string>& lines,
                           std::size_t stride, std::int64_t seq_len) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/text.txt";
  std::ofstream out(path, std::ios::binary);
  for (std::size_t i = 0; i < 300; ++i) out << lines[(i * stride) % lines.size()];
  out.close();
  DataOptions data;
  data.data = path;
  data.val_fraction = 0.1;
  return load_corpus(data, seq_len + 1);
}

// Runs train() on a thread grid of o.job's shape (a MoE model with its expert groups for
// o.job.dims); returns world rank 0's runs.
inline std::vector<StrategyRun> train_threaded(const model::TransformerConfig& config,
                                               const TrainOptions& o, const Corpus& corpus) {
  const model::ModelSpec spec = training_spec(config, o);
  const ParallelDims shape{o.job.dims.dp, o.job.dims.tp, o.job.dims.pp, o.job.dims.ep,
                           o.job.dims.etp};
  std::vector<comm::ExpertGroups> groups;
  if (config.is_moe())
    groups = comm::make_thread_expert_groups(shape, comm::ReduceMode::kDeterministic);
  std::vector<StrategyRun> rank0;
  std::mutex mutex;
  comm::run_on_thread_grid(shape, comm::ReduceMode::kDeterministic, [&](comm::Grid& grid) {
    torch::set_num_threads(1);
    const auto rank = static_cast<std::size_t>(grid.world().rank());
    std::vector<StrategyRun> runs =
        train(grid, config, spec, o, corpus, Progress{}, groups.empty() ? nullptr : &groups[rank]);
    if (rank == 0) {
      const std::lock_guard<std::mutex> lock(mutex);
      rank0 = std::move(runs);
    }
  });
  return rank0;
}

}  // namespace canzona::train::test_util
