// Shared helpers of the fuzz targets in fuzz/ (hostile input). Each target defines
// LLVMFuzzerTestOneInput; it is linked either with libFuzzer (clang, -DCANZONA_FUZZ=ON, `make
// fuzz`) or with replay_main.cpp, which runs every file of the seed corpus fuzz/corpus/<target>/
// and the saved findings fuzz/crashes/<target>/ once (the ctest entries fuzz_replay_<target>, in
// every build, sanitizer build included).
//
// Contract of a target: for any input bytes the code under test either succeeds or throws
// canzona::UsageError (the "canzona: error: ..." exit 2 path). Anything else is a finding: another
// exception (an internal CANZONA_CHECK failure, std::bad_alloc, std::length_error ...), a crash, a
// sanitizer report, an invariant violation, a hang (libFuzzer -timeout) or excessive memory
// (-rss_limit_mb). Findings print "canzona-fuzz: FINDING: <what>" and abort().
//
// Layout: fuzz/<target>.cpp (model_json, cluster, calibration, planner), fuzz/corpus/<target>/
// (seed inputs, from tests/*/data where the target reads files), fuzz/dict/<target>.dict
// (libFuzzer dictionaries: the keys each reader knows), fuzz/crashes/<target>/ (saved findings,
// each one a regression test). Running: `make fuzz [FUZZ_SECONDS=60]` (Makefile: per-target time,
// -max_len, -rss_limit_mb, -timeout); one target by hand:
//   build-fuzz/fuzz/canzona_fuzz_planner DIR -max_total_time=60 -max_len=4096
// Reproducing a finding: build-fuzz/fuzz/canzona_fuzz_<target> FILE (or the replay binary of any
// build: canzona_fuzz_replay_<target> FILE).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "canzona/common/error.h"

namespace canzona::fuzz {

// Prints the finding and aborts (libFuzzer saves the input as crash-<sha1>).
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "canzona-fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `body`; UsageError is an accepted outcome, any other exception a finding.
template <typename Body>
void expect_success_or_usage_error(const char* what, Body&& body) {
  try {
    body();
  } catch (const canzona::UsageError&) {
    // accepted: the CLI prints it on one line and exits 2
  } catch (const std::exception& e) {
    finding(std::string(what) + " threw a non-usage exception: " + e.what());
  } catch (...) {
    finding(std::string(what) + " threw a non-std exception");
  }
}

// Writes the bytes to a per-process scratch file in $TMPDIR (or /tmp) named
// canzona-fuzz-<pid>-<tag>.json, overwritten on every call, and returns its path: the readers
// under test take paths, as the CLI does.
inline std::string scratch_file(const char* tag, const std::uint8_t* data, std::size_t size) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/canzona-fuzz-" +
                           std::to_string(::getpid()) + "-" + tag + ".json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) finding("cannot write scratch file " + path);
  return path;
}

// Consumes the input front to back as small integers (zero once exhausted); a portable stand-in
// for clang's FuzzedDataProvider so that the targets also build with gcc for replay.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Uniform-ish integer in [lo, hi] from one or two bytes.
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
    std::uint64_t v = byte();
    if (span > 256) v = (v << 8) | byte();
    return lo + static_cast<std::int64_t>(v % span);
  }
  bool flag() { return byte() & 1; }
  std::size_t left() const { return size_ - pos_; }
  const std::uint8_t* rest() const { return data_ + pos_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace canzona::fuzz
