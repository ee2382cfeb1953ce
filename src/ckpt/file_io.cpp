#include "canzona/ckpt/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "canzona/common/error.h"

namespace canzona::ckpt {
namespace {

[[noreturn]] void throw_write_failed(const std::string& path, int error) {
  throw Error(str(path, ": write failed: ", std::strerror(error)));
}

}  // namespace

OutFile::OutFile(const std::string& path, bool create) : path_(path) {
  const int flags = O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw_write_failed(path_, errno);
}

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutFile::allocate(std::int64_t bytes) {
  CANZONA_CHECK(fd_ >= 0, path_, " is closed");
  CANZONA_CHECK(bytes >= 0, bytes);
  if (bytes == 0) return;
  // posix_fallocate returns the error number instead of setting errno.
  int error;
  do {
    error = ::posix_fallocate(fd_, 0, bytes);
  } while (error == EINTR);
  if (error == EOPNOTSUPP || error == EINVAL) {
    // The file system cannot reserve blocks (EINVAL is glibc's answer on some of them): grow the
    // file instead, which at least fails on RLIMIT_FSIZE and a too-large size.
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_write_failed(path_, errno);
    if (st.st_size >= bytes) return;
    if (::ftruncate(fd_, bytes) != 0) throw_write_failed(path_, errno);
    return;
  }
  if (error != 0) throw_write_failed(path_, error);
}

void OutFile::pwrite(std::int64_t offset, std::span<const std::byte> data) {
  CANZONA_CHECK(fd_ >= 0, path_, " is closed");
  CANZONA_CHECK(offset >= 0, offset);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_write_failed(path_, errno);
    if (n == 0) throw_write_failed(path_, ENOSPC);  // no progress and no error: treat as full
    done += static_cast<std::size_t>(n);
  }
}

void OutFile::sync() {
  CANZONA_CHECK(fd_ >= 0, path_, " is closed");
  if (::fsync(fd_) != 0) throw_write_failed(path_, errno);
}

void OutFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  // Linux releases the descriptor even when close fails; never retry it (EINTR included).
  if (::close(fd) != 0) throw_write_failed(path_, errno);
}

InFile::InFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  CANZONA_REQUIRE(fd_ >= 0, path, ": cannot read file");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw UsageError(str(path, ": cannot read file"));
  }
  size_ = st.st_size;
}

InFile::~InFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InFile::pread(std::int64_t offset, std::span<std::byte> out) const {
  const std::int64_t count = static_cast<std::int64_t>(out.size());
  CANZONA_REQUIRE(offset >= 0 && offset <= size_ && count <= size_ - offset, path_,
                  ": truncated: bytes [", offset, ", ", offset + count, ") requested, file has ",
                  size_);
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    CANZONA_REQUIRE(n >= 0, path_, ": cannot read file: ", std::strerror(errno));
    // The file shrank since it was opened.
    CANZONA_REQUIRE(n > 0, path_, ": truncated: bytes [", offset, ", ", offset + count,
                    ") requested, file has ", offset + static_cast<std::int64_t>(done));
    done += static_cast<std::size_t>(n);
  }
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(str(dir, ": cannot sync directory: ", std::strerror(errno)));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) throw Error(str(dir, ": cannot sync directory: ", std::strerror(error)));
}

}  // namespace canzona::ckpt
