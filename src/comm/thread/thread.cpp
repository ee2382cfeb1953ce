#include "canzona/comm/thread.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <tuple>
#include <utility>

#include "canzona/common/error.h"

namespace canzona::comm {
namespace {

enum class Op {
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kAllReduce,
  kBarrier,
  kAllGatherU64,
  kAllGatherBytes,
};

const char* op_name(Op op) {
  switch (op) {
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAllGather:
      return "all_gather";
    case Op::kAllToAll:
      return "all_to_all";
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kBarrier:
      return "barrier";
    case Op::kAllGatherU64:
      return "all_gather_u64";
    case Op::kAllGatherBytes:
      return "all_gather_bytes";
  }
  return "?";
}

// One rank's contribution to one collective, copied when it is posted.
struct Contribution {
  Op op = Op::kBarrier;
  // reduce_scatter, all_to_all: (P) the block destined to each rank; all_gather, all_reduce: (1)
  // this rank's send buffer; otherwise empty. Elements of `dtype`, as bytes.
  std::vector<std::vector<std::byte>> blocks;
  std::vector<std::byte> bytes;  // all_gather_bytes: the payload; all_gather_u64: the value
  DType dtype = DType::kF32;
};

std::vector<std::byte> copy_of(ConstTypedSpan x) {
  return {x.data(), x.data() + x.size_bytes()};
}

// Elements of a block of `dtype`.
std::int64_t elements(const std::vector<std::byte>& block, DType dtype) {
  return std::ssize(block) / dtype_bytes(dtype);
}

// One collective of a group: the contributions posted so far, by rank. Entries are written only
// until `posted` reaches the group size (under the group's mutex), and only read after that.
struct Slot {
  explicit Slot(int size) : by_rank(size) {}
  std::vector<std::optional<Contribution>> by_rank;
  int posted = 0;
};

using Contributions = std::vector<std::optional<Contribution>>;

// The state shared by the communicators of one thread group.
class Group {
 public:
  explicit Group(int size) : size_(size), departed_(size, false) {}

  int size() const { return size_; }

  // Stores `contribution` as rank's part of collective `seq`; returns that collective's slot.
  std::shared_ptr<const Slot> post(std::uint64_t seq, int rank, Contribution contribution) {
    std::lock_guard lock(mutex_);
    std::shared_ptr<Slot>& entry = open_[seq];
    if (!entry) entry = std::make_shared<Slot>(size_);
    std::shared_ptr<Slot> slot = entry;
    slot->by_rank[rank] = std::move(contribution);
    if (++slot->posted == size_) {
      open_.erase(seq);
      changed_.notify_all();
    }
    return slot;
  }

  bool complete(const Slot& slot) {
    std::lock_guard lock(mutex_);
    return slot.posted == size_;
  }

  // Returns true once every rank has posted `slot`. Blocks for that when `may_block`; otherwise
  // returns false at once if some rank has not. Throws canzona::Error when a rank that has not
  // posted it has departed.
  bool await(const Slot& slot, std::uint64_t seq, int rank, Op op, bool may_block) {
    std::unique_lock lock(mutex_);
    if (!may_block && slot.posted < size_) return false;
    changed_.wait(lock, [&] { return slot.posted == size_ || departed_missing(slot) >= 0; });
    if (slot.posted == size_) return true;
    throw Error(str("thread communicator: rank ", departed_missing(slot), " of ", size_,
                    " was destroyed before posting collective #", seq, " (", op_name(op),
                    ") that rank ", rank, " waits for"));
  }

  // Point-to-point (thread.h): appends a copy of `data` to the FIFO of (source, dest, tag);
  // returns its index there.
  std::uint64_t send(int source, int dest, int tag, std::span<const std::byte> data) {
    std::lock_guard lock(mutex_);
    Channel& channel = channels_[{source, dest, tag}];
    const std::uint64_t index = channel.sent++;
    channel.unreceived.emplace(index, std::vector<std::byte>(data.begin(), data.end()));
    changed_.notify_all();
    return index;
  }

  // The index of the next receive posted on (source, dest, tag): the send it matches.
  std::uint64_t post_receive(int source, int dest, int tag) {
    std::lock_guard lock(mutex_);
    const std::uint64_t index = channels_[{source, dest, tag}].received++;
    changed_.notify_all();
    return index;
  }

