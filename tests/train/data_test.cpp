// Tests of the training data layer (data.h). Expected values are derived by hand in the comments or
// computed independently (std::filesystem, the spm_train / spm_encode binaries), never by data.cpp.
#include "canzona/train/data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// <TempDir>/canzona_data_test_<pid>: every test's files, removed when the binary ends.
fs::path scratch_root() {
  return fs::path(::testing::TempDir()) / ("canzona_data_test_" + std::to_string(::getpid()));
}

class RemoveScratchRoot : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveScratchRoot =
    ::testing::AddGlobalTestEnvironment(new RemoveScratchRoot);

// A fresh directory for one test: <TempDir>/canzona_data_test_<pid>/<test name>.
std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = scratch_root() / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Writes `bytes` to dir/name and returns the path.
std::string write_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = (fs::path(dir) / name).string();
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Appends the little-endian encoding of `v` in `n` bytes.
void put_le(std::string& out, std::uint32_t v, int n) {
  for (int k = 0; k < n; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
}

// An llm.c shard written by hand: 256 int32 header {magic, version, count, 0...}, uint16 tokens.
std::string llmc_shard(const std::vector<std::uint16_t>& tokens, std::int32_t version = 1,
                       std::int64_t count = -1) {
  std::string out;
  put_le(out, 20240520, 4);
  put_le(out, static_cast<std::uint32_t>(version), 4);
  put_le(out, static_cast<std::uint32_t>(count < 0 ? tokens.size() : count), 4);
  for (int i = 3; i < 256; ++i) put_le(out, 0, 4);
  for (const std::uint16_t t : tokens) put_le(out, t, 2);
  return out;
}

// DataOptions with every field given (designated initializers would leave some implicit).
DataOptions options(std::string data, std::string val_data = "", std::string tokenizer = "",
                    double val_fraction = 0.05) {
  DataOptions o;
  o.data = std::move(data);
  o.val_data = std::move(val_data);
  o.tokenizer = std::move(tokenizer);
  o.val_fraction = val_fraction;
  return o;
}

std::vector<std::int32_t> all_tokens(const Corpus& c) {
  std::vector<std::int32_t> all = c.train;
  all.insert(all.end(), c.val.begin(), c.val.end());
  return all;
}

// ---------------------------------------------------------------------------------------------
// Byte-level text and the split.

TEST(LoadCorpus, ByteTokensAreTheFileBytes) {
  const std::string dir = scratch_dir();
  // "aé€😀\n" in UTF-8, by hand: 61 | C3 A9 | E2 82 AC | F0 9F 98 80 | 0A, then "xyz" x 4.
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\nxyzxyzxyzxyz";
  const std::vector<std::int32_t> expected = {0x61, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F,
                                              0x98, 0x80, 0x0A, 'x',  'y',  'z',  'x',  'y',
                                              'z',  'x',  'y',  'z',  'x',  'y',  'z'};
  const Corpus c = load_corpus(options(write_file(dir, "t.txt", text), "", "", 0.25), 3);
  EXPECT_EQ(all_tokens(c), expected);
  EXPECT_EQ(c.train.size(), 18u);  // 23 tokens: val = floor(0.25 x 23) = 5, train = 18
  EXPECT_EQ(c.val.size(), 5u);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.tokenizer, "bytes");
  EXPECT_THAT(c.source, HasSubstr("t.txt"));
}

TEST(LoadCorpus, NulBytesAreValidText) {
  const std::string dir = scratch_dir();
  const std::string text("ab\0cd\0ef\0gh", 11);
  const Corpus c = load_corpus(options(write_file(dir, "nul.txt", text), "", "", 0.5), 2);
  EXPECT_EQ(all_tokens(c),
            (std::vector<std::int32_t>{'a', 'b', 0, 'c', 'd', 0, 'e', 'f', 0, 'g', 'h'}));
}

struct SplitCase {
  std::int64_t total;
  double val_fraction;
  std::int64_t min_window;
  std::size_t val;  // hand value: max(floor(val_fraction x total), min_window)
};

