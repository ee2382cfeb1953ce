// Training data (data.h): corpus sources, the held-out split, unigram entropy, the deterministic
// sampler and the validation windows.
//
// Terms as in data.h. A *source* is one file (or the default corpus directory) turned into a token
// stream; `flag` is the command-line flag that named it (--data, --val-data), used in every error
// message together with the path. Text sources are validated as strict UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF; NUL is valid UTF-8 and allowed). A
// SentencePiece source is encoded line by line (split on '\n', as `spm_encode` does), so its ids
// equal the concatenation of `spm_encode --output_format=id` over the file's lines.
#include "canzona/train/data.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "canzona/common/error.h"
#include "canzona/common/splitmix.h"

namespace canzona::train {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kLlmcHeaderInts = 256;
constexpr std::int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
constexpr std::int32_t kLlmcVersion = 1;

// Reads the regular file `path` whole. Throws UsageError "<flag> <path>: ..." when it is missing,
// a directory or other non-regular file, empty, larger than kMaxCorpusBytes, unreadable, or
// changed while it was read (size, modification time or inode differ between an fstat before and
// after the read: a file still being written or replaced would train on a torn copy).
std::string read_file(const char* flag, const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  CANZONA_REQUIRE(fs::exists(status), flag, " ", path, ": no such file");
  CANZONA_REQUIRE(!fs::is_directory(status), flag, " ", path, ": is a directory, not a file");
  CANZONA_REQUIRE(fs::is_regular_file(status), flag, " ", path, ": is not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CANZONA_REQUIRE(fd >= 0, flag, " ", path, ": cannot be opened for reading (",
                  std::strerror(errno), ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat before {};
  CANZONA_REQUIRE(::fstat(fd, &before) == 0 && S_ISREG(before.st_mode), flag, " ", path,
                  ": is not a regular file");
  const std::int64_t size = before.st_size;
  CANZONA_REQUIRE(size > 0, flag, " ", path, ": is empty");
  CANZONA_REQUIRE(size <= kMaxCorpusBytes, flag, " ", path, ": ", size,
                  " bytes exceed the limit of ", kMaxCorpusBytes, " (kMaxCorpusBytes)");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes.data() + done, static_cast<std::size_t>(size - done), done);
    if (n < 0 && errno == EINTR) continue;
    CANZONA_REQUIRE(n >= 0, flag, " ", path, ": read failed: ", std::strerror(errno));
    CANZONA_REQUIRE(n > 0, flag, " ", path, ": changed while it was read (", size,
                    " bytes when opened, ended after ", done, ")");
    done += n;
  }
  char probe = 0;
  const bool grew = ::pread(fd, &probe, 1, size) > 0;
  struct stat after {};
  CANZONA_REQUIRE(::fstat(fd, &after) == 0, flag, " ", path, ": cannot stat after reading");
  struct stat now {};
  const bool replaced =
      ::stat(path.c_str(), &now) != 0 || now.st_ino != before.st_ino || now.st_dev != before.st_dev;
  const bool modified = after.st_size != before.st_size || grew ||
                        after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
                        after.st_mtim.tv_nsec != before.st_mtim.tv_nsec;
  CANZONA_REQUIRE(!modified && !replaced, flag, " ", path, ": changed while it was read (",
                  replaced ? "replaced by another file" : "modified", ", ", before.st_size,
                  " bytes when opened, ", replaced ? now.st_size : after.st_size,
                  " now); train on it once it is complete");
  return bytes;
}

// Length of the UTF-8 sequence starting at text[i], or 0 when it is not a valid one (RFC 3629).
std::size_t utf8_sequence_length(const std::string& text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// Throws UsageError naming the byte offset of the first invalid UTF-8 sequence in `text`.
void require_utf8(const char* flag, const std::string& path, const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text, i);
    CANZONA_REQUIRE(n > 0, flag, " ", path, ": not valid UTF-8 at byte offset ", i);
    i += n;
  }
}

// Little-endian int32 at byte `offset` of `bytes` (needs offset + 4 <= size).
std::int32_t read_le_i32(const std::string& bytes, std::size_t offset) {
  std::uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[offset + k]);
  return static_cast<std::int32_t>(v);
}

// True when `bytes` starts with llm.c's shard magic.
bool is_llmc_shard(const std::string& bytes) {
  return bytes.size() >= 4 && read_le_i32(bytes, 0) == kLlmcMagic;
}

