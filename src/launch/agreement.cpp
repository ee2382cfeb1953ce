// Settings agreement before the first collective (agreement.h).
#include "canzona/launch/agreement.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/common/hex.h"
#include "canzona/launch/plan_check.h"

namespace canzona::launch {
namespace {

void mix(std::uint64_t& h, std::int64_t v) {
  fnv1a_mix(h, &v, sizeof(v));
}

void mix(std::uint64_t& h, const std::string& s) {
  mix(h, static_cast<std::int64_t>(s.size()));
  fnv1a_mix(h, s.data(), s.size());
}

std::uint64_t hash_text(const std::string& s) {
  std::uint64_t h = kFnvOffset;
  mix(h, s);
  return h;
}

std::string line(const Setting& s) {
  return s.key + "=" + s.value;
}

// Every rank's copy of the first kMaxShownValueBytes of `value`, in 8-byte words.
std::vector<std::string> all_gather_shown(comm::Communicator& world, const std::string& value) {
  constexpr std::size_t kWords = kMaxShownValueBytes / 8;
  const std::string shown = value.substr(0, kMaxShownValueBytes);
  std::vector<std::string> all(static_cast<std::size_t>(world.size()));
  for (std::size_t w = 0; w < kWords; ++w) {
    std::uint64_t word = 0;
    if (w * 8 < shown.size())
      std::memcpy(&word, shown.data() + w * 8, std::min<std::size_t>(8, shown.size() - w * 8));
    const std::vector<std::uint64_t> words = world.all_gather_u64(word);
    for (std::size_t q = 0; q < all.size(); ++q) {
      char bytes[8];
      std::memcpy(bytes, &words[q], 8);
      all[q].append(bytes, strnlen(bytes, 8));
    }
  }
  for (std::size_t q = 0; q < all.size(); ++q) {
    std::replace_if(
        all[q].begin(), all[q].end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; },
        '?');
  }
  return all;
}

// The lowest rank whose value differs from rank 0's, or 0 when all agree.
std::size_t first_differing(const std::vector<std::uint64_t>& values) {
  for (std::size_t q = 1; q < values.size(); ++q)
    if (values[q] != values[0]) return q;
  return 0;
}

std::string shown(const std::string& value, std::size_t full_size) {
  if (value.empty()) return "''";
  return full_size > kMaxShownValueBytes ? value + "..." : value;
}

}  // namespace

std::uint64_t model_hash(const model::ModelSpec& model) {
  std::uint64_t h = kFnvOffset;
  mix(h, model.name);
  const model::ArchInfo& a = model.arch;
  for (std::int64_t v :
       {std::int64_t{a.num_layers}, std::int64_t{a.num_heads}, std::int64_t{a.num_query_groups},
        std::int64_t{a.head_dim}, a.vocab_size, a.padded_vocab_size})
    mix(h, v);
  mix(h, static_cast<std::int64_t>(model.params.size()));
  for (const model::ParamSpec& p : model.params) {
    mix(h, p.name);
    mix(h, static_cast<std::int64_t>(p.shape.size()));
    for (std::int64_t d : p.shape) mix(h, d);
    mix(h, std::int64_t{p.tp_split_dim});
    mix(h, static_cast<std::int64_t>(p.optimizer));
    mix(h, std::int64_t{p.layer});
    mix(h, std::int64_t{p.stage});
    mix(h, static_cast<std::int64_t>(p.pieces.size()));
    for (const model::Piece& piece : p.pieces) {
      mix(h, piece.name);
      mix(h, static_cast<std::int64_t>(piece.row_ranges.size()));
      for (const auto& [begin, end] : piece.row_ranges) {
        mix(h, begin);
        mix(h, end);
      }
    }
  }
  return h;
}

std::string setting_value(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

std::string settings_text(const Settings& settings) {
  std::string text;
  for (const Setting& s : settings) text += line(s) + "\n";
  return text;
}

int agree_on_launch_error(comm::Communicator& world, const std::string& error) {
  const std::vector<std::uint64_t> failed = world.all_gather_u64(error.empty() ? 0 : 1);
  const auto first = std::find(failed.begin(), failed.end(), 1u);
  if (first == failed.end()) return 0;
  if (first - failed.begin() == world.rank()) {
    std::fprintf(stderr, "canzona: error: %s\n", error.c_str());
    std::fflush(stderr);
  }
  return 2;
}

void check_agreement(comm::Communicator& world, const Settings& settings) {
  const std::vector<std::uint64_t> totals =
      world.all_gather_u64(hash_text(settings_text(settings)));
  if (first_differing(totals) == 0) return;
  // Settings are compared one by one over the prefix every rank has (the count can differ: each
  // optimizer has its own option keys), so the first differing one is named even then.
  const std::vector<std::uint64_t> counts = world.all_gather_u64(settings.size());
  const std::size_t common = *std::min_element(counts.begin(), counts.end());
  for (std::size_t i = 0; i < common; ++i) {
    const Setting& s = settings[i];
    const std::vector<std::uint64_t> hashes = world.all_gather_u64(hash_text(line(s)));
    const std::size_t q = first_differing(hashes);
    if (q == 0) continue;
    const std::vector<std::uint64_t> keys = world.all_gather_u64(hash_text(s.key));
    if (const std::size_t k = first_differing(keys); k != 0) {
      const std::vector<std::uint64_t> sizes = world.all_gather_u64(s.key.size());
      const std::vector<std::string> names = all_gather_shown(world, s.key);
      throw PlanAgreementError(str("ranks disagree on the settings: setting ", i, " is ",
                                   shown(names[k], sizes[k]), " on rank ", k, ", ",
                                   shown(names[0], sizes[0]),
                                   " on rank 0 (run the same canzona binary on every rank)"));
    }
    const std::vector<std::uint64_t> sizes = world.all_gather_u64(s.value.size());
    const std::vector<std::string> values = all_gather_shown(world, s.value);
    throw PlanAgreementError(str("ranks disagree on ", s.key, ": rank ", q, " has ",
                                 shown(values[q], sizes[q]), ", rank 0 has ",
                                 shown(values[0], sizes[0]),
                                 " (every rank must run with the same flags and model)"));
  }
  if (const std::size_t q = first_differing(counts); q != 0)
    throw PlanAgreementError(str("ranks disagree on the set of settings: rank ", q, " has ",
                                 counts[q], ", rank 0 has ", counts[0],
                                 " (run the same canzona binary on every rank)"));
  throw PlanAgreementError(
      "ranks disagree on the configuration, but on no single setting (hash collision?)");
}

}  // namespace canzona::launch