TEST(LoadCorpus, SplitSizesFollowValFraction) {
  const std::string dir = scratch_dir();
  const SplitCase cases[] = {
      {100, 0.05, 2, 5}, {100, 0.29, 2, 29},    {100, 0.5, 2, 50}, {37, 0.1, 2, 3},
      {100, 0.01, 4, 4}, {1000, 0.123, 5, 123}, {7, 0.5, 2, 3},
  };
  for (const SplitCase& s : cases) {
    std::string text;
    for (std::int64_t i = 0; i < s.total; ++i) text.push_back(static_cast<char>('a' + i % 26));
    const Corpus c =
        load_corpus(options(write_file(dir, "s.txt", text), "", "", s.val_fraction), s.min_window);
    SCOPED_TRACE(::testing::Message() << s.total << " x " << s.val_fraction);
    EXPECT_EQ(c.val.size(), s.val);
    EXPECT_EQ(c.train.size(), static_cast<std::size_t>(s.total) - s.val);
    // The val part is the end of the stream.
    EXPECT_EQ(c.val.front(), 'a' + (s.total - static_cast<std::int64_t>(s.val)) % 26);
  }
}

TEST(LoadCorpus, ValDataIsTheWholeValPart) {
  const std::string dir = scratch_dir();
  const Corpus c = load_corpus(
      options(write_file(dir, "train.txt", "abcdefgh"), write_file(dir, "val.txt", "XYZ")), 3);
  EXPECT_EQ(c.train, (std::vector<std::int32_t>{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}));
  EXPECT_EQ(c.val, (std::vector<std::int32_t>{'X', 'Y', 'Z'}));
}

// ---------------------------------------------------------------------------------------------
// llm.c shards.

TEST(LoadCorpus, ReadsLlmcShardWrittenByHand) {
  const std::string dir = scratch_dir();
  const std::vector<std::uint16_t> tokens = {7, 300, 65535, 0, 42, 1, 2, 3};
  const Corpus c =
      load_corpus(options(write_file(dir, "shard.txt", llmc_shard(tokens)), "", "", 0.5),
                  2);  // recognised by the magic, not the name
  EXPECT_EQ(c.train, (std::vector<std::int32_t>{7, 300, 65535, 0}));
  EXPECT_EQ(c.val, (std::vector<std::int32_t>{42, 1, 2, 3}));
  EXPECT_EQ(c.vocab_size, 65536);  // largest token 65535 + 1
  EXPECT_EQ(c.tokenizer, "llm.c");
}

TEST(LoadCorpus, LlmcVocabIsLargestTokenPlusOneOverBothParts) {
  const std::string dir = scratch_dir();
  const Corpus c = load_corpus(options(write_file(dir, "a.bin", llmc_shard({1, 2, 3, 4})),
                                       write_file(dir, "b.bin", llmc_shard({9, 1000, 5}))),
                               3);
  EXPECT_EQ(c.vocab_size, 1001);
  EXPECT_EQ(c.val, (std::vector<std::int32_t>{9, 1000, 5}));
}

// ---------------------------------------------------------------------------------------------
// Bad input: one UsageError naming the flag, the file and what is wrong.

struct BadCase {
  std::string name;
  std::function<DataOptions(const std::string& dir)> options;
  std::string flag;     // expected in the message
  std::string file;     // file name expected in the message ("" = none)
  std::string message;  // expected in the message
  std::int64_t min_window = 2;
};