  // True once the receive matching send `index` of (source, dest, tag) has been posted: an isend
  // completes then, as MPI_Issend does, so a program that waits for a send before posting the
  // receive it needs hangs here as it may under MPI (a large MPI_Isend waits for its receive).
  // Blocks for it when `may_block`; throws canzona::Error when dest has departed without posting.
  bool matched(int source, int dest, int tag, std::uint64_t index, bool may_block) {
    std::unique_lock lock(mutex_);
    Channel& channel = channels_[{source, dest, tag}];
    const auto posted = [&] { return channel.received > index; };
    if (!may_block) return posted();
    changed_.wait(lock, [&] { return posted() || departed_[dest]; });
    if (!posted())
      throw Error(str("thread communicator: rank ", dest, " of ", size_,
                      " was destroyed before posting the receive of message #", index, " with tag ",
                      tag, " that rank ", source, " sent"));
    return true;
  }

  // True once message `index` of (source, dest, tag) has been sent (and not yet taken).
  bool arrived(int source, int dest, int tag, std::uint64_t index) {
    std::lock_guard lock(mutex_);
    return channels_[{source, dest, tag}].unreceived.contains(index);
  }

  // Takes message `index` of (source, dest, tag): blocks until it is sent when `may_block`,
  // otherwise returns std::nullopt at once if it has not been. Throws canzona::Error when the
  // source has departed without sending it.
  std::optional<std::vector<std::byte>> take(int source, int dest, int tag, std::uint64_t index,
                                             bool may_block) {
    std::unique_lock lock(mutex_);
    Channel& channel = channels_[{source, dest, tag}];
    const auto sent = [&] { return channel.unreceived.contains(index); };
    if (!may_block && !sent()) return std::nullopt;
    changed_.wait(lock, [&] { return sent() || departed_[source]; });
    if (!sent())
      throw Error(str("thread communicator: rank ", source, " of ", size_,
                      " was destroyed before sending message #", index, " with tag ", tag,
                      " that rank ", dest, " waits for"));
    auto node = channel.unreceived.extract(index);
    return std::move(node.mapped());
  }

  // Rank's communicator is gone: it posts nothing more.
  void depart(int rank) noexcept {
    std::lock_guard lock(mutex_);
    departed_[rank] = true;
    changed_.notify_all();
  }

 private:
  // A departed rank that has not posted `slot`, or -1. Needs mutex_.
  int departed_missing(const Slot& slot) const {
    for (int r = 0; r < size_; ++r) {
      if (departed_[r] && !slot.by_rank[r]) return r;
    }
    return -1;
  }

  // The messages of one (source, dest, tag): send k is the k-th isend, receive k the k-th irecv.
  struct Channel {
    std::uint64_t sent = 0;                                      // isends posted
    std::uint64_t received = 0;                                  // irecvs posted
    std::map<std::uint64_t, std::vector<std::byte>> unreceived;  // by send index
  };

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a slot completed, a message was sent or a rank departed
  std::map<std::uint64_t, std::shared_ptr<Slot>> open_;    // slots some rank has not posted
  std::map<std::tuple<int, int, int>, Channel> channels_;  // by (source, dest, tag)
  std::vector<bool> departed_;                             // by rank
};

// Computes this rank's result from every rank's contribution (all present, all of the same op).
using Finish = std::function<void(const Contributions&)>;

class ThreadRequest final : public Request::Impl {
 public:
  ThreadRequest(std::shared_ptr<Group> group, std::shared_ptr<const Slot> slot, std::uint64_t seq,
                int rank, Op op, Finish finish)
      : group_(std::move(group)),
        slot_(std::move(slot)),
        seq_(seq),
        rank_(rank),
        op_(op),
        finish_(std::move(finish)) {}

  void wait() override {
    if (!group_->await(*slot_, seq_, rank_, op_, /*may_block=*/std::uncaught_exceptions() == 0))
      return;
    for (int r = 0; r < group_->size(); ++r) {
      const Op theirs = slot_->by_rank[r]->op;
      if (theirs != op_)
        throw Error(str("thread communicator: collective #", seq_, " is ", op_name(op_),
                        " on rank ", rank_, " but ", op_name(theirs), " on rank ", r));
    }
    finish_(slot_->by_rank);
  }

  bool test() override { return group_->complete(*slot_); }

