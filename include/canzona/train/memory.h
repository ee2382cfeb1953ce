// Memory a training run needs per rank, estimated before anything is allocated, and the memory
// this machine can give it. `canzona train` refuses a run that does not fit with one line naming
// the need and what is available, before any rank trains (so a typo such as --micro-batch 100000
// is a usage error, not an allocation failure deep inside libtorch).
//
// The estimate (bytes per rank of a DP x TP grid; e the bytes of an element of the buffer's dtype:
// 4 for fp32, 2 for bf16, --precision; gradients 4 under --grad-reduce-in-fp32):
//   params      the engine's parameter buffer: every param's TP-local elements x e
//   grads       the engine's gradient buffer, the same elements at the gradients' e
//   (ZeRO-3)    params: the DP shard (local / DP plus the largest param) and two gathered buckets;
//               grads: two buckets, or the whole buffer when micro-batches accumulate
//   optimizer   ZeRO-1 state: every task's state (cost::state_bytes of its optimizer and shape)
//               summed over the model, / (DP x TP), plus the largest single task's state (DP
//               buckets are cut at param boundaries, so a rank holds at most one task beyond the
//               mean; a TP task's whole-matrix state lives on one TP rank)
//   buffers     communication and gathered-matrix buffers: an fp32 main copy of every task the
//               rank computes (element-wise ones included, which only bf16 keeps: an upper
//               bound in fp32), and under a reduce-scatter the DP shard of the gradients
//   activations what autograd keeps for one micro-batch (T = micro_batch x seq_len tokens, layers
//               L, hidden H, TP-local heads n, KV heads g, head_dim d, FFN F, vocabulary V):
//               T x 4 x [ (L + 1) (8 H + 11 n d + 9 g d + 4 F + n S) + 2 n S + 6 V / TP + 4 H ]
//               with S = seq_len: per layer the saved norms, q/k/v and their RoPE copies, the
//               softmax output (n S per token: the S x S scores), the MLP's three F-wide tensors;
//               one extra layer for backward's gradients, the two transient score tensors, the
//               logits and the cross-entropy's softmax; fp32 (under bf16 an upper bound: the
//               activations are bf16, SwiGLU's saved sigmoid and RMSNorm's inverse rms fp32)
//   runtime     libtorch, MPI and the process itself: kRuntimeBytes
// --verify adds, on world rank 0, the single-process reference (TP = 1, DP = 1) after training.
//
// Pipeline stages (PP > 1): each stage's ranks hold that stage's params (model::assign_stages;
// the last stage also the copy of a tied embedding) with their gradients, state and buffers; 1F1B
// keeps the activations of min(PP - s, grad_accum) micro-batches on stage s, each for the stage's
// layers only; the logits and cross-entropy terms are the last stage's. A tied embedding adds
// its gradients in flight to the buffers: min(PP, grad_accum) of them on the last stage, one on
// the first. The run needs the largest stage's estimate per rank (the first and the last stage
// differ).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canzona/model/load.h"
#include "canzona/model/spec.h"
#include "canzona/train/trainer.h"

namespace canzona::train {

// Resident memory of a training process before its model is allocated (libtorch, OpenMPI,
// OpenBLAS buffers), measured at 0.25-0.3 GB here and rounded up.
inline constexpr double kRuntimeBytes = 512.0 * 1024 * 1024;

struct MemoryNeed {
  double params_bytes = 0.0;
  double grads_bytes = 0.0;
  double optimizer_state_bytes = 0.0;
  double buffer_bytes = 0.0;
  double activations_bytes = 0.0;
  double runtime_bytes = kRuntimeBytes;
  int stage = 0;  // the pipeline stage whose need this is
  double total() const;
};

// Per-rank need of training `spec` (built from `config`) with `options` (grid, optimizer, sizes).
// Pure: no allocation, no files. Doubles, so absurd sizes give a huge number, never an overflow.
// Under PP > 1: the largest of estimate_stage_memory's.
MemoryNeed estimate_memory(const model::TransformerConfig& config, const model::ModelSpec& spec,
                           const TrainOptions& options);
// Per pipeline stage, [stage] (one entry at PP 1).
std::vector<MemoryNeed> estimate_stage_memory(const model::TransformerConfig& config,
                                              const model::ModelSpec& spec,
                                              const TrainOptions& options);

// The single-process reference of --verify (TP = 1, DP = 1, the whole model and its state).
MemoryNeed estimate_reference_memory(const model::TransformerConfig& config,
                                     const model::ModelSpec& spec, const TrainOptions& options);

// Memory this process may use: the smaller of MemAvailable (/proc/meminfo) and the cgroup's limit
// less its usage (cgroup v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
// memory.usage_in_bytes); `source` names which one bounds it. bytes < 0 when neither is readable.
struct MemoryAvailable {
  double bytes = -1.0;
  std::string source;
};
MemoryAvailable available_memory();

// Ranks of this launch on this machine: OMPI_COMM_WORLD_LOCAL_SIZE (or MPI_LOCALNRANKS), 1 when
// not launched by MPI.
int ranks_on_this_node();

// Throws UsageError when `ranks` ranks of `need` (each) exceed `available`: one line with the
// need per rank and its parts, the ranks on this node, the total and what is available, and which
// flags lower it. Nothing when available.bytes < 0 (unknown).
void check_memory_fits(const MemoryNeed& need, int ranks, const MemoryAvailable& available,
                       const TrainOptions& options);

// Measured memory of this process, bytes (-1 when the system does not say). resident_bytes and
// peak_resident_bytes are VmRSS and VmHWM of /proc/self/status; reset_peak_resident sets the peak
// to the current resident size (writes 5 to /proc/self/clear_refs; false when it cannot);
// heap_in_use_bytes is what the allocator has handed out and not taken back (tcmalloc's
// generic.current_allocated_bytes when it is the process's malloc, else glibc's mallinfo2): where
// libtorch's tensors live (the engine's buffers are their own mappings, not on the heap).
std::int64_t resident_bytes();
std::int64_t peak_resident_bytes();
bool reset_peak_resident();
std::int64_t heap_in_use_bytes();

// "1.5 GiB", "312.0 MiB", "12 KiB".
std::string format_bytes(double bytes);

}  // namespace canzona::train