// Decodes an llm.c uint16 shard (data.h). Throws UsageError on a truncated header, a wrong
// version, a token count that is negative or zero, or a size that does not match the count.
std::vector<std::int32_t> parse_llmc_shard(const char* flag, const std::string& path,
                                           const std::string& bytes) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  CANZONA_REQUIRE(size >= kLlmcHeaderBytes, flag, " ", path, ": llm.c shard header truncated (",
                  size, " bytes, the header needs ", kLlmcHeaderBytes, ")");
  const std::int32_t version = read_le_i32(bytes, 4);
  CANZONA_REQUIRE(version == kLlmcVersion, flag, " ", path, ": llm.c shard version ", version,
                  " at byte offset 4 is not supported (expected ", kLlmcVersion, ")");
  const std::int64_t count = read_le_i32(bytes, 8);
  CANZONA_REQUIRE(count > 0, flag, " ", path, ": llm.c shard header token count ", count,
                  " at byte offset 8 must be positive");
  const std::int64_t expected = kLlmcHeaderBytes + 2 * count;
  CANZONA_REQUIRE(size == expected, flag, " ", path, ": size ", size,
                  " bytes does not match the header token count ", count, " (expected ",
                  kLlmcHeaderBytes, " + 2 x ", count, " = ", expected, " bytes)");
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::size_t at = static_cast<std::size_t>(kLlmcHeaderBytes) + 2 * t;
    tokens[t] =
        static_cast<unsigned char>(bytes[at]) | (static_cast<unsigned char>(bytes[at + 1]) << 8);
  }
  return tokens;
}

// The SentencePiece module (spm_module.cpp), loaded on first use.
struct SpmModule {
  using Load = void* (*)(const char*, std::size_t, char*, std::size_t);
  using Pieces = std::int64_t (*)(void*);
  using Encode = int (*)(void*, const char*, std::size_t, std::int32_t**, std::size_t*, char*,
                         std::size_t);
  using FreeIds = void (*)(std::int32_t*);
  using Release = void (*)(void*);
  Load load = nullptr;
  Pieces pieces = nullptr;
  Encode encode = nullptr;
  FreeIds free_ids = nullptr;
  Release release = nullptr;

  static const SpmModule& get() {
    static const SpmModule module = open();
    return module;
  }

 private:
  static SpmModule open() {
    int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(__SANITIZE_ADDRESS__)
    flags |= RTLD_DEEPBIND;  // see spm_module.cpp; AddressSanitizer refuses RTLD_DEEPBIND
#endif
    void* handle = dlopen(CANZONA_SPM_MODULE, flags);
    if (handle == nullptr)
      throw Error(str("--tokenizer: cannot load the SentencePiece module ", CANZONA_SPM_MODULE,
                      ": ", dlerror()));
    SpmModule m;
    m.load = reinterpret_cast<Load>(dlsym(handle, "canzona_spm_load"));
    m.pieces = reinterpret_cast<Pieces>(dlsym(handle, "canzona_spm_pieces"));
    m.encode = reinterpret_cast<Encode>(dlsym(handle, "canzona_spm_encode"));
    m.free_ids = reinterpret_cast<FreeIds>(dlsym(handle, "canzona_spm_free_ids"));
    m.release = reinterpret_cast<Release>(dlsym(handle, "canzona_spm_release"));
    CANZONA_CHECK(m.load && m.pieces && m.encode && m.free_ids && m.release,
                  "SentencePiece module ", CANZONA_SPM_MODULE, " lacks a symbol");
    return m;
  }
};

// Turns text into token ids: bytes (no model) or a SentencePiece model.
class TextTokenizer {
 public:
  // Loads the SentencePiece model at `path` (--tokenizer), or byte tokens when `path` is empty.
  explicit TextTokenizer(const std::string& path) {
    if (path.empty()) return;
    const std::string model = read_file("--tokenizer", path);
    const SpmModule& spm = SpmModule::get();
    char error[512] = "";
    sp_ = spm.load(model.data(), model.size(), error, sizeof error);
    std::string why = error;
    why.erase(why.find_last_not_of(" \n") + 1);
    CANZONA_REQUIRE(sp_ != nullptr, "--tokenizer ", path, ": not a loadable SentencePiece model (",
                    why, ")");
    pieces_ = spm.pieces(sp_);
    CANZONA_REQUIRE(pieces_ > 0, "--tokenizer ", path, ": model has no pieces");
  }
  ~TextTokenizer() {
    if (sp_ != nullptr) SpmModule::get().release(sp_);
  }
  TextTokenizer(const TextTokenizer&) = delete;
  TextTokenizer& operator=(const TextTokenizer&) = delete;

  bool bytes() const { return sp_ == nullptr; }
  std::int64_t vocab_size() const { return bytes() ? 256 : pieces_; }

