// α-β costs of the collectives the strategies use (Hockney model, ring algorithms as NCCL runs
// them on one channel).
//
// Terms. p ranks; α = link latency per step (s), β = link bandwidth (bytes/s). `bytes` is the
// size of the whole buffer each rank holds (for Reduce-Scatter its input, for All-Gather its
// output). A ring runs p-1 steps per phase, each moving one chunk per rank over one hop:
//   Reduce-Scatter, All-Gather:  (p-1)/p · n/β + (p-1)·α
//   All-Reduce (RS then AG):     2(p-1)/p · n/β + 2(p-1)·α
// Variable chunk sizes c_0..c_{p-1} (Canzona's cuts; n = Σ c_r), three implementations:
//   kGrouped (default; PyTorch's uneven reduce_scatter / all_gather on NCCL): one pipelined ring
//     Reduce (Broadcast) per chunk, rooted at its owner, all in one group. The chain of chunk r
//     skips one link of the ring, so the busiest link carries n - min_r c_r:
//       (n - min c) / β + (p-1)·α
//   kPadded: a plain ring over chunks padded to the largest one:
//       (p-1) · (max c / β + α)
//   kDirect (Canzona's MPI runtime in its deterministic reduce mode: a Reduce-Scatter is one
//     All-to-All-v, each rank sending each other rank its block; the All-Gather-v and the
//     All-Reduce's phases likewise): with g = link.ranks_per_node ranks per node (consecutive
//     ranks share a node), the bytes leaving node A are, per group,
//       Reduce-Scatter:  g_A · Σ_{r ∉ A} c_r      All-Gather:  (p - g_A) · Σ_{r ∈ A} c_r
//     and those entering it Σ_{i ∉ A} Σ_{r ∈ A} c_r = (p - g_A)·Σ_{r∈A} c_r (Reduce-Scatter),
//     g_A · Σ_{r ∉ A} c_r (All-Gather); a node's NICs carry nic_share times that at once (every
//     TP rank's group), so the time is α + max over nodes and directions of nic_share · bytes / β.
//     On one node (ranks_per_node 0): α + max over ranks of bytes sent or received / β. An
//     All-Reduce of n bytes is the Reduce-Scatter then the All-Gather of the even split.
// Both ring forms equal the plain ring when the chunks are equal. A ring crossing nodes carries
// one flow per group over each node's NICs: its β is divided by max(1, nic_share).
// All-to-All over a switch (NVSwitch), every rank sending and receiving at once:
//   (p-1)·α + max over ranks of max(bytes sent, bytes received off-rank) / β
// Every function returns 0 for p == 1, and requires p >= 1 and sizes >= 0 (CANZONA_CHECK).
#pragma once

#include <string>
#include <vector>

#include "canzona/sim/cluster.h"

namespace canzona::sim {

double ring_reduce_scatter_s(const Link& link, int p, double bytes);
double ring_all_gather_s(const Link& link, int p, double bytes);
double ring_all_reduce_s(const Link& link, int p, double bytes);
enum class VarCollective { kGrouped, kPadded, kDirect };
// "grouped" | "padded" | "direct"; UsageError
VarCollective parse_var_collective(const std::string& name);
const char* to_string(VarCollective kind);

// p = chunk_bytes.size().
double reduce_scatter_v_s(const Link& link, const std::vector<double>& chunk_bytes,
                          VarCollective kind);
double all_gather_v_s(const Link& link, const std::vector<double>& chunk_bytes, VarCollective kind);
double all_to_all_s(const Link& link, int p, double max_rank_bytes);
// All-Reduce of `bytes` per rank: the ring, or under kDirect the direct Reduce-Scatter and
// All-Gather of the even split.
double all_reduce_s(const Link& link, int p, double bytes, VarCollective kind);

}  // namespace canzona::sim
