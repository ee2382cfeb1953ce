// Point-to-point patterns run by both backends' tests on any Communicator (called by every rank of
// it). The bytes of each message are fixed by (source, dest, tag, index) through splitmix64, so a
// message delivered to the wrong receive, out of order or damaged differs from what the receiver
// computes here on its own. Checks are non-fatal EXPECTs, so a failure never skips a later call
// that another rank waits for.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "canzona/comm/communicator.h"
#include "canzona/common/error.h"
#include "canzona/common/splitmix.h"

namespace canzona::comm::p2p_test {

// Tag 0 carries empty messages; others 1..300 bytes, varying with source, tag and index.
inline std::size_t payload_size(int source, int tag, int index) {
  if (tag == 0) return 0;
  return 1 + static_cast<std::size_t>(source * 7 + tag * 3 + index * 11) % 300;
}

// Byte j of message `index` from `source` to `dest` with `tag`.
inline std::byte payload_byte(int source, int dest, int tag, int index, std::size_t j) {
  std::uint64_t key = (std::uint64_t(source) << 48) ^ (std::uint64_t(dest) << 32) ^
                      (std::uint64_t(tag) << 16) ^ std::uint64_t(index);
  return static_cast<std::byte>(splitmix64(splitmix64(key) ^ j) & 0xff);
}

inline std::vector<std::byte> payload(int source, int dest, int tag, int index, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t j = 0; j < size; ++j) bytes[j] = payload_byte(source, dest, tag, index, j);
  return bytes;
}

inline std::vector<std::byte> payload(int source, int dest, int tag, int index) {
  return payload(source, dest, tag, index, payload_size(source, tag, index));
}

// Success when `got` holds exactly `want`'s bytes; otherwise names the first difference.
inline ::testing::AssertionResult same_bytes(const std::vector<std::byte>& got,
                                             const std::vector<std::byte>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  for (std::size_t j = 0; j < got.size(); ++j) {
    if (got[j] != want[j])
      return ::testing::AssertionFailure()
             << "byte " << j << " is " << int(got[j]) << ", want " << int(want[j]);
  }
  return ::testing::AssertionSuccess();
}

// Ring: every rank sends one message per tag of kRingTags to rank + 1 and receives from rank - 1
// (a ring of one sends to itself). The receives are posted first, in reverse tag order; then an
// all_reduce and an all_gather_u64 run on the same communicator (they must not match the pending
// receives); then the sends, in an order rotated by the rank; the receives are waited in a third
// order. `round` is the messages' index. Returns the bytes this rank sent to other ranks.
inline constexpr int kRingTags[] = {0, 5, 300, Communicator::kMaxTag};

inline std::int64_t ring_exchange(Communicator& comm, int round) {
  const int size = comm.size(), me = comm.rank();
  const int next = (me + 1) % size, prev = (me + size - 1) % size;
  constexpr int n = std::ssize(kRingTags);
  std::vector<std::vector<std::byte>> got(n), sent(n);
  std::vector<Request> receives(n), sends(n);
  for (int i = n - 1; i >= 0; --i) {
    got[i].assign(payload_size(prev, kRingTags[i], round), std::byte{0xee});
    receives[i] = comm.irecv(got[i], prev, kRingTags[i]);
  }
  std::vector<float> values = {static_cast<float>(me + 1), static_cast<float>(round)};
  comm.all_reduce(values, values).wait();
  EXPECT_EQ(values, (std::vector<float>{static_cast<float>(size * (size + 1) / 2),
                                        static_cast<float>(size * round)}));
  std::vector<std::uint64_t> ranks(size);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  EXPECT_EQ(comm.all_gather_u64(me), ranks);
  std::int64_t bytes = 0;
  for (int k = 0; k < n; ++k) {
    const int i = (k + me) % n;
    sent[i] = payload(me, next, kRingTags[i], round);
    sends[i] = comm.isend(sent[i], next, kRingTags[i]);
    if (next != me) bytes += std::ssize(sent[i]);
  }
  for (int i : {2, 0, 3, 1}) receives[i].wait();
  for (Request& r : sends) r.wait();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(same_bytes(got[i], payload(prev, me, kRingTags[i], round)))
        << "tag " << kRingTags[i] << " from rank " << prev << " to rank " << me;
  }
  return bytes;
}