  // Appends the ids of `text` to `out`; SentencePiece encodes each '\n'-separated line.
  void encode(const std::string& text, std::vector<std::int32_t>& out) const {
    if (bytes()) {
      for (const char c : text) out.push_back(static_cast<unsigned char>(c));
      return;
    }
    const SpmModule& spm = SpmModule::get();
    std::int32_t* ids = nullptr;
    std::size_t count = 0;
    char error[512] = "";
    if (spm.encode(sp_, text.data(), text.size(), &ids, &count, error, sizeof error) != 0)
      throw Error(str("SentencePiece encode failed: ", error));
    out.insert(out.end(), ids, ids + count);
    spm.free_ids(ids);
  }

 private:
  void* sp_ = nullptr;
  std::int64_t pieces_ = 0;
};

// One source turned into tokens, with its human-readable description.
struct Source {
  std::vector<std::int32_t> tokens;
  std::string description;
  bool llmc = false;
};

// The file `path` named by `flag`: an llm.c shard (by its magic) or UTF-8 text.
Source load_file(const char* flag, const std::string& path, const TextTokenizer& tokenizer) {
  const std::string bytes = read_file(flag, path);
  Source s;
  if (is_llmc_shard(bytes)) {
    s.llmc = true;
    s.tokens = parse_llmc_shard(flag, path, bytes);
    s.description = str(path, " (", s.tokens.size(), " tokens)");
    return s;
  }
  require_utf8(flag, path, bytes);
  tokenizer.encode(bytes, s.tokens);
  s.description = str(path, " (", bytes.size(), " bytes)");
  return s;
}

// The plain-text files of kDefaultCorpusDir: regular files (not symlinks), not *.dat or *.u8,
// sorted by name. Throws UsageError naming the directory and the Debian package when none exist.
std::vector<fs::path> default_corpus_files() {
  const std::string missing = str("--data not given and the default corpus ", kDefaultCorpusDir,
                                  " is missing; install the Debian package `fortunes` or pass "
                                  "--data FILE");
  std::error_code ec;
  CANZONA_REQUIRE(fs::is_directory(kDefaultCorpusDir, ec), missing);
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(kDefaultCorpusDir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_symlink() || !e.is_regular_file() || ext == ".dat" || ext == ".u8") continue;
    files.push_back(e.path());
  }
  CANZONA_REQUIRE(!ec && !files.empty(), missing);
  std::sort(files.begin(), files.end());
  return files;
}

// The default corpus: its files' text concatenated, then tokenized.
Source load_default_corpus(const TextTokenizer& tokenizer) {
  const std::vector<fs::path> files = default_corpus_files();
  std::string text;
  for (const fs::path& file : files) {
    const std::string bytes = read_file("--data (default corpus)", file.string());
    require_utf8("--data (default corpus)", file.string(), bytes);
    CANZONA_REQUIRE(static_cast<std::int64_t>(text.size() + bytes.size()) <= kMaxCorpusBytes,
                    "--data (default corpus) ", kDefaultCorpusDir, ": more than ", kMaxCorpusBytes,
                    " bytes (kMaxCorpusBytes)");
    text += bytes;
  }
  Source s;
  tokenizer.encode(text, s.tokens);
  s.description = str("fortunes (", files.size(), " files, ", text.size(), " bytes)");
  return s;
}

// Tokens of the val part: round_down(val_fraction x total), at least `min_window`. The product is
// nudged up by a 1e-12 relative tolerance so that e.g. 0.29 x 100 gives 29, not 28.
std::int64_t val_split_size(double val_fraction, std::int64_t total, std::int64_t min_window) {
  const double exact = val_fraction * static_cast<double>(total);
  const auto rounded = static_cast<std::int64_t>(std::floor(exact * (1.0 + 1e-12)));
  return std::max(rounded, min_window);
}

// Largest token + 1 over both parts (the llm.c vocabulary).
std::int64_t max_token_plus_one(const Corpus& c) {
  std::int32_t max_token = 0;
  for (const std::int32_t t : c.train) max_token = std::max(max_token, t);
  for (const std::int32_t t : c.val) max_token = std::max(max_token, t);
  return std::int64_t{max_token} + 1;
}

// Uniform integer in [0, n) (n > 0) from the counter stream splitmix64(key + k), k = 0, 1, ...:
// Lemire's multiply-shift with rejection (2019), exactly unbiased.
std::uint64_t uniform_below(std::uint64_t key, std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  for (std::uint64_t k = 0;; ++k) {
    const unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(key + k)) * n;
    if (static_cast<std::uint64_t>(m) >= threshold) return static_cast<std::uint64_t>(m >> 64);
  }
}

