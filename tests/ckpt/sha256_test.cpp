// SHA-256 against the test vectors of FIPS 180-4's examples (NIST CSRC "SHA256.pdf",
// "SHA2_Additional.pdf"), typed in from the standard, and update() split at every block and
// padding boundary against the one-shot digest. Random files against Python's hashlib:
// sha256_files_test.sh.
#include "canzona/ckpt/sha256.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "canzona/common/error.h"

namespace canzona::ckpt {
namespace {

std::string hex_of(Sha256& sha) {
  const auto digest = sha.finish();
  std::string out;
  char byte[3];
  for (std::uint8_t b : digest) {
    std::snprintf(byte, sizeof(byte), "%02x", b);
    out += byte;
  }
  return out;
}

TEST(Sha256, FipsOneBlockMessageAbc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FipsEmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, FipsTwoBlockMessage448Bits) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Fips896BitMessage) {
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjk"
                       "lmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, FipsOneMillionA) {
  EXPECT_EQ(sha256_hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same message in 1000 updates of 1000 bytes (never aligned to a block).
  Sha256 sha;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) sha.update(chunk.data(), chunk.size());
  EXPECT_EQ(hex_of(sha), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The portable rounds on the FIPS vectors (the tests above run whatever backend() says; on a CPU
// with SHA-NI that is the other code path), and both paths on random lengths around block sizes.
TEST(Sha256, PortableAndDefaultBackendsAgree) {
  auto digest = [](const std::string& text, bool portable) {
    Sha256 sha(portable);
    sha.update(text.data(), text.size());
    return hex_of(sha);
  };
  EXPECT_EQ(digest("abc", true),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest(std::string(1'000'000, 'a'), true),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::mt19937 rng(7);
  for (std::size_t n : {0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 4096, 100'003}) {
    std::string text(n, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    EXPECT_EQ(digest(text, false), digest(text, true))
        << n << " bytes, backend " << Sha256::backend();
  }
}

TEST(Sha256, AnySplitOfTheInputGivesTheOneShotDigest) {
  std::mt19937 rng(12);
  // Lengths around the padding boundaries (55/56 bytes in the last block) and block multiples.
  for (std::size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000}) {
    std::string message(length, '\0');
    for (char& c : message) c = static_cast<char>(rng());
    const std::string expected = sha256_hex(message);
    for (std::size_t split = 0; split <= length; ++split) {
      Sha256 sha;
      sha.update(message.data(), split);
      sha.update(message.data() + split, 0);
      sha.update(message.data() + split, length - split);
      ASSERT_EQ(hex_of(sha), expected) << "length " << length << " split " << split;
    }
  }
}

TEST(Sha256, FileDigestEqualsTheDigestOfItsBytes) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("canzona-sha256-" + std::to_string(::getpid()) + ".bin");
  std::string bytes(3 * (1 << 20) + 17, '\0');
  std::mt19937 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::ssize(bytes));
  EXPECT_EQ(sha256_file(path.string()), sha256_hex(bytes));
  std::filesystem::remove(path);
}

TEST(Sha256, UnreadableFileIsAUsageErrorNamingIt) {
  for (const std::string path : {"/nonexistent/canzona-sha", "/tmp"}) {
    try {
      sha256_file(path);
      FAIL() << path << " did not throw";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), path + ": cannot read file");
    }
  }
}

}  // namespace
}  // namespace canzona::ckpt
