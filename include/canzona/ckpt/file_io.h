// Positioned file I/O for checkpoints: many ranks write disjoint byte ranges of one file, each
// reads only the ranges it needs. Errors name the file and the operating system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace canzona::ckpt {

// A file opened for positioned writes. Every failure (cannot open, short write, ENOSPC, EFBIG
// from RLIMIT_FSIZE: the caller ignores SIGXFSZ) throws canzona::Error "<path>: write failed:
// <strerror>".
class OutFile {
 public:
  // create: create or truncate the file (mode 0644); otherwise open an existing one.
  OutFile(const std::string& path, bool create);
  ~OutFile();  // closes; never throws
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  // Reserves [0, bytes) on disk (posix_fallocate), so a full disk fails here, before data is
  // written.
  void allocate(std::int64_t bytes);
  void pwrite(std::int64_t offset, std::span<const std::byte> data);
  void sync();   // fsync
  void close();  // throws on a failed close

 private:
  std::string path_;
  int fd_ = -1;
};

// A file opened for positioned reads. Throws UsageError "<path>: cannot read file" when it cannot
// be opened or is not a regular file, and "<path>: truncated: bytes [a, b) requested, file has N"
// for a read past the end.
class InFile {
 public:
  explicit InFile(const std::string& path);
  ~InFile();
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  std::int64_t size() const { return size_; }
  void pread(std::int64_t offset, std::span<std::byte> out) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::int64_t size_ = 0;
};

// fsync of a directory (after a rename in it). Throws Error naming it.
void sync_dir(const std::string& dir);

}  // namespace canzona::ckpt