TEST(LoadCorpus, BadInputIsAUsageErrorNamingFlagAndFile) {
  const std::string text = "hello world, some text";
  const std::vector<BadCase> cases = {
      {"missing data", [](const std::string& d) { return options(d + "/nope.txt"); }, "--data",
       "nope.txt", "no such file"},
      {"directory", [](const std::string& d) { return options(d); }, "--data", "", "directory"},
      {"empty", [](const std::string& d) { return options(write_file(d, "e.txt", "")); }, "--data",
       "e.txt", "empty"},
      // 'a' 'b' 'c' then C3 followed by '(' (not a continuation byte): offset 3.
      {"bad continuation",
       [](const std::string& d) { return options(write_file(d, "u.txt", "abc\xC3(defgh")); },
       "--data", "u.txt", "byte offset 3"},
      // C0 AF is an overlong '/': offset 2.
      {"overlong",
       [](const std::string& d) { return options(write_file(d, "o.txt", "ab\xC0\xAFxyz")); },
       "--data", "o.txt", "byte offset 2"},
      // ED A0 80 is the surrogate U+D800: offset 4.
      {"surrogate",
       [](const std::string& d) { return options(write_file(d, "s.txt", "abcd\xED\xA0\x80xy")); },
       "--data", "s.txt", "byte offset 4"},
      // F4 90 80 80 would be U+110000: offset 1.
      {"above max",
       [](const std::string& d) { return options(write_file(d, "m.txt", "a\xF4\x90\x80\x80xyz")); },
       "--data", "m.txt", "byte offset 1"},
      // A sequence cut off by the end of the file: E2 82 at offset 6.
      {"truncated sequence",
       [](const std::string& d) { return options(write_file(d, "t.txt", "abcdef\xE2\x82")); },
       "--data", "t.txt", "byte offset 6"},
      {"val not utf8",
       [&](const std::string& d) {
         return options(write_file(d, "ok.txt", text), write_file(d, "v.txt", "xy\xFFz"));
       },
       "--val-data", "v.txt", "byte offset 2"},
      {"missing val",
       [&](const std::string& d) { return options(write_file(d, "ok.txt", text), d + "/nv.txt"); },
       "--val-data", "nv.txt", "no such file"},
      {"bin version",
       [](const std::string& d) {
         return options(write_file(d, "v.bin", llmc_shard({1, 2, 3}, 2)));
       },
       "--data", "v.bin", "version 2"},
      {"bin size",
       [](const std::string& d) {
         return options(write_file(d, "z.bin", llmc_shard({1, 2, 3}, 1, 5)));
       },
       "--data", "z.bin", "1034"},  // header says 5 tokens: 1024 + 2 x 5 = 1034 bytes (file 1030)
      {"bin truncated header",
       [](const std::string& d) {
         return options(write_file(d, "h.bin", llmc_shard({}).substr(0, 100)));
       },
       "--data", "h.bin", "truncated"},
      {"missing tokenizer",
       [&](const std::string& d) {
         return options(write_file(d, "ok.txt", text), "", d + "/no.model");
       },
       "--tokenizer", "no.model", "no such file"},
      {"garbage tokenizer",
       [&](const std::string& d) {
         return options(write_file(d, "ok.txt", text), "",
                        write_file(d, "bad.model", "this is not a model"));
       },
       "--tokenizer", "bad.model", "SentencePiece"},
      {"shard with text val",
       [&](const std::string& d) {
         return options(write_file(d, "a.bin", llmc_shard({1, 2, 3, 4})),
                        write_file(d, "v.txt", text));
       },
       "--val-data", "v.txt", "same tokens"},
      {"val fraction zero",
       [&](const std::string& d) { return options(write_file(d, "ok.txt", text), "", "", 0); },
       "--val-fraction", "", "(0, 0.5]"},
      {"val fraction above half",
       [&](const std::string& d) { return options(write_file(d, "ok.txt", text), "", "", 0.6); },
       "--val-fraction", "", "(0, 0.5]"},
      {"val fraction nan",
       [&](const std::string& d) {
         return options(write_file(d, "ok.txt", text), "", "",
                        std::numeric_limits<double>::quiet_NaN());
       },
       "--val-fraction", "", "(0, 0.5]"},
      // 10 tokens, window 8: val = max(floor(0.05 x 10), 8) = 8, train 2 < 8.
      {"train too short",
       [](const std::string& d) { return options(write_file(d, "short.txt", "0123456789")); },
       "--data", "short.txt", "train part of 2", 8},
      {"val data too short",
       [&](const std::string& d) {
         return options(write_file(d, "ok.txt", text), write_file(d, "sv.txt", "abc"));
       },
       "--val-data", "sv.txt", "3 tokens", 8},
  };
  for (const BadCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    const std::string dir = scratch_dir();
    const DataOptions opts = bad.options(dir);
    try {
      load_corpus(opts, bad.min_window);
      ADD_FAILURE() << "no UsageError";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_THAT(what, HasSubstr(bad.flag));
      EXPECT_THAT(what, HasSubstr(bad.file));
      EXPECT_THAT(what, HasSubstr(bad.message));
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(LoadCorpus, RefusesFilesAboveTheSizeLimitBeforeReading) {
  const std::string dir = scratch_dir();
  const std::string path = write_file(dir, "huge.txt", "");
  std::error_code ec;
  fs::resize_file(path, static_cast<std::uintmax_t>(kMaxCorpusBytes) + 1, ec);  // sparse
  if (ec) GTEST_SKIP() << "cannot create a sparse file here: " << ec.message();
  EXPECT_THAT([&] { load_corpus(options(path), 2); },
              ThrowsMessage<UsageError>(
                  AllOf(HasSubstr("--data"), HasSubstr(path), HasSubstr("kMaxCorpusBytes"))));
  fs::remove(path);
}

// ---------------------------------------------------------------------------------------------
// SentencePiece, checked against the Debian `sentencepiece` binaries.

// Runs `command` with std::system; true when it exits with status 0.
bool run(const std::string& command) {
  return std::system(command.c_str()) == 0;
}

// All integers in the file, in order.
std::vector<std::int32_t> read_ints(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::int32_t> ints;
  for (std::int32_t v; in >> v;) ints.push_back(v);
  return ints;
}

std::size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(LoadCorpus, SentencePieceIdsMatchSpmEncode) {
  if (!fs::exists("/usr/bin/spm_train") || !fs::exists("/usr/bin/spm_encode"))
    GTEST_SKIP() << "Debian package sentencepiece not installed";
  const std::string dir = scratch_dir();
  const char* words[] = {"the",   "cat",   "sat",    "on",     "mat",   "and",    "a",
                         "dog",   "ran",   "to",     "it",     "over",  "hill",   "quick",
                         "brown", "fox",   "jumps",  "lazy",   "river", "stone",  "winter",
                         "light", "mount", "garden", "yellow", "paper", "kingdom"};
  constexpr int kWords = sizeof(words) / sizeof(words[0]);
  std::string train_text;
  for (int i = 0; i < 1500; ++i)
    train_text += std::string(words[(i * 7 + i / 11) % kWords]) + ((i % 9 == 8) ? "\n" : " ");
  const std::string train_path = write_file(dir, "spm.txt", train_text);
  const std::string prefix = dir + "/tiny";
  ASSERT_TRUE(run("/usr/bin/spm_train --input=" + train_path + " --model_prefix=" + prefix +
                  " --vocab_size=60 --model_type=bpe --minloglevel=2 > " + dir +
                  "/train.log 2>&1"));
  const std::string data_text =
      "the cat sat on the mat\na dog ran to it\n\nthe dog and the cat sat\nzebra quux on it\n";
  const std::string data = write_file(dir, "data.txt", data_text);
  ASSERT_TRUE(run("/usr/bin/spm_encode --model=" + prefix + ".model --output_format=id < " + data +
                  " > " + dir + "/ids.txt"));
  const std::vector<std::int32_t> expected = read_ints(dir + "/ids.txt");
  ASSERT_FALSE(expected.empty());

  const Corpus c = load_corpus(options(data, "", prefix + ".model", 0.2), 2);
  EXPECT_EQ(c.vocab_size, static_cast<std::int64_t>(count_lines(prefix + ".vocab")));
  EXPECT_EQ(c.vocab_size, 60);
  EXPECT_EQ(c.tokenizer, "sentencepiece");
  EXPECT_EQ(all_tokens(c), expected);
  for (const std::int32_t id : all_tokens(c)) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, c.vocab_size);
  }
  // A shard is already tokenized: a tokenizer with it is refused.
  const std::string shard = write_file(dir, "a.bin", llmc_shard({1, 2, 3, 4}));
  EXPECT_THAT([&] { load_corpus(options(shard, "", prefix + ".model"), 2); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("--tokenizer"), HasSubstr("tiny.model"),
                                              HasSubstr("a.bin"), HasSubstr("does not apply"))));
}

