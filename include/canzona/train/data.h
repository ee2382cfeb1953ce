// Training data for `canzona train`: where tokens come from, the held-out split and the
// deterministic batch sampler. No libtorch here: the trainer turns a Batch into tensors.
//
// Terms. A *corpus* is one token stream split into a *train* part and a held-out *val* part. A
// *window* is seq_len + 1 consecutive tokens: inputs are its first seq_len, targets its last
// seq_len (the next-token shift). A *micro-batch* is micro_batch windows; a step of one DP rank
// processes grad_accum micro-batches; a step of the job processes dp x grad_accum micro-batches.
//
// Sources (DataOptions::data / tokenizer):
//   * a UTF-8 text file with byte-level tokens (vocabulary 256, token = byte value);
//   * a UTF-8 text file encoded with a SentencePiece model (--tokenizer FILE.model; vocabulary =
//     the model's piece count);
//   * pre-tokenized uint16 shards in llm.c's .bin layout: a header of 256 little-endian int32
//     (header[0] = 20240520 magic, header[1] = version 1, header[2] = token count), then that many
//     little-endian uint16 tokens. Recognised by the magic, whatever the file name. Vocabulary =
//     the largest token + 1 (the shard cannot tell more).
//   * no --data: the default corpus, the plain-text files of Debian's `fortunes` package
//     (kDefaultCorpusDir; every regular file that is not *.dat or *.u8, sorted by name,
//     concatenated), byte-level tokens.
// The held-out split: with val_data given, that file (same tokenizer) is the val part and the
// whole data is train; otherwise the last val_fraction of the stream (rounded down to whole
// tokens, at least one window) is val and the rest train.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace canzona::train {

inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";
inline constexpr std::int32_t kLlmcMagic = 20240520;
// Largest file a corpus reads (bytes): bounded so a hostile path cannot make us allocate without
// limit; far above any CPU-training corpus.
inline constexpr std::int64_t kMaxCorpusBytes = std::int64_t{1} << 34;

struct DataOptions {
  std::string data;            // --data FILE; empty = the default corpus
  std::string val_data;        // --val-data FILE; empty = split off the end of data
  std::string tokenizer;       // --tokenizer FILE.model (SentencePiece); empty = bytes
  double val_fraction = 0.05;  // --val-fraction, in (0, 0.5]
};

struct Corpus {
  std::vector<std::int32_t> train;  // token ids in [0, vocab_size)
  std::vector<std::int32_t> val;
  std::int64_t vocab_size = 0;  // the tokenizer's vocabulary (see above)
  std::string source;           // what was read, for the progress header, e.g.
                                // "fortunes (41 files, 2568609 bytes), byte tokens"
  std::string tokenizer;        // "bytes" | "sentencepiece" | "llm.c"
};

// Reads and tokenizes the corpus. Throws UsageError (one line naming the flag and the file) when
// a file is missing, unreadable, empty, larger than kMaxCorpusBytes, not valid UTF-8 (naming the
// byte offset; text sources only), a .bin whose header is wrong or whose size does not match its
// token count, a tokenizer that does not load, the default corpus missing (naming the directory
// and the Debian package), val_fraction outside (0, 0.5], or when the train or val part holds
// fewer than `min_window` tokens (one window: seq_len + 1).
Corpus load_corpus(const DataOptions& options, std::int64_t min_window);

// Unigram entropy of `tokens` in nats: -sum_t p(t) log p(t) over the empirical distribution
// (0 for an empty or one-symbol stream). The loss a model that ignores context cannot beat.
double unigram_entropy(const std::vector<std::int32_t>& tokens);

// One micro-batch: micro_batch windows, row-major [micro_batch, seq_len].
struct Batch {
  std::int64_t micro_batch = 0, seq_len = 0;
  std::vector<std::int64_t> inputs;   // [micro_batch * seq_len]
  std::vector<std::int64_t> targets;  // [micro_batch * seq_len]
};

// Deterministic sampling by global sample index (Megatron's sampler counts consumed samples the
// same way). A step's global batch holds dp x grad_accum x micro_batch samples, numbered g = 0,
// 1, ...: DP rank d's micro-batch m holds samples (d x grad_accum + m) x micro_batch + row
// (Megatron deals them micro-batch-major, (m x dp + d) x micro_batch + row: the same samples per
// step, in another order). Sample g of step
// s starts at a window start drawn from a counter-based generator of (seed, s, g), uniform over
// the train part's window starts [0, train.size() - seq_len - 1]. So the same arguments give the
// same batch on every rank, in every run and process, whatever else was sampled before; and the
// same global batch split as another DP x accumulation x micro-batch sees the same samples in each
// step (a resume under another grid differs only in the order of sums).
class Sampler {
 public:
  // Needs train.size() >= seq_len + 1 and positive sizes (checked, UsageError).
  Sampler(const std::vector<std::int32_t>& train, std::int64_t seq_len, std::int64_t micro_batch,
          std::int64_t grad_accum, std::uint64_t seed);
  // Micro-batch `micro` (< grad_accum) of DP rank `dp_rank`.
  Batch batch(std::int64_t step, int dp_rank, int micro) const;
  // The window start of global sample `sample` of `step`.
  std::int64_t sample_start(std::int64_t step, std::int64_t sample) const;

 private:
  const std::vector<std::int32_t>& train_;
  std::int64_t seq_len_, micro_batch_, grad_accum_;
  std::uint64_t seed_;
};

// The validation set: the first `windows` non-overlapping windows of `val` (fewer when val is
// shorter), dealt to DP ranks round-robin (window w to rank w % dp) and grouped into micro-batches
// of at most micro_batch rows, in window order. Returns this rank's micro-batches.
std::vector<Batch> validation_batches(const std::vector<std::int32_t>& val, std::int64_t seq_len,
                                      std::int64_t micro_batch, std::int64_t windows, int dp,
                                      int dp_rank);

}  // namespace canzona::train
