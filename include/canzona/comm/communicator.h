// The collectives and point-to-point messages the runtime needs, over one group of ranks
// (docs/design.md sections 2 and 4).
//
// Terms. A Communicator spans `size()` ranks; this process is `rank()` in 0..size()-1. Buffers are
// typed spans (common/dtype.h) of fp32 or bf16; a collective's buffers share one dtype, the same on
// every rank (a std::span<float> or std::vector<float> converts to an fp32 one). *Counts* and
// *displacements* (displs) are in elements, one entry per rank of this communicator, and index
// rank r's *segment* {displs[r], counts[r]} of a buffer. Zero counts are allowed everywhere. Every
// rank must post the same collectives on a communicator in the same order, with consistent
// arguments (the same dtype and counts on all ranks, matching send/recv counts); the requests may
// then be waited in any order, on each rank independently. "Sum" is formed in fp32: in
// ReduceMode::kNative its order (and, for bf16, where it rounds) is the backend's; in
// ReduceMode::kDeterministic every element is summed in rank order, ((x_0 + x_1) + x_2) + ... +
// x_{P-1}, in fp32, and a bf16 result is that sum rounded once to nearest even
// (canzona::sum_in_rank_order), so reduce_scatter and all_reduce give bitwise identical results
// for the same inputs (docs/design.md section 5).
//
// Point-to-point. isend/irecv move bytes between two ranks of one communicator: `peer` is the
// other rank (0 <= peer < size(); this rank itself is allowed), `tag` a number in [0, kMaxTag]
// chosen by the caller. The k-th irecv this rank posts for (peer, tag) receives the k-th isend
// that peer posted to this rank with that tag (messages between one pair with one tag are matched
// in posting order, as MPI guarantees; different tags and different peers are independent), and
// its buffer must have exactly the size that isend sent. Point-to-point traffic never matches a
// collective of the same communicator, and p2p calls need not be posted in the same order on every
// rank. Requests follow request.h: the send buffer must not be written, the receive buffer not be
// read, until wait() returns.
//
// Argument errors the calling rank can see (a count array of the wrong length, a negative count,
// a buffer of the wrong size, overlapping send and receive buffers, a peer or tag out of range)
// throw canzona::Error before anything is posted. Backend failures throw canzona::Error naming the
// backend call.
//
// Byte counters (CommBytes) are kept per Communicator-level operation kind (reduce_scatter,
// all_gather, all_reduce, all_to_all, p2p) and per dtype, and counted by the backend from what it
// actually hands its transport, not from the public call's arguments: when the backend makes each
// transport call, it adds the bytes of this rank's send arguments destined to other ranks (e = 4
// bytes per fp32 element, 2 per bf16 one) to the counter of the operation that call serves, under
// the call's dtype (bytes(DType)); byte strings (isend, all_gather_bytes) count under no dtype, and
// bytes() sums all three; an operation built from several transport calls (a
// deterministic all-reduce) counts each. MpiCommunicator states its exact definition per MPI
// call (src/comm/mpi/mpi_communicator.h); for its reduce_scatter, all_gather and all_to_all it
// comes to, with P = size() and me = rank():
//   reduce_scatter(counts)  e * (sum(counts) - counts[me])   every other rank's block, once
//   all_gather(counts)      e * (P - 1) * counts[me]         own block to every other rank
//   all_to_all(send_counts) e * sum over r != me of send_counts[r]
//   isend(data, peer)       data.size() when peer != me, 0 to itself (irecv counts nothing)
// and for all_reduce(n) to e * ((n - c[me]) + (P - 1) * c[me]), c = even_split(n, P), summed over
// ranks 2(P-1)n * e bytes against (P-1)n * e for a reduce-scatter. The blocking byte gather
// all_gather_bytes(bytes) counts into all_gather, (P - 1) * bytes.size(); the sizes it exchanges
// first, barrier() and all_gather_u64() are control traffic and are not counted. A counter grows
// when its transport call is made (for most operations when posted; phase 2 of a deterministic
// all-reduce when test() or wait() posts it), so read counters after waiting the requests of
// interest. total() sums every kind, p2p included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canzona/comm/request.h"
#include "canzona/common/dtype.h"

namespace canzona::comm {

// How sums are formed; see the paragraph above.
enum class ReduceMode {
  kNative,         // the backend's reduction (fastest; order may differ between collectives)
  kDeterministic,  // rank order 0..P-1 for every element (bitwise reproducible)
};

// "deterministic" | "native" (--reduce-mode); parse throws UsageError otherwise.
ReduceMode parse_reduce_mode(const std::string& name);
const char* to_string(ReduceMode mode);

// Bytes per operation kind, as defined above.
struct CommBytes {
  std::int64_t reduce_scatter = 0;
  std::int64_t all_gather = 0;
  std::int64_t all_reduce = 0;
  std::int64_t all_to_all = 0;
  std::int64_t p2p = 0;  // isend

  std::int64_t total() const { return reduce_scatter + all_gather + all_reduce + all_to_all + p2p; }
  CommBytes& operator+=(const CommBytes& other);
  friend CommBytes operator-(CommBytes a, const CommBytes& b);
  friend bool operator==(const CommBytes&, const CommBytes&) = default;
};

// Splits n elements into `parts` contiguous counts; the first n % parts parts get one more.
// Throws canzona::Error when n < 0 or parts < 1.
std::vector<std::int64_t> even_split(std::int64_t n, int parts);

// Public calls validate their arguments, then call the backend's do_* method, which may assume
// valid arguments and counts the bytes it hands its transport into mutable_bytes().
class Communicator {
 public:
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Reduce-Scatter with variable counts: `send` (sum(counts) elements) is this rank's contribution,
  // cut into consecutive blocks of counts[0], counts[1], ...; `recv` (counts[rank] elements)
  // receives the sum over ranks of block `rank`. send and recv must not overlap.
  Request reduce_scatter(ConstTypedSpan send, TypedSpan recv, std::span<const std::int64_t> counts);