// ---------------------------------------------------------------------------------------------
// The default corpus.

TEST(LoadCorpus, DefaultCorpusIsTheConcatenatedFortunes) {
  if (!fs::is_directory(kDefaultCorpusDir)) GTEST_SKIP() << "Debian fortunes not installed";
  std::vector<fs::path> files;
  std::uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(kDefaultCorpusDir)) {
    const fs::file_status st = fs::symlink_status(e.path());
    const std::string name = e.path().filename().string();
    const bool data_file = name.ends_with(".dat") || name.ends_with(".u8");
    if (!fs::is_regular_file(st) || data_file) continue;
    files.push_back(e.path());
    bytes += fs::file_size(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  const Corpus c = load_corpus({}, 65);
  EXPECT_EQ(c.train.size() + c.val.size(), bytes);
  EXPECT_EQ(c.val.size(), static_cast<std::size_t>(std::floor(0.05 * static_cast<double>(bytes))));
  EXPECT_EQ(c.tokenizer, "bytes");
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_THAT(c.source, HasSubstr(std::to_string(files.size()) + " files"));
  // The stream starts with the first file by name.
  std::ifstream first(files.front(), std::ios::binary);
  std::string head(64, '\0');
  first.read(head.data(), 64);
  head.resize(static_cast<std::size_t>(first.gcount()));
  for (std::size_t i = 0; i < head.size(); ++i)
    EXPECT_EQ(c.train[i], static_cast<unsigned char>(head[i])) << i;
}

// ---------------------------------------------------------------------------------------------
// Unigram entropy.

TEST(UnigramEntropy, MatchesHandValues) {
  EXPECT_DOUBLE_EQ(unigram_entropy({}), 0.0);
  EXPECT_DOUBLE_EQ(unigram_entropy({5}), 0.0);
  EXPECT_DOUBLE_EQ(unigram_entropy({3, 3, 3}), 0.0);
  EXPECT_NEAR(unigram_entropy({0, 0, 1, 1}), std::log(2.0), 1e-15);
  EXPECT_NEAR(unigram_entropy({0, 1, 2, 3}), std::log(4.0), 1e-15);
  // p = (3/4, 1/4): -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.5623351446188083.
  EXPECT_NEAR(unigram_entropy({1, 1, 1, 2}), 0.5623351446188083, 1e-15);
  // A range too wide for a dense count table.
  EXPECT_NEAR(unigram_entropy({-2000000000, 2000000000}), std::log(2.0), 1e-15);
}

// ---------------------------------------------------------------------------------------------
// Sampler.

// 0, 1, ..., n-1: a window's first input is its start.
std::vector<std::int32_t> iota_stream(std::int32_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

TEST(Sampler, SameArgumentsGiveTheSameBatch) {
  const std::vector<std::int32_t> train = iota_stream(100000);
  const Sampler a(train, 16, 4, 3, 1234);
  const Batch first = a.batch(7, 1, 2);
  for (int s = 0; s < 20; ++s) a.batch(s, 0, 0);  // sampling something else in between
  const Sampler b(train, 16, 4, 3, 1234);
  const Batch again = b.batch(7, 1, 2);
  EXPECT_EQ(first.inputs, again.inputs);
  EXPECT_EQ(first.targets, again.targets);
  EXPECT_EQ(first.inputs, a.batch(7, 1, 2).inputs);
}

TEST(Sampler, DifferentArgumentsGiveDifferentWindows) {
  const std::vector<std::int32_t> train = iota_stream(100000);
  const Sampler s(train, 8, 4, 2, 99);
  const Batch base = s.batch(3, 0, 0);
  EXPECT_NE(base.inputs, s.batch(4, 0, 0).inputs);
  EXPECT_NE(base.inputs, s.batch(3, 1, 0).inputs);
  EXPECT_NE(base.inputs, s.batch(3, 0, 1).inputs);
  EXPECT_NE(base.inputs, Sampler(train, 8, 4, 2, 100).batch(3, 0, 0).inputs);
  // Rows of one batch differ too.
  std::set<std::int64_t> starts;
  for (int row = 0; row < 4; ++row) starts.insert(base.inputs[static_cast<std::size_t>(row * 8)]);
  EXPECT_EQ(starts.size(), 4u);
}

// A step's global batch is the same samples however it is split over DP ranks, accumulation
// and micro-batch: 8 samples as DP 2 x 1 x 4, DP 1 x 2 x 4, DP 4 x 1 x 2, DP 1 x 8 x 1 and
// DP 2 x 2 x 2, read in rank, then micro-batch, then row order, give the same window starts (the
// start is the first input of an iota stream).
TEST(Sampler, GlobalBatchDoesNotDependOnTheGrid) {
  const std::vector<std::int32_t> train = iota_stream(100000);
  const std::int64_t seq_len = 8;
  struct Split {
    int dp;
    std::int64_t accum, micro_batch;
  };
  std::vector<std::vector<std::int64_t>> seen;
  for (const Split split :
       {Split{2, 1, 4}, Split{1, 2, 4}, Split{4, 1, 2}, Split{1, 8, 1}, Split{2, 2, 2}}) {
    const Sampler s(train, seq_len, split.micro_batch, split.accum, 77);
    std::vector<std::int64_t> starts;
    for (std::int64_t step = 5; step <= 6; ++step)
      for (int d = 0; d < split.dp; ++d)
        for (int m = 0; m < split.accum; ++m) {
          const Batch b = s.batch(step, d, m);
          for (std::int64_t r = 0; r < split.micro_batch; ++r)
            starts.push_back(b.inputs[static_cast<std::size_t>(r * seq_len)]);
        }
    ASSERT_EQ(starts.size(), 16u);
    seen.push_back(starts);
  }
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen[0]) << "split " << i;
  // Sample g of a step is sample_start(step, g); the two steps draw different windows.
  const Sampler s(train, seq_len, 4, 1, 77);
  for (std::int64_t g = 0; g < 8; ++g) {
    EXPECT_EQ(seen[0][static_cast<std::size_t>(g)], s.sample_start(5, g));
    EXPECT_EQ(seen[0][static_cast<std::size_t>(8 + g)], s.sample_start(6, g));
  }
  EXPECT_NE(std::vector<std::int64_t>(seen[0].begin(), seen[0].begin() + 8),
            std::vector<std::int64_t>(seen[0].begin() + 8, seen[0].end()));
}

TEST(Sampler, TargetsAreInputsShiftedByOneInTheTrainStream) {
  // A stream whose tokens repeat, so the check reads the train vector, not token == index.
  std::vector<std::int32_t> train;
  for (int i = 0; i < 5000; ++i) train.push_back((i * 37 + i / 13) % 251);
  const std::vector<std::int32_t> index = iota_stream(5000);
  const std::int64_t seq_len = 12, rows = 3;
  const Sampler values(train, seq_len, rows, 1, 5);
  const Sampler positions(index, seq_len, rows, 1, 5);  // same seed and sizes: same starts
  for (std::int64_t step = 0; step < 50; ++step) {
    const Batch b = values.batch(step, 1, 0);
    const Batch p = positions.batch(step, 1, 0);
    ASSERT_EQ(b.micro_batch, rows);
    ASSERT_EQ(b.seq_len, seq_len);
    ASSERT_EQ(b.inputs.size(), static_cast<std::size_t>(rows * seq_len));
    ASSERT_EQ(b.targets.size(), static_cast<std::size_t>(rows * seq_len));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t start = p.inputs[static_cast<std::size_t>(r * seq_len)];
      ASSERT_GE(start, 0);
      ASSERT_LE(start, 5000 - seq_len - 1);
      for (std::int64_t i = 0; i < seq_len; ++i) {
        const auto k = static_cast<std::size_t>(r * seq_len + i);
        EXPECT_EQ(b.inputs[k], train[static_cast<std::size_t>(start + i)]);
        EXPECT_EQ(b.targets[k], train[static_cast<std::size_t>(start + i + 1)]);
      }
    }
  }
}