// Batch [rows, seq_len] of the windows starting at `starts` in `tokens`.
Batch make_batch(const std::vector<std::int32_t>& tokens, const std::vector<std::int64_t>& starts,
                 std::int64_t seq_len) {
  Batch b;
  b.micro_batch = static_cast<std::int64_t>(starts.size());
  b.seq_len = seq_len;
  b.inputs.reserve(static_cast<std::size_t>(b.micro_batch * seq_len));
  b.targets.reserve(static_cast<std::size_t>(b.micro_batch * seq_len));
  for (const std::int64_t start : starts) {
    for (std::int64_t i = 0; i < seq_len; ++i) {
      b.inputs.push_back(tokens[static_cast<std::size_t>(start + i)]);
      b.targets.push_back(tokens[static_cast<std::size_t>(start + i + 1)]);
    }
  }
  return b;
}

}  // namespace

Corpus load_corpus(const DataOptions& options, std::int64_t min_window) {
  CANZONA_REQUIRE(options.val_fraction > 0.0 && options.val_fraction <= 0.5,
                  "--val-fraction must be in (0, 0.5] (got ", options.val_fraction, ")");
  CANZONA_REQUIRE(min_window >= 2, "a window needs at least 2 tokens (seq_len + 1), got ",
                  min_window);
  const TextTokenizer tokenizer(options.tokenizer);
  Source data = options.data.empty() ? load_default_corpus(tokenizer)
                                     : load_file("--data", options.data, tokenizer);
  CANZONA_REQUIRE(!(data.llmc && !tokenizer.bytes()), "--tokenizer ", options.tokenizer,
                  ": does not apply to --data ", options.data,
                  ", an llm.c shard that is already tokenized");
  const char* data_flag = options.data.empty() ? "--data (default corpus)" : "--data";
  const std::string data_name = options.data.empty() ? kDefaultCorpusDir : options.data;

  Corpus c;
  c.tokenizer = data.llmc ? "llm.c" : tokenizer.bytes() ? "bytes" : "sentencepiece";
  c.source = data.description;
  if (options.val_data.empty()) {
    const auto total = static_cast<std::int64_t>(data.tokens.size());
    const std::int64_t val = val_split_size(options.val_fraction, total, min_window);
    CANZONA_REQUIRE(total - val >= min_window, data_flag, " ", data_name, ": ", total,
                    " tokens leave a train part of ", std::max<std::int64_t>(total - val, 0),
                    " after the val part of ", val, " (--val-fraction ", options.val_fraction,
                    "), fewer than one window of ", min_window, " tokens (seq_len + 1)");
    c.val.assign(data.tokens.end() - val, data.tokens.end());
    data.tokens.resize(static_cast<std::size_t>(total - val));
    c.train = std::move(data.tokens);
    c.source += str(", last ", val, " tokens held out");
  } else {
    Source val = load_file("--val-data", options.val_data, tokenizer);
    CANZONA_REQUIRE(val.llmc == data.llmc, "--val-data ", options.val_data, ": is ",
                    val.llmc ? "an llm.c shard" : "text", " but --data ", data_name, " is ",
                    data.llmc ? "an llm.c shard" : "text", "; both must use the same tokens");
    CANZONA_REQUIRE(static_cast<std::int64_t>(data.tokens.size()) >= min_window, data_flag, " ",
                    data_name, ": ", data.tokens.size(), " tokens, fewer than one window of ",
                    min_window, " (seq_len + 1)");
    CANZONA_REQUIRE(static_cast<std::int64_t>(val.tokens.size()) >= min_window, "--val-data ",
                    options.val_data, ": ", val.tokens.size(), " tokens, fewer than one window of ",
                    min_window, " (seq_len + 1)");
    c.train = std::move(data.tokens);
    c.val = std::move(val.tokens);
    c.source += str(", val ", val.description);
  }
  c.vocab_size = data.llmc ? max_token_plus_one(c) : tokenizer.vocab_size();
  c.source += data.llmc ? ", llm.c uint16 tokens"
              : tokenizer.bytes()
                  ? ", byte tokens"
                  : str(", sentencepiece ", options.tokenizer, " (", c.vocab_size, " pieces)");
  return c;
}