// Every rank sends `count` messages of different sizes to rank + 1 with one tag; the receiver
// posts all its receives, then waits them in reverse order: the k-th receive posted must get the
// k-th message sent.
inline void same_tag_in_posting_order(Communicator& comm, int count = 12) {
  constexpr int kTag = 11;
  const int size = comm.size(), me = comm.rank();
  const int next = (me + 1) % size, prev = (me + size - 1) % size;
  std::vector<std::vector<std::byte>> got(count), sent(count);
  std::vector<Request> receives(count), sends(count);
  for (int k = 0; k < count; ++k) {
    got[k].assign(payload_size(prev, kTag, k), std::byte{0xee});
    receives[k] = comm.irecv(got[k], prev, kTag);
  }
  for (int k = 0; k < count; ++k) {
    sent[k] = payload(me, next, kTag, k);
    sends[k] = comm.isend(sent[k], next, kTag);
  }
  for (int k = count - 1; k >= 0; --k) receives[k].wait();
  for (Request& r : sends) r.wait();
  for (int k = 0; k < count; ++k)
    EXPECT_TRUE(same_bytes(got[k], payload(prev, me, kTag, k))) << "message " << k;
}

// 1F1B-like over a communicator of exactly two ranks (a PP group of two stages): rank 0 sends
// `micro` activations to rank 1, which answers each with a gradient; both directions use one tag
// and one size, so only the order tells the messages apart. Rank 0 keeps `warmup` activations in
// flight; rank 1 posts all its receives up front. Halfway both ranks run an all_reduce on the
// same communicator while point-to-point messages are pending: it must sum exactly the two
// contributions (collective traffic never matches point-to-point).
inline void one_f_one_b(Communicator& comm, int micro = 32, int warmup = 3) {
  constexpr int kTag = 7;
  constexpr std::size_t kSize = 96;
  ASSERT_EQ(comm.size(), 2);
  const int me = comm.rank(), peer = 1 - me;
  std::vector<std::vector<std::byte>> sent(micro), got(micro, std::vector<std::byte>(kSize));
  std::vector<Request> sends(micro), receives(micro);
  const auto send = [&](int k) {
    sent[k] = payload(me, peer, kTag, k, kSize);
    sends[k] = comm.isend(sent[k], peer, kTag);
  };
  const auto check = [&](int k) {
    EXPECT_TRUE(same_bytes(got[k], payload(peer, me, kTag, k, kSize)))
        << (me == 0 ? "gradient " : "activation ") << k;
  };
  const auto all_reduce = [&] {
    std::vector<float> values = {static_cast<float>(me + 1), static_cast<float>(10 * (me + 1))};
    comm.all_reduce(values, values).wait();
    EXPECT_EQ(values, (std::vector<float>{3.0f, 30.0f}));
  };
  if (me == 0) {
    for (int k = 0; k < warmup && k < micro; ++k) send(k);
    for (int k = 0; k < micro; ++k) {
      receives[k] = comm.irecv(got[k], peer, kTag);
      if (k + warmup < micro) send(k + warmup);
      if (k == micro / 2) all_reduce();
      receives[k].wait();
      check(k);
    }
  } else {
    for (int k = 0; k < micro; ++k) receives[k] = comm.irecv(got[k], peer, kTag);
    for (int k = 0; k < micro; ++k) {
      receives[k].wait();
      check(k);
      send(k);
      if (k == micro / 2) all_reduce();
    }
  }
  for (Request& r : sends) r.wait();
}

// A peer outside [0, size) or a tag outside [0, kMaxTag] is a canzona::Error naming the value,
// thrown before anything is posted (no communication).
inline void bad_peer_and_tag_throw(Communicator& comm) {
  std::vector<std::byte> buffer(4);
  const int size = comm.size();
  const auto expect_error = [](const auto& call, const std::string& names) {
    try {
      call();
      ADD_FAILURE() << "expected canzona::Error naming " << names;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  for (const bool send : {true, false}) {
    SCOPED_TRACE(send ? "isend" : "irecv");
    const auto post = [&](int peer, int tag) {
      return [&comm, &buffer, send, peer, tag] {
        Request r = send ? comm.isend(buffer, peer, tag) : comm.irecv(buffer, peer, tag);
      };
    };
    const std::string range = " is outside [0, " + std::to_string(size) + ")";
    expect_error(post(-1, 0), "peer -1" + range);
    expect_error(post(size, 0), "peer " + std::to_string(size) + range);
    expect_error(post(0, -1), "tag -1 is outside [0, 32767]");
    expect_error(post(0, Communicator::kMaxTag + 1), "tag 32768 is outside [0, 32767]");
  }
}

}  // namespace canzona::comm::p2p_test