TEST(Sampler, EveryStartOfAShortStreamAppears) {
  // 10 tokens, seq_len 3: starts 0..6 (7 of them). 2000 draws, about 286 each.
  const std::vector<std::int32_t> train = iota_stream(10);
  const Sampler s(train, 3, 4, 2, 2024);
  std::map<std::int64_t, int> counts;
  for (std::int64_t step = 0; step < 250; ++step)
    for (int micro = 0; micro < 2; ++micro) {
      const Batch b = s.batch(step, 0, micro);
      for (int row = 0; row < 4; ++row) ++counts[b.inputs[static_cast<std::size_t>(row * 3)]];
    }
  ASSERT_EQ(counts.size(), 7u);
  EXPECT_EQ(counts.begin()->first, 0);
  EXPECT_EQ(counts.rbegin()->first, 6);
  for (const auto& [start, n] : counts) {
    EXPECT_GT(n, 143) << start;  // within a factor 2 of 2000 / 7
    EXPECT_LT(n, 572) << start;
  }
}

TEST(Sampler, OneWindowStreamAlwaysStartsAtZero) {
  const std::vector<std::int32_t> train = {4, 5, 6};
  const Sampler s(train, 2, 2, 2, 1);
  const Batch b = s.batch(11, 3, 1);
  EXPECT_EQ(b.inputs, (std::vector<std::int64_t>{4, 5, 4, 5}));
  EXPECT_EQ(b.targets, (std::vector<std::int64_t>{5, 6, 5, 6}));
}

