// Helpers shared by the model tests: per-test scratch files and ModelSpec comparison.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "canzona/common/json_io.h"
#include "canzona/model/spec.h"

namespace canzona::model::testing {

inline std::string data_path(const std::string& name) {
  return std::string(CANZONA_MODEL_TEST_DATA) + "/" + name;
}

// Scratch directories created by this process; test_util.cpp removes them after the last test.
std::vector<std::filesystem::path>& scratch_dirs();

// A fresh directory for the running test (unique per test and process).
inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("canzona_model_" + std::string(info->test_suite_name()) + "_" + info->name() +
                    "_" + std::to_string(::getpid()));
  if (std::filesystem::create_directories(dir)) scratch_dirs().push_back(dir);
  return dir;
}

// Writes `text` to `name` inside the test's scratch directory and returns the path.
inline std::string scratch_file(const std::string& name, const std::string& text) {
  const std::string path = (scratch_dir() / name).string();
  write_text_file(path, text);
  return path;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void expect_same_model(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.arch.num_layers, b.arch.num_layers);
  EXPECT_EQ(a.arch.num_heads, b.arch.num_heads);
  EXPECT_EQ(a.arch.num_query_groups, b.arch.num_query_groups);
  EXPECT_EQ(a.arch.head_dim, b.arch.head_dim);
  EXPECT_EQ(a.arch.vocab_size, b.arch.vocab_size);
  EXPECT_EQ(a.arch.padded_vocab_size, b.arch.padded_vocab_size);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const ParamSpec& p = a.params[i];
    const ParamSpec& q = b.params[i];
    SCOPED_TRACE(p.name);
    EXPECT_EQ(p.name, q.name);
    EXPECT_EQ(p.shape, q.shape);
    EXPECT_EQ(p.tp_split_dim, q.tp_split_dim);
    EXPECT_EQ(p.optimizer, q.optimizer);
    EXPECT_EQ(p.layer, q.layer);
    EXPECT_EQ(p.stage, q.stage);
    ASSERT_EQ(p.pieces.size(), q.pieces.size());
    for (std::size_t k = 0; k < p.pieces.size(); ++k) {
      EXPECT_EQ(p.pieces[k].name, q.pieces[k].name);
      EXPECT_EQ(p.pieces[k].row_ranges, q.pieces[k].row_ranges);
    }
  }
}

}  // namespace canzona::model::testing