 private:
  std::shared_ptr<Group> group_;
  std::shared_ptr<const Slot> slot_;
  std::uint64_t seq_;
  int rank_;
  Op op_;
  Finish finish_;
};

// An isend: its bytes were copied into the mailbox when it was posted; it completes when the
// matching receive is posted (Group::matched).
class SentRequest final : public Request::Impl {
 public:
  SentRequest(std::shared_ptr<Group> group, int source, int dest, int tag, std::uint64_t index)
      : group_(std::move(group)), source_(source), dest_(dest), tag_(tag), index_(index) {}

  void wait() override {
    group_->matched(source_, dest_, tag_, index_,
                    /*may_block=*/std::uncaught_exceptions() == 0);
  }
  bool test() override { return group_->matched(source_, dest_, tag_, index_, false); }

 private:
  std::shared_ptr<Group> group_;
  int source_;
  int dest_;
  int tag_;
  std::uint64_t index_;
};

// An irecv: the `index`-th receive of (source, dest, tag), matched to that channel's `index`-th
// send; wait() copies the message's bytes into `data`.
class ReceiveRequest final : public Request::Impl {
 public:
  ReceiveRequest(std::shared_ptr<Group> group, std::span<std::byte> data, int source, int dest,
                 int tag, std::uint64_t index)
      : group_(std::move(group)),
        data_(data),
        source_(source),
        dest_(dest),
        tag_(tag),
        index_(index) {}

  void wait() override {
    std::optional<std::vector<std::byte>> message =
        group_->take(source_, dest_, tag_, index_, /*may_block=*/std::uncaught_exceptions() == 0);
    if (!message) return;
    if (message->size() != data_.size())
      throw Error(str("thread communicator: irecv from rank ", source_, " with tag ", tag_,
                      ": receive buffer has ", data_.size(), " bytes, the matching isend sent ",
                      message->size()));
    std::copy(message->begin(), message->end(), data_.begin());
  }

  bool test() override { return group_->arrived(source_, dest_, tag_, index_); }

 private:
  std::shared_ptr<Group> group_;
  std::span<std::byte> data_;
  int source_;
  int dest_;
  int tag_;
  std::uint64_t index_;
};

[[noreturn]] void throw_mismatch(Op op, int rank, int other, std::int64_t expected,
                                 std::int64_t got) {
  throw Error(str("thread communicator: ", op_name(op), " counts disagree: rank ", rank,
                  " expects ", expected, " elements from rank ", other, ", which sent ", got));
}

void check_dtype(Op op, int rank, int other, DType expected, const Contribution& got) {
  if (got.dtype != expected)
    throw Error(str("thread communicator: ", op_name(op), " dtypes disagree: rank ", rank,
                    " expects ", to_string(expected), " from rank ", other, ", which sent ",
                    to_string(got.dtype)));
}

// out = x_0 + x_1 + ... + x_{P-1} in rank order (canzona::sum_in_rank_order), with x_q =
// `block(q)`. Every block must have out.size() elements of out's dtype.
template <typename BlockOf>
void sum_in_rank_order(int size, const BlockOf& block, TypedSpan out) {
  std::vector<std::byte> blocks;
  blocks.reserve(static_cast<std::size_t>(size * out.size_bytes()));
  for (int q = 0; q < size; ++q) {
    const std::vector<std::byte>& x = block(q);
    blocks.insert(blocks.end(), x.begin(), x.end());
  }
  canzona::sum_in_rank_order(ConstTypedSpan(blocks.data(), size * out.size(), out.dtype()), size,
                             out);
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank, ReduceMode mode)
      : group_(std::move(group)), rank_(rank), mode_(mode) {}
  ~ThreadCommunicator() override { group_->depart(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  ReduceMode mode() const { return mode_; }

  void barrier() override {
    post(Contribution{Op::kBarrier, {}, {}, DType::kF32}, [](const Contributions&) {}).wait();
  }

  std::vector<std::uint64_t> all_gather_u64(std::uint64_t value) override {
    Contribution mine{Op::kAllGatherU64, {}, std::vector<std::byte>(sizeof value), DType::kF32};
    std::memcpy(mine.bytes.data(), &value, sizeof value);
    std::vector<std::uint64_t> values(size());
    post(std::move(mine), [&values](const Contributions& by_rank) {
      for (std::size_t r = 0; r < values.size(); ++r)
        std::memcpy(&values[r], by_rank[r]->bytes.data(), sizeof values[r]);
    }).wait();
    return values;
  }

  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> bytes) override {
    mutable_bytes().all_gather += std::int64_t{size() - 1} * std::ssize(bytes);
    std::vector<std::vector<std::byte>> out(size());
    post(Contribution{Op::kAllGatherBytes, {}, {bytes.begin(), bytes.end()}, DType::kF32},
         [&out](const Contributions& by_rank) {
           for (std::size_t r = 0; r < out.size(); ++r) out[r] = by_rank[r]->bytes;
         })
        .wait();
    return out;
  }

 protected:
  Request do_reduce_scatter(ConstTypedSpan send, TypedSpan recv,
                            std::span<const std::int64_t> counts) override {
    const DType dtype = send.dtype();
    Contribution mine{Op::kReduceScatter, std::vector<std::vector<std::byte>>(size()), {}, dtype};
    std::int64_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      mine.blocks[r] = copy_of(send.subspan(offset, counts[r]));
      offset += counts[r];
    }
    mutable_bytes(dtype).reduce_scatter += dtype_bytes(dtype) * (offset - counts[rank_]);
    const int me = rank_;
    return post(std::move(mine), [recv, me](const Contributions& by_rank) {
      const int size = static_cast<int>(by_rank.size());
      for (int q = 0; q < size; ++q)
        check_dtype(Op::kReduceScatter, me, q, recv.dtype(), *by_rank[q]);
      for (int q = 0; q < size; ++q) {
        const std::int64_t got = elements(by_rank[q]->blocks[me], recv.dtype());
        if (got != recv.size()) throw_mismatch(Op::kReduceScatter, me, q, recv.size(), got);
      }
      sum_in_rank_order(
          size, [&](int q) -> const std::vector<std::byte>& { return by_rank[q]->blocks[me]; },
          recv);
    });
  }

