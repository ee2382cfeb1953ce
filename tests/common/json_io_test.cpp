// File input and output under hostile conditions: non-regular files refused by name, the size
// cap, strict JSON (duplicate keys, numbers out of range), output paths checked before work, and
// atomic writes that leave the previous file untouched when a write fails.
#include "canzona/common/json_io.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "canzona/common/error.h"

namespace canzona {
namespace {

namespace fs = std::filesystem;

class JsonIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("canzona-json-io-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The UsageError message of f(), or "" when it does not throw one.
  template <typename F>
  static std::string usage_error(F&& f) {
    try {
      f();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(JsonIo, ReadsAValidFile) {
  const std::string path = file("ok.json", R"({"a": {"b": [1, 2.5]}, "c": "x"})");
  EXPECT_EQ(read_json_file(path).at("a").at("b").at(1).get<double>(), 2.5);
}

TEST_F(JsonIo, RefusesDirectoriesAndDevicesByName) {
  EXPECT_EQ(usage_error([&] { read_json_file(dir_.string()); }),
            dir_.string() + ": not a regular file");
  EXPECT_EQ(usage_error([] { read_json_file("/dev/zero"); }), "/dev/zero: not a regular file");
  EXPECT_EQ(usage_error([&] { read_json_file((dir_ / "missing.json").string()); }),
            (dir_ / "missing.json").string() + ": cannot read file");
}

TEST_F(JsonIo, RefusesFilesOverTheSizeCap) {
  const std::string path = file("big.json", "");
  fs::resize_file(path, static_cast<std::uintmax_t>(kMaxInputBytes) + 1);  // sparse: no disk used
  EXPECT_NE(usage_error([&] { read_json_file(path); }).find("exceeds the 64 MiB limit"),
            std::string::npos);
}

TEST_F(JsonIo, DuplicateKeysAreErrorsAtAnyDepth) {
  EXPECT_EQ(usage_error([&] { read_json_file(file("d1.json", R"({"a": 1, "a": 2})")); }),
            (dir_ / "d1.json").string() + ": duplicate key 'a' in one object");
  EXPECT_NE(usage_error([&] {
              read_json_file(file("d2.json", R"({"x": [{"k": 1}, {"k": 2, "k": 3}]})"));
            }).find("duplicate key 'k'"),
            std::string::npos);
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(read_json_file(file("d3.json", R"({"x": {"k": 1}, "y": {"k": 2}})")));
}

TEST_F(JsonIo, NumbersJsonCannotHoldAreUsageErrors) {
  const std::string message =
      usage_error([&] { read_json_file(file("n.json", R"({"a": 1e999})")); });
  EXPECT_NE(message.find("n.json: malformed JSON"), std::string::npos) << message;
}

TEST_F(JsonIo, OutputPathsAreCheckedBeforeWork) {
  EXPECT_EQ(usage_error([] { check_output_path("", "--json"); }), "--json: empty output path");
  EXPECT_NE(usage_error([&] {
              check_output_path(dir_.string(), "--svg");
            }).find("exists and is not a regular file"),
            std::string::npos);
  EXPECT_NE(usage_error([&] {
              check_output_path((dir_ / "no/such/x.json").string(), "--trace");
            }).find("does not exist"),
            std::string::npos);
  EXPECT_EQ(usage_error([&] { check_output_path((dir_ / "new.json").string(), "--json"); }), "");
}

TEST_F(JsonIo, WritesReplaceTheFileAndLeaveNoTemporary) {
  const std::string path = (dir_ / "out.json").string();
  write_json_file(path, {{"v", 1}});
  write_json_file(path, {{"v", 2}});
  EXPECT_EQ(read_json_file(path).at("v"), 2);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

// A write that fails half way (here: the file-size limit) keeps the previous file intact.
TEST_F(JsonIo, FailedWriteKeepsThePreviousFile) {
  const std::string path = (dir_ / "keep.json").string();
  write_text_file(path, "previous\n");
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = usage_error([&] { write_text_file(path, std::string(100000, 'x')); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("keep.json: write failed"), std::string::npos) << message;
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "previous\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

}  // namespace
}  // namespace canzona