double unigram_entropy(const std::vector<std::int32_t>& tokens) {
  if (tokens.empty()) return 0.0;
  const auto [lo, hi] = std::minmax_element(tokens.begin(), tokens.end());
  std::vector<std::int64_t> counts;
  const std::int64_t range = std::int64_t{*hi} - *lo + 1;
  if (range <= (std::int64_t{1} << 24)) {
    counts.assign(static_cast<std::size_t>(range), 0);
    for (const std::int32_t t : tokens) ++counts[static_cast<std::size_t>(t - *lo)];
  } else {
    std::map<std::int32_t, std::int64_t> sparse;
    for (const std::int32_t t : tokens) ++sparse[t];
    for (const auto& [token, count] : sparse) counts.push_back(count);
  }
  // H = -sum (c/n) log(c/n) = log n - (1/n) sum c log c.
  const auto n = static_cast<double>(tokens.size());
  double sum_c_log_c = 0.0;
  for (const std::int64_t count : counts)
    if (count > 0) sum_c_log_c += static_cast<double>(count) * std::log(static_cast<double>(count));
  return std::max(0.0, std::log(n) - sum_c_log_c / n);
}

Sampler::Sampler(const std::vector<std::int32_t>& train, std::int64_t seq_len,
                 std::int64_t micro_batch, std::int64_t grad_accum, std::uint64_t seed)
    : train_(train),
      seq_len_(seq_len),
      micro_batch_(micro_batch),
      grad_accum_(grad_accum),
      seed_(seed) {
  CANZONA_REQUIRE(seq_len >= 1, "sampler: seq_len must be positive (got ", seq_len, ")");
  CANZONA_REQUIRE(micro_batch >= 1, "sampler: micro_batch must be positive (got ", micro_batch,
                  ")");
  CANZONA_REQUIRE(grad_accum >= 1, "sampler: grad_accum must be positive (got ", grad_accum, ")");
  CANZONA_REQUIRE(static_cast<std::int64_t>(train.size()) >= seq_len + 1, "sampler: train part of ",
                  train.size(), " tokens is shorter than one window of seq_len + 1 = ", seq_len + 1,
                  " tokens");
}

std::int64_t Sampler::sample_start(std::int64_t step, std::int64_t sample) const {
  CANZONA_CHECK(step >= 0 && sample >= 0, "step ", step, " sample ", sample);
  const auto n_starts = static_cast<std::uint64_t>(train_.size()) -
                        static_cast<std::uint64_t>(seq_len_);  // starts [0, size - seq_len - 1]
  std::uint64_t key = splitmix64(seed_);
  key = splitmix64(key ^ static_cast<std::uint64_t>(step));
  key = splitmix64(key ^ static_cast<std::uint64_t>(sample));
  return static_cast<std::int64_t>(uniform_below(key, n_starts));
}

Batch Sampler::batch(std::int64_t step, int dp_rank, int micro) const {
  CANZONA_CHECK(step >= 0 && dp_rank >= 0 && micro >= 0 && micro < grad_accum_, "step ", step,
                " dp_rank ", dp_rank, " micro ", micro, " of ", grad_accum_);
  const std::int64_t first = (dp_rank * grad_accum_ + micro) * micro_batch_;
  std::vector<std::int64_t> starts(static_cast<std::size_t>(micro_batch_));
  for (std::size_t row = 0; row < starts.size(); ++row)
    starts[row] = sample_start(step, first + static_cast<std::int64_t>(row));
  return make_batch(train_, starts, seq_len_);
}

std::vector<Batch> validation_batches(const std::vector<std::int32_t>& val, std::int64_t seq_len,
                                      std::int64_t micro_batch, std::int64_t windows, int dp,
                                      int dp_rank) {
  CANZONA_REQUIRE(seq_len >= 1, "validation: seq_len must be positive (got ", seq_len, ")");
  CANZONA_REQUIRE(micro_batch >= 1, "validation: micro_batch must be positive (got ", micro_batch,
                  ")");
  CANZONA_REQUIRE(windows >= 0, "validation: windows must be >= 0 (got ", windows, ")");
  CANZONA_REQUIRE(dp >= 1 && dp_rank >= 0 && dp_rank < dp, "validation: dp_rank ", dp_rank,
                  " must be in [0, dp = ", dp, ")");
  const std::int64_t window = seq_len + 1;
  const std::int64_t n = std::min(windows, static_cast<std::int64_t>(val.size()) / window);
  std::vector<Batch> batches;
  std::vector<std::int64_t> starts;
  for (std::int64_t w = dp_rank; w < n; w += dp) {
    starts.push_back(w * window);
    if (static_cast<std::int64_t>(starts.size()) == micro_batch) {
      batches.push_back(make_batch(val, starts, seq_len));
      starts.clear();
    }
  }
  if (!starts.empty()) batches.push_back(make_batch(val, starts, seq_len));
  return batches;
}

}  // namespace canzona::train