  Request do_all_gather(ConstTypedSpan send, TypedSpan recv, std::span<const std::int64_t> counts,
                        std::span<const std::int64_t> displs) override {
    const DType dtype = send.dtype();
    Contribution mine{Op::kAllGather, {copy_of(send)}, {}, dtype};
    mutable_bytes(dtype).all_gather += dtype_bytes(dtype) * (size() - 1) * counts[rank_];
    return post(std::move(mine),
                [recv, me = rank_, counts = std::vector(counts.begin(), counts.end()),
                 displs = std::vector(displs.begin(), displs.end())](const Contributions& by_rank) {
                  for (std::size_t r = 0; r < by_rank.size(); ++r) {
                    const int q = static_cast<int>(r);
                    check_dtype(Op::kAllGather, me, q, recv.dtype(), *by_rank[r]);
                    const std::vector<std::byte>& block = by_rank[r]->blocks[0];
                    const std::int64_t got = elements(block, recv.dtype());
                    if (got != counts[r]) throw_mismatch(Op::kAllGather, me, q, counts[r], got);
                    std::copy(block.begin(), block.end(), recv.subspan(displs[r], got).data());
                  }
                });
  }

  Request do_all_to_all(ConstTypedSpan send, std::span<const std::int64_t> send_counts,
                        std::span<const std::int64_t> send_displs, TypedSpan recv,
                        std::span<const std::int64_t> recv_counts,
                        std::span<const std::int64_t> recv_displs) override {
    const DType dtype = send.dtype();
    Contribution mine{Op::kAllToAll, std::vector<std::vector<std::byte>>(size()), {}, dtype};
    std::int64_t to_others = 0;
    for (int r = 0; r < size(); ++r) {
      mine.blocks[r] = copy_of(send.subspan(send_displs[r], send_counts[r]));
      if (r != rank_) to_others += send_counts[r];
    }
    mutable_bytes(dtype).all_to_all += dtype_bytes(dtype) * to_others;
    return post(std::move(mine),
                [recv, me = rank_, counts = std::vector(recv_counts.begin(), recv_counts.end()),
                 displs = std::vector(recv_displs.begin(), recv_displs.end())](
                    const Contributions& by_rank) {
                  for (std::size_t q = 0; q < by_rank.size(); ++q) {
                    check_dtype(Op::kAllToAll, me, static_cast<int>(q), recv.dtype(), *by_rank[q]);
                    const std::vector<std::byte>& block = by_rank[q]->blocks[me];
                    const std::int64_t got = elements(block, recv.dtype());
                    if (got != counts[q])
                      throw_mismatch(Op::kAllToAll, me, static_cast<int>(q), counts[q], got);
                    std::copy(block.begin(), block.end(), recv.subspan(displs[q], got).data());
                  }
                });
  }