  // All-Gather with variable counts: `send` (counts[rank] elements) lands in segment
  // {displs[rank], counts[rank]} of every rank's `recv`. Segments must lie inside recv and not
  // overlap; elements outside all segments are left untouched. send may be exactly this rank's own
  // segment of recv (in place); otherwise send and recv must not overlap.
  Request all_gather(ConstTypedSpan send, TypedSpan recv, std::span<const std::int64_t> counts,
                     std::span<const std::int64_t> displs);

  // All-to-All with variable counts: segment {send_displs[r], send_counts[r]} of `send` goes to
  // rank r, where it lands in segment {recv_displs[rank], recv_counts[rank]} of r's `recv`; so
  // recv_counts[q] on this rank must equal send_counts[rank] on rank q. Segments must lie inside
  // their buffers; receive segments must not overlap; send and recv must not overlap.
  Request all_to_all(ConstTypedSpan send, std::span<const std::int64_t> send_counts,
                     std::span<const std::int64_t> send_displs, TypedSpan recv,
                     std::span<const std::int64_t> recv_counts,
                     std::span<const std::int64_t> recv_displs);

  // All-Reduce (sum): `recv` receives the element-wise sum over ranks of `send`. Both have the
  // same size; they are either the same span (in place) or do not overlap.
  Request all_reduce(ConstTypedSpan send, TypedSpan recv);

  // The largest tag isend and irecv accept: MPI guarantees tags up to 32767 (MPI_TAG_UB).
  static constexpr int kMaxTag = 32767;

  // Nonblocking point-to-point (see above): sends `data` to rank `peer`, or receives into `data`
  // the matching message from rank `peer`. Throws canzona::Error (CANZONA_CHECK) when peer is
  // outside [0, size()) or tag outside [0, kMaxTag]. A receive whose buffer size differs from the
  // size sent fails in its wait() (canzona::Error naming both sizes where the backend knows them).
  Request isend(std::span<const std::byte> data, int peer, int tag);
  Request irecv(std::span<std::byte> data, int peer, int tag);

  // Blocks until every rank of the communicator has called barrier().
  virtual void barrier() = 0;

  // Blocking: returns every rank's `value`, indexed by rank. For agreement checks (plan hashes)
  // before the first collective.
  virtual std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) = 0;

  // Blocking All-Gather of byte strings whose sizes may differ between ranks (control data such
  // as run statistics, traces, verification digests): returns every rank's `bytes`, indexed by
  // rank, each exactly as sent (empty ones included). Every rank must call it (in the same order
  // relative to the other collectives); the sizes need not agree. The bytes are copied as they
  // are: serialize anything a reader on another rank must interpret. Throws canzona::Error,
  // identically on every rank, when the backend cannot move the total size (MPI: every size and
  // their sum within INT_MAX), and on a backend failure.
  virtual std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> bytes) = 0;

  // Bytes handed to the transport so far on this communicator, as defined above: all of them, and
  // those of the collectives of one dtype.
  CommBytes bytes() const;
  const CommBytes& bytes(DType dtype) const { return by_dtype_[static_cast<int>(dtype)]; }
  void reset_bytes();

 protected:
  // The counters a backend adds to when it makes a transport call: a collective's, by its dtype;
  // byte strings' (isend, all_gather_bytes).
  CommBytes& mutable_bytes(DType dtype) { return by_dtype_[static_cast<int>(dtype)]; }
  CommBytes& mutable_bytes() { return untyped_; }

  // Buffers already checked: one dtype, sizes and segments as documented above.
  virtual Request do_reduce_scatter(ConstTypedSpan send, TypedSpan recv,
                                    std::span<const std::int64_t> counts) = 0;
  virtual Request do_all_gather(ConstTypedSpan send, TypedSpan recv,
                                std::span<const std::int64_t> counts,
                                std::span<const std::int64_t> displs) = 0;
  virtual Request do_all_to_all(ConstTypedSpan send, std::span<const std::int64_t> send_counts,
                                std::span<const std::int64_t> send_displs, TypedSpan recv,
                                std::span<const std::int64_t> recv_counts,
                                std::span<const std::int64_t> recv_displs) = 0;
  virtual Request do_all_reduce(ConstTypedSpan send, TypedSpan recv) = 0;
  // Point-to-point, arguments already checked. The defaults throw canzona::Error (a backend
  // without point-to-point, such as a test double); both backends override them.
  virtual Request do_isend(std::span<const std::byte> data, int peer, int tag);
  virtual Request do_irecv(std::span<std::byte> data, int peer, int tag);

 private:
  CommBytes by_dtype_[kNumDTypes];
  CommBytes untyped_;
};

// Control data to rank 0 (run statistics, traces, --verify digests): collective over `world`
// (all_gather_bytes); returns every rank's `bytes`, indexed by rank, on rank 0 and an empty vector
// elsewhere.
std::vector<std::string> gather_bytes_to_root(Communicator& world, const std::string& bytes);

}  // namespace canzona::comm