TEST(Sampler, RejectsBadSizes) {
  const std::vector<std::int32_t> train = iota_stream(8);
  EXPECT_THROW(Sampler(train, 0, 1, 1, 0), UsageError);
  EXPECT_THROW(Sampler(train, 2, 0, 1, 0), UsageError);
  EXPECT_THROW(Sampler(train, 2, 1, 0, 0), UsageError);
  EXPECT_THROW(Sampler(train, 8, 1, 1, 0), UsageError);  // needs 9 tokens
  EXPECT_NO_THROW(Sampler(train, 7, 1, 1, 0));
}

// ---------------------------------------------------------------------------------------------
// Validation windows.

TEST(ValidationBatches, DealsRoundRobinAndGroupsMicroBatches) {
  // val = 0..19, seq_len 2: windows of 3 tokens start at 0, 3, 6, 9, 12, 15 (6 fit in 20).
  // windows = 5, dp = 2, micro_batch = 2: rank 0 gets w0, w2, w4 = starts 0, 6, 12 -> batches
  // {0, 6}, {12}; rank 1 gets w1, w3 = starts 3, 9 -> batch {3, 9}.
  const std::vector<std::int32_t> val = iota_stream(20);
  const std::vector<Batch> r0 = validation_batches(val, 2, 2, 5, 2, 0);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].micro_batch, 2);
  EXPECT_EQ(r0[0].seq_len, 2);
  EXPECT_EQ(r0[0].inputs, (std::vector<std::int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(r0[0].targets, (std::vector<std::int64_t>{1, 2, 7, 8}));
  EXPECT_EQ(r0[1].micro_batch, 1);
  EXPECT_EQ(r0[1].inputs, (std::vector<std::int64_t>{12, 13}));
  EXPECT_EQ(r0[1].targets, (std::vector<std::int64_t>{13, 14}));
  const std::vector<Batch> r1 = validation_batches(val, 2, 2, 5, 2, 1);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].inputs, (std::vector<std::int64_t>{3, 4, 9, 10}));
  EXPECT_EQ(r1[0].targets, (std::vector<std::int64_t>{4, 5, 10, 11}));
}

