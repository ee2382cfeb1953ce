// Positioned checkpoint I/O: disjoint pwrites in any order land where asked; reads past the end
// and unreadable paths are UsageErrors naming the file; a write or an allocation beyond
// RLIMIT_FSIZE (the stand-in for a full disk) throws Error "<path>: write failed: <reason>".
#include "canzona/ckpt/file_io.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::ckpt {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("canzona-fio-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

TEST_F(FileIo, PositionedWritesInAnyOrderReadBack) {
  const std::string file = path("out.bin");
  {
    OutFile out(file, /*create=*/true);
    out.allocate(12);
    out.pwrite(8, bytes_of("IJKL"));
    out.pwrite(0, bytes_of("ABCD"));
    out.pwrite(4, bytes_of("EFGH"));
    out.pwrite(12, {});
    out.sync();
    out.close();
    out.close();  // a second close does nothing
  }
  sync_dir(dir_.string());
  InFile in(file);
  EXPECT_EQ(in.size(), 12);
  std::string got(6, '\0');
  in.pread(3, std::as_writable_bytes(std::span(got)));
  EXPECT_EQ(got, "DEFGHI");
  // Reopening without create keeps the contents; allocate never shrinks.
  {
    OutFile again(file, /*create=*/false);
    again.allocate(4);
    again.pwrite(1, bytes_of("x"));
  }
  std::string all(12, '\0');
  InFile(file).pread(0, std::as_writable_bytes(std::span(all)));
  EXPECT_EQ(all, "AxCDEFGHIJKL");
  // create truncates.
  { OutFile(file, true).pwrite(0, bytes_of("z")); }
  EXPECT_EQ(fs::file_size(file), 1u);
}

TEST_F(FileIo, AllocateReservesTheWholeFile) {
  const std::string file = path("big.bin");
  OutFile out(file, true);
  out.allocate(std::int64_t{3} << 20);
  EXPECT_EQ(fs::file_size(file), std::uintmax_t{3} << 20);
}

TEST_F(FileIo, ReadPastTheEndIsAUsageErrorNamingTheFile) {
  const std::string file = path("short.bin");
  std::ofstream(file) << "0123456789";
  InFile in(file);
  std::vector<std::byte> buffer(8);
  try {
    in.pread(5, buffer);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": truncated: bytes [5, 13) requested, file has 10");
  }
  EXPECT_THROW(in.pread(-1, std::span(buffer).first(1)), UsageError);
  in.pread(10, std::span(buffer).first(0));
}

TEST_F(FileIo, UnreadablePathsAreUsageErrors) {
  for (const std::string& p : {path("missing.bin"), dir_.string()}) {
    try {
      InFile in(p);
      FAIL() << p;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), p + ": cannot read file");
    }
  }
}

TEST_F(FileIo, UnwritablePathsThrowWriteFailed) {
  const std::string missing_dir = path("no/such/dir/f.bin");
  try {
    OutFile out(missing_dir, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), missing_dir + ": write failed: No such file or directory");
  }
  EXPECT_THROW(OutFile(path("absent.bin"), /*create=*/false), Error);
  EXPECT_THROW(sync_dir(path("no-dir")), Error);
}

// Runs `body` in a forked child whose file-size limit is 64 KiB with SIGXFSZ ignored, so writes
// past the limit fail with EFBIG as on a full disk; the child prints the Error's message and exits
// 3, or exits 0 when nothing threw.
template <typename F>
void with_file_size_limit(F&& body) {
  struct rlimit limit = {64 << 10, 64 << 10};
  std::signal(SIGXFSZ, SIG_IGN);
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(4);
  try {
    body();
  } catch (const Error& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }
  std::_Exit(0);
}

TEST_F(FileIo, WriteBeyondTheFileSizeLimitThrowsWriteFailed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string file = path("limited.bin");
  // 100 KiB in one call: the kernel writes 64 KiB (a short write), the rest fails with EFBIG.
  EXPECT_EXIT(with_file_size_limit([&] {
                std::vector<std::byte> data(100 << 10, std::byte{1});
                OutFile out(file, true);
                out.pwrite(0, data);
              }),
              ::testing::ExitedWithCode(3), "caught: .*limited.bin: write failed: File too large");
  // A write that starts beyond the limit.
  EXPECT_EXIT(with_file_size_limit([&] {
                OutFile out(file, true);
                out.pwrite(1 << 20, bytes_of("x"));
              }),
              ::testing::ExitedWithCode(3), "limited.bin: write failed: File too large");
}

TEST_F(FileIo, AllocateBeyondTheFileSizeLimitThrows) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string file = path("reserved.bin");
  EXPECT_EXIT(with_file_size_limit([&] {
                OutFile out(file, true);
                out.allocate(1 << 20);
              }),
              ::testing::ExitedWithCode(3), "reserved.bin: write failed: File too large");
  // Within the limit it succeeds.
  EXPECT_EXIT(with_file_size_limit([&] {
                OutFile out(file, true);
                out.allocate(32 << 10);
              }),
              ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace canzona::ckpt
