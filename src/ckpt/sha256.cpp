// SHA-256 as FIPS 180-4 section 6.2 defines it: the message is padded to a multiple of 512 bits
// (a 1 bit, zeros, the bit length as a 64-bit big-endian integer) and processed in 64-byte blocks
// M(i); each block is expanded to the message schedule W_0..W_63 and mixed into the working
// variables a..h by 64 rounds with the constants K_t; the hash value H(i) = H(i-1) + (a..h).
#include "canzona/ckpt/sha256.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "canzona/common/error.h"
#include "sha256_x86.h"

namespace canzona::ckpt {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr std::uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// Section 5.3.3: the initial hash value H(0).
constexpr std::array<std::uint32_t, 8> kH0 = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}
inline std::uint32_t big_sigma0(std::uint32_t x) {
  return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22);
}
inline std::uint32_t big_sigma1(std::uint32_t x) {
  return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25);
}
inline std::uint32_t small_sigma0(std::uint32_t x) {
  return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3);
}
inline std::uint32_t small_sigma1(std::uint32_t x) {
  return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10);
}
inline std::uint32_t ch(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (~x & z);
}
inline std::uint32_t maj(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return (x & y) ^ (x & z) ^ (y & z);
}

// Section 6.2.2: mixes `blocks` consecutive 64-byte blocks at `m` into the hash value `h`.
void compress_portable(std::array<std::uint32_t, 8>& h, const std::uint8_t* m, std::size_t blocks) {
  std::uint32_t w[64];
  for (; blocks > 0; --blocks, m += 64) {
    for (int t = 0; t < 16; ++t)
      w[t] = std::uint32_t{m[4 * t]} << 24 | std::uint32_t{m[4 * t + 1]} << 16 |
             std::uint32_t{m[4 * t + 2]} << 8 | std::uint32_t{m[4 * t + 3]};
    for (int t = 16; t < 64; ++t)
      w[t] = small_sigma1(w[t - 2]) + w[t - 7] + small_sigma0(w[t - 15]) + w[t - 16];
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t t1 = hh + big_sigma1(e) + ch(e, f, g) + kK[t] + w[t];
      const std::uint32_t t2 = big_sigma0(a) + maj(a, b, c);
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  }
}

const bool kShaNi = detail::have_sha_ni();

void compress(std::array<std::uint32_t, 8>& h, const std::uint8_t* m, std::size_t blocks,
              bool portable) {
  if (kShaNi && !portable)
    detail::compress_sha_ni(h.data(), m, blocks, kK);
  else
    compress_portable(h, m, blocks);
}

std::string to_hex(const std::array<std::uint8_t, 32>& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(64, '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    hex[2 * i] = kDigits[digest[i] >> 4];
    hex[2 * i + 1] = kDigits[digest[i] & 15];
  }
  return hex;
}

}  // namespace

Sha256::Sha256(bool portable) : h_(kH0), block_{}, portable_(portable) {}

const char* Sha256::backend() {
  return kShaNi ? "sha-ni" : "portable";
}

void Sha256::update(const void* data, std::size_t bytes) {
  if (bytes == 0) return;  // data may be null then (an empty buffer), and memcpy must not see it
  const auto* in = static_cast<const std::uint8_t*>(data);
  total_bytes_ += bytes;
  if (block_used_ > 0) {
    const std::size_t take = std::min(bytes, block_.size() - block_used_);
    std::memcpy(block_.data() + block_used_, in, take);
    block_used_ += take;
    in += take;
    bytes -= take;
    if (block_used_ < block_.size()) return;
    compress(h_, block_.data(), 1, portable_);
    block_used_ = 0;
  }
  compress(h_, in, bytes / 64, portable_);
  in += bytes / 64 * 64;
  bytes %= 64;
  std::memcpy(block_.data(), in, bytes);
  block_used_ = bytes;
}

std::array<std::uint8_t, 32> Sha256::finish() {
  // Section 5.1.1: append bit 1, zeros up to 56 mod 64 bytes, then the length in bits.
  const std::uint64_t bits = total_bytes_ * 8;
  block_[block_used_++] = 0x80;
  if (block_used_ > 56) {
    std::memset(block_.data() + block_used_, 0, 64 - block_used_);
    compress(h_, block_.data(), 1, portable_);
    block_used_ = 0;
  }
  std::memset(block_.data() + block_used_, 0, 56 - block_used_);
  for (int i = 0; i < 8; ++i) block_[56 + i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
  compress(h_, block_.data(), 1, portable_);
  block_used_ = 0;
  std::array<std::uint8_t, 32> digest{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      digest[4 * i + j] = static_cast<std::uint8_t>(h_[i] >> (24 - 8 * j));
  return digest;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes.data(), bytes.size());
  return to_hex(sha.finish());
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  CANZONA_REQUIRE(fd >= 0, path, ": cannot read file");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UsageError(str(path, ": cannot read file"));
  }
  Sha256 sha;
  std::vector<std::uint8_t> buffer(std::size_t{1} << 20);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw UsageError(str(path, ": cannot read file: ", reason));
    }
    if (n == 0) break;
    sha.update(buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return to_hex(sha.finish());
}

}  // namespace canzona::ckpt
