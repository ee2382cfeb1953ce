// The cluster the simulator projects a Plan onto: nodes of identical GPUs, an intra-node fabric
// (NVLink/NVSwitch) and an inter-node fabric (InfiniBand; one NIC per GPU in the presets,
// nics_per_node shared by a node's GPUs otherwise), each an α-β link.
//
// Terms. A *link* costs α (latency, seconds per message step) + bytes / β (achieved bandwidth,
// bytes per second, one direction, per GPU or NIC). *Rank placement* follows Megatron's default
// order (TP fastest, then DP, then PP): the TP group of a rank is tp consecutive GPUs inside one
// node, and a DP group (stride tp) uses the inter-node link as soon as dp * tp exceeds a node.
// Rates are dense peak TFLOP/s per GPU; an *efficiency* in (0, 1] turns a peak into what a
// workload achieves.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace canzona::sim {

// Limits of a cluster description (cluster_from_json). Today's parts sit orders of magnitude
// inside them (NVLink 360-900 GB/s, InfiniBand 25-100 GB/s, H100 989 bf16 TFLOP/s, 3.35 TB/s
// HBM, 3-10 us latencies, 8-72 GPUs per NVLink domain); the bounds keep every simulated time
// finite and positive for any model and workload simulate accepts.
inline constexpr int kMaxGpusPerNode = 1024;              // gpus_per_node in [1, 1024]
inline constexpr double kMinBandwidthGBps = 1e-3;         // link and HBM bandwidth in
inline constexpr double kMaxBandwidthGBps = 1e6;          //   [1 MB/s, 1 PB/s]
inline constexpr double kMaxLatencyUs = 1e6;              // latency_us in [0, 1 s]
inline constexpr double kMinTflops = 1e-3;                // every TFLOP/s rate in
inline constexpr double kMaxTflops = 1e6;                 //   [1 GFLOP/s, 1 EFLOP/s]
inline constexpr double kMinEfficiency = 1e-3;            // efficiencies in [0.001, 1]
inline constexpr double kMaxTaskOverheadUs = 1e6;         // optimizer_task_overhead_us in [0, 1 s]
inline constexpr std::size_t kMaxClusterNameChars = 256;  // name, device.name: no control chars

struct Link {
  double bandwidth_GBps = 0.0;  // achieved one-direction bandwidth per GPU (per NIC between
                                // nodes), 1e9 bytes/s
  double latency_us = 0.0;      // α per message step, microseconds
  // Placement of a DP group on this link (set by dp_link; the defaults: one node, or a link used
  // by one flow at a time): the group's ranks per node (0 = every rank on one node), and how
  // many NICs' worth of the same traffic a node's NICs carry at once: the concurrent groups per
  // node (one per TP rank) over the node's NICs.
  int ranks_per_node = 0;
  double nic_share = 1.0;

  double beta() const { return bandwidth_GBps * 1e9; }  // bytes per second
  double alpha() const { return latency_us * 1e-6; }    // seconds
};

// Numeric format the matrix optimizer's GEMMs run in, selecting a peak rate of the Device.
enum class Precision { kBf16, kTf32, kFp32 };
Precision parse_precision(const std::string& name);  // "bf16" | "tf32" | "fp32"; UsageError
const char* to_string(Precision precision);

struct Device {
  std::string name;
  double bf16_tflops = 0.0;           // dense bf16 tensor-core peak (forward-backward GEMMs)
  double tf32_tflops = 0.0;           // dense TF32 tensor-core peak
  double fp32_tflops = 0.0;           // non-tensor-core fp32 peak
  double hbm_GBps = 0.0;              // memory bandwidth (element-wise AdamW is memory bound)
  double matmul_efficiency = 0.0;     // achieved / peak for forward-backward (MFU-like)
  double optimizer_efficiency = 0.0;  // achieved / peak for the matrix optimizer's GEMMs
  Precision optimizer_precision = Precision::kTf32;
  double optimizer_task_overhead_us = 0.0;  // fixed cost per optimizer task (kernel launches)
  double factorization_tflops = 0.0;        // achieved rate of eigh / QR (cuSOLVER), far below GEMM

  // Achieved FLOP/s of the matrix optimizer: peak of optimizer_precision * optimizer_efficiency.
  double optimizer_flops_per_s() const;
  // Achieved FLOP/s of forward-backward: bf16 peak * matmul_efficiency.
  double fwd_bwd_flops_per_s() const;
};

struct Cluster {
  std::string name;
  int gpus_per_node = 8;
  int nics_per_node = 8;  // NICs per node sharing inter_node traffic (the presets: one per GPU)
  Link intra_node;        // NVLink inside a node
  Link inter_node;        // InfiniBand between nodes, per NIC (nics_per_node of them per node)
  Device device;
};

// Built-in presets, in a stable order: "h100-8", "h200-8".
std::vector<std::string> cluster_preset_names();
// Throws UsageError listing the presets when `name` is unknown.
Cluster cluster_preset(const std::string& name);

// Parses a cluster description. Every key of to_json(Cluster) is required unless the object has
// "base": "<preset>", whose values fill the missing keys; except nics_per_node, optional and
// never inherited: absent, it is gpus_per_node (an integer in [1, gpus_per_node] when given).
// Throws UsageError "<where>: key '<k>': <problem>" for a missing key, a wrong type, a number that
// is not finite or lies outside its limit above (the message names the limit), a non-integer
// gpus_per_node, a name that is empty, longer than kMaxClusterNameChars bytes or holding a control
// character, or an unknown key.
Cluster cluster_from_json(const nlohmann::json& value, const std::string& where);
nlohmann::json to_json(const Cluster& cluster);

// Resolves --cluster: a preset name, else a path to a JSON file (cluster_from_json). Throws
// UsageError naming the argument and the presets when it is neither.
Cluster load_cluster(const std::string& arg);

// Link of a TP group (tp GPUs in one node). Throws UsageError when tp > gpus_per_node.
Link tp_link(const Cluster& cluster, int tp);
// Link of a DP group under Megatron placement: intra_node when dp * tp <= gpus_per_node, else
// inter_node (a ring is as slow as its slowest hop) with ranks_per_node = max(1, gpus_per_node /
// tp) and nic_share = min(tp, gpus_per_node) / nics_per_node (the DP groups of a node's TP ranks
// move at once).
Link dp_link(const Cluster& cluster, int dp, int tp);
// Link between neighbouring pipeline stages under Megatron placement (stages outermost): a rank
// and its peer on the next stage are dp x tp ranks apart, on one node when dp x tp x 2 <=
// gpus_per_node, else on two.
Link pp_link(const Cluster& cluster, int dp, int tp);

}  // namespace canzona::sim
