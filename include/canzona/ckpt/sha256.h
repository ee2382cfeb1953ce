// SHA-256 (FIPS 180-4): the checksums a checkpoint's trainer.json records for each of its files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace canzona::ckpt {

// On x86-64 CPUs with the SHA extensions the blocks are compressed with them (several times
// faster); `portable` forces the plain C++ rounds (tests compare the two).
class Sha256 {
 public:
  explicit Sha256(bool portable = false);
  // "sha-ni" or "portable": what a default-constructed Sha256 uses on this CPU.
  static const char* backend();
  void update(const void* data, std::size_t bytes);
  // The digest of everything passed to update(); the object is spent afterwards.
  std::array<std::uint8_t, 32> finish();

 private:
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> block_;
  std::size_t block_used_ = 0;
  std::uint64_t total_bytes_ = 0;
  bool portable_ = false;
};

// Lower-case hex of the digest (64 characters).
std::string sha256_hex(std::string_view bytes);
// Of a whole file, read in chunks. Throws UsageError "<path>: cannot read file".
std::string sha256_file(const std::string& path);

}  // namespace canzona::ckpt