TEST(ValidationBatches, ShortValGivesFewerWindows) {
  // Asking for 100 windows of 3 in 20 tokens gives 6: rank 1 gets w1, w3, w5 = starts 3, 9, 15.
  const std::vector<std::int32_t> val = iota_stream(20);
  const std::vector<Batch> r1 = validation_batches(val, 2, 2, 100, 2, 1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_EQ(r1[0].inputs, (std::vector<std::int64_t>{3, 4, 9, 10}));
  EXPECT_EQ(r1[1].inputs, (std::vector<std::int64_t>{15, 16}));
  EXPECT_EQ(r1[1].targets, (std::vector<std::int64_t>{16, 17}));
  // dp = 8 over 6 windows: ranks 6 and 7 get nothing; dp = 1 gets all 6 in 3 batches.
  EXPECT_TRUE(validation_batches(val, 2, 2, 100, 8, 7).empty());
  EXPECT_EQ(validation_batches(val, 2, 2, 100, 1, 0).size(), 3u);
  EXPECT_TRUE(validation_batches(val, 2, 2, 0, 1, 0).empty());
}

TEST(ValidationBatches, RejectsBadRank) {
  const std::vector<std::int32_t> val = iota_stream(20);
  EXPECT_THROW(validation_batches(val, 2, 2, 5, 2, 2), UsageError);
  EXPECT_THROW(validation_batches(val, 2, 2, 5, 0, 0), UsageError);
  EXPECT_THROW(validation_batches(val, 0, 2, 5, 1, 0), UsageError);
}

}  // namespace
}  // namespace canzona::train
