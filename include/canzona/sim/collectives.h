// α-β costs of the collectives the strategies use (Hockney model, ring algorithms as NCCL runs
// them on one channel).
//
// Terms. p ranks; α = link latency per step (s), β = link bandwidth (bytes/s). `bytes` is the
// size of the whole buffer each rank holds (for Reduce-Scatter its input, for All-Gather its
// output). A ring runs p-1 steps per phase, each moving one chunk per rank over one hop:
//   Reduce-Scatter, All-Gather:  (p-1)/p · n/β + (p-1)·α
//   All-Reduce (RS then AG):     2(p-1)/p · n/β + 2(p-1)·α
// With variable chunk sizes (Canzona's cuts) every step waits for the largest chunk:
//   Reduce-Scatter-v, All-Gather-v:  (p-1) · (max_chunk/β + α)
// All-to-All over a switch (NVSwitch), every rank sending and receiving at once:
//   (p-1)·α + max over ranks of max(bytes sent, bytes received off-rank) / β
// Every function returns 0 for p == 1, and requires p >= 1 and sizes >= 0 (CANZONA_CHECK).
#pragma once

#include "canzona/sim/cluster.h"

namespace canzona::sim {

double ring_reduce_scatter_s(const Link& link, int p, double bytes);
double ring_all_gather_s(const Link& link, int p, double bytes);
double ring_all_reduce_s(const Link& link, int p, double bytes);
double ring_reduce_scatter_v_s(const Link& link, int p, double max_chunk_bytes);
double ring_all_gather_v_s(const Link& link, int p, double max_chunk_bytes);
double all_to_all_s(const Link& link, int p, double max_rank_bytes);

}  // namespace canzona::sim