  Request do_all_reduce(ConstTypedSpan send, TypedSpan recv) override {
    const DType dtype = send.dtype();
    Contribution mine{Op::kAllReduce, {copy_of(send)}, {}, dtype};
    const std::int64_t n = send.size();
    const std::int64_t own = comm::even_split(n, size())[rank_];
    mutable_bytes(dtype).all_reduce += dtype_bytes(dtype) * ((n - own) + (size() - 1) * own);
    return post(std::move(mine), [recv, me = rank_](const Contributions& by_rank) {
      const int size = static_cast<int>(by_rank.size());
      for (int q = 0; q < size; ++q) check_dtype(Op::kAllReduce, me, q, recv.dtype(), *by_rank[q]);
      for (int q = 0; q < size; ++q) {
        const std::int64_t got = elements(by_rank[q]->blocks[0], recv.dtype());
        if (got != recv.size()) throw_mismatch(Op::kAllReduce, me, q, recv.size(), got);
      }
      sum_in_rank_order(
          size, [&](int q) -> const std::vector<std::byte>& { return by_rank[q]->blocks[0]; },
          recv);
    });
  }

  Request do_isend(std::span<const std::byte> data, int peer, int tag) override {
    const std::uint64_t index = group_->send(rank_, peer, tag, data);
    if (peer != rank_) mutable_bytes().p2p += std::ssize(data);
    return Request(std::make_unique<SentRequest>(group_, rank_, peer, tag, index));
  }

  Request do_irecv(std::span<std::byte> data, int peer, int tag) override {
    const std::uint64_t index = group_->post_receive(peer, rank_, tag);
    return Request(std::make_unique<ReceiveRequest>(group_, data, peer, rank_, tag, index));
  }

 private:
  // Posts this rank's part of the next collective; never blocks.
  Request post(Contribution mine, Finish finish) {
    const std::uint64_t seq = next_seq_++;
    const Op op = mine.op;
    std::shared_ptr<const Slot> slot = group_->post(seq, rank_, std::move(mine));
    return Request(std::make_unique<ThreadRequest>(group_, std::move(slot), seq, rank_, op,
                                                   std::move(finish)));
  }

  std::shared_ptr<Group> group_;
  int rank_;
  ReduceMode mode_;  // sums are in rank order either way
  std::uint64_t next_seq_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int size, ReduceMode mode) {
  CANZONA_CHECK(size >= 1, "thread group size ", size);
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int r = 0; r < size; ++r)
    communicators.push_back(std::make_unique<ThreadCommunicator>(group, r, mode));
  return communicators;
}

namespace {

std::vector<std::shared_ptr<Group>> make_groups(int count, int size) {
  std::vector<std::shared_ptr<Group>> groups(count);
  for (auto& g : groups) g = std::make_shared<Group>(size);
  return groups;
}

// The PP group and the embedding group (null on a middle stage) of the rank at `coord` of `dims`,
// from the groups of its (dp, tp) coordinates.
std::pair<std::unique_ptr<Communicator>, std::unique_ptr<Communicator>> pipeline_communicators(
    const ParallelDims& dims, const GridCoord& coord, const std::shared_ptr<Group>& pp_group,
    const std::shared_ptr<Group>& embedding_group, ReduceMode mode) {
  auto pp = std::make_unique<ThreadCommunicator>(pp_group, coord.pp, mode);
  std::unique_ptr<Communicator> embedding;
  if (is_embedding_stage(coord.pp, dims.pp))
    embedding = std::make_unique<ThreadCommunicator>(embedding_group, coord.pp == 0 ? 0 : 1, mode);
  return {std::move(pp), std::move(embedding)};
}

int embedding_group_size(int pp) {
  return pp == 1 ? 1 : 2;
}

}  // namespace

