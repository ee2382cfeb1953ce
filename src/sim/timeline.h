// Discrete-event schedules of one compute stream and one communication stream per rank, used to
// decide how much communication a strategy exposes.
//
// Terms. A *comm stream* runs collectives one at a time in posting order (NCCL on one stream); a
// collective over several ranks starts when every rank has posted it and the stream is free.
// *Exposed* time is what the critical path gains because of communication.
#pragma once

#include <vector>

namespace canzona::sim {

// Gradient sync overlapped with backward: message i becomes ready at ready_s[i] (nondecreasing,
// within the window) and takes comm_s[i]; the stream runs them FIFO. Returns how far the last
// message ends past `window_s` (the end of the backward pass), or 0. Requires equal sizes.
// With ready times spread over the window this reduces to "only the last bucket is exposed
// unless the total communication exceeds the compute".
double exposed_after_window(const std::vector<double>& ready_s, const std::vector<double>& comm_s,
                            double window_s);

// Param all-gather overlapped with forward: every message is posted at time 0 and runs FIFO
// (message i ends at comm_s[0] + ... + comm_s[i]); the forward pass needs message i at need_s[i]
// of its own (un-delayed) time. Returns the total stall, max over i of (end_i - need_i), or 0.
double stall_before_needs(const std::vector<double>& comm_s, const std::vector<double>& need_s);

// ZeRO-3: one forward or backward pass over segments (buckets) in pass order. Segment i computes
// for compute_s[i] once its params are gathered (gather_s[i]; 0 for a bucket still gathered). The
// gather of segment 0 is posted at time 0 and that of segment i + 1 when segment i starts (one
// prefetched), on one FIFO comm stream that also runs after_s[i], posted when segment i ends (the
// backward's gradient Reduce-Scatter; 0 for none). Requires equal sizes.
struct PassTimeline {
  double compute_end_s = 0.0;  // end of the last segment's compute
  double stream_end_s = 0.0;   // end of the last collective
  double compute_s = 0.0;      // sum of compute_s: compute_end_s - compute_s is the stall
};
PassTimeline run_prefetched_pass(const std::vector<double>& compute_s,
                                 const std::vector<double>& gather_s,
                                 const std::vector<double>& after_s);

// One TP micro group: per-host compute seconds (size = TP), the fused gradient All-to-All before
// and the update All-to-All after.
struct GroupCost {
  std::vector<double> compute_s;  // [host]
  double gather_s = 0.0;
  double scatter_s = 0.0;
};

struct TpTimeline {
  double total_s = 0.0;    // from posting the first gather to the end of the last scatter
  double compute_s = 0.0;  // the same schedule with every collective taking zero time: the sum
                           // over groups of max over hosts when sequential, no more when
                           // pipelined (a light host may start the next group early)
  double exposed_comm_s() const { return total_s - compute_s; }  // >= 0 (max-plus monotone)
};

// Runs the micro groups in order on tp ranks. Sequential (the official code): gather k, compute k,
// scatter k, then group k+1. Pipelined (docs/design.md section 4): each rank posts gather k+1 just
// before it starts computing group k, and scatter k when it finishes group k; collectives keep
// posting order G1, G2, S1, G3, S2, ..., GK, S(K-1), SK. Requires every compute_s to have the same
// size; an empty list gives zeros.
TpTimeline run_micro_groups(const std::vector<GroupCost>& groups, bool pipelined);

}  // namespace canzona::sim