std::vector<std::unique_ptr<comm::Grid>> make_thread_grids(const ParallelDims& dims,
                                                           ReduceMode mode) {
  dims.check();
  const int world_size = static_cast<int>(dims.world());
  // Indexed like make_mpi_grid's split colors: DP group pp * tp + tp, TP group pp * dp + dp, PP
  // and embedding group dp * tp + tp.
  auto world = std::make_shared<Group>(world_size);
  const auto dp_groups = make_groups(dims.pp * dims.tp, dims.dp);
  const auto tp_groups = make_groups(dims.pp * dims.dp, dims.tp);
  const auto pp_groups = make_groups(dims.dp * dims.tp, dims.pp);
  const auto embedding_groups = make_groups(dims.dp * dims.tp, embedding_group_size(dims.pp));
  std::vector<std::unique_ptr<comm::Grid>> grids;
  for (int w = 0; w < world_size; ++w) {
    const GridCoord c = dims.coord(w);
    const int line = c.dp * dims.tp + c.tp;
    auto [pp, embedding] =
        pipeline_communicators(dims, c, pp_groups[line], embedding_groups[line], mode);
    grids.push_back(std::make_unique<comm::Grid>(
        dims, c, std::make_unique<ThreadCommunicator>(world, w, mode),
        std::make_unique<ThreadCommunicator>(dp_groups[c.pp * dims.tp + c.tp], c.dp, mode),
        std::make_unique<ThreadCommunicator>(tp_groups[c.pp * dims.dp + c.dp], c.tp, mode),
        std::move(pp), std::move(embedding)));
  }
  return grids;
}

std::vector<comm::ExpertGroups> make_thread_expert_groups(const ParallelDims& dims,
                                                          ReduceMode mode) {
  dims.check();
  const int ep = dims.ep, etp = dims.etp, pp = dims.pp, edp = dims.edp();
  // Indexed like make_mpi_expert_groups's split colors.
  const auto slices = make_groups(ep, edp * etp * pp);
  const auto edp_groups = make_groups(pp * ep * etp, edp);
  const auto etp_groups = make_groups(pp * edp * ep, etp);
  const auto ep_groups = make_groups(pp * edp * etp, ep);
  const auto pp_groups = make_groups(ep * edp * etp, pp);
  const auto embedding_groups = make_groups(ep * edp * etp, embedding_group_size(pp));
  const ParallelDims expert_dims{.dp = edp, .tp = etp, .pp = pp};
  std::vector<comm::ExpertGroups> out;
  for (int w = 0; w < dims.world(); ++w) {
    const GridCoord g = dims.coord(w);
    comm::ExpertGroups e;
    e.coord = dims.expert_coord(g.dp, g.tp);
    const ExpertCoord& c = e.coord;
    const GridCoord coord{g.pp, c.edp, c.etp};
    const int line = (c.ep * edp + c.edp) * etp + c.etp;
    auto [pp_comm, embedding] =
        pipeline_communicators(expert_dims, coord, pp_groups[line], embedding_groups[line], mode);
    e.grid = std::make_unique<comm::Grid>(
        expert_dims, coord,
        std::make_unique<ThreadCommunicator>(slices[c.ep], expert_dims.rank(coord), mode),
        std::make_unique<ThreadCommunicator>(edp_groups[(g.pp * ep + c.ep) * etp + c.etp], c.edp,
                                             mode),
        std::make_unique<ThreadCommunicator>(etp_groups[(g.pp * edp + c.edp) * ep + c.ep], c.etp,
                                             mode),
        std::move(pp_comm), std::move(embedding));
    e.ep = std::make_unique<ThreadCommunicator>(ep_groups[(g.pp * edp + c.edp) * etp + c.etp], c.ep,
                                                mode);
    out.push_back(std::move(e));
  }
  return out;
}

void run_on_thread_grid(const ParallelDims& dims, ReduceMode mode,
                        const std::function<void(comm::Grid&)>& body) {
  std::vector<std::unique_ptr<comm::Grid>> grids = make_thread_grids(dims, mode);
  std::mutex mutex;
  std::exception_ptr first;  // guarded by mutex
  const auto run_rank = [&](std::unique_ptr<comm::Grid> grid) {
    try {
      body(*grid);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!first) first = std::current_exception();
    }
    // The Grid goes only after a failure is recorded, so failures it causes elsewhere come later.
  };
  std::vector<std::thread> threads;
  try {
    for (auto& grid : grids) threads.emplace_back(run_rank, std::move(grid));
  } catch (...) {
    grids.clear();  // ranks never started depart, so started ones fail instead of hanging
    for (std::thread& t : threads) t.join();
    throw;
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace canzona::comm
