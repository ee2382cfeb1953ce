// Cluster presets, JSON reading and rank placement (cluster.h).
//
// Preset sources (vendor data sheets; achieved bandwidths are NCCL-typical fractions of nominal):
//   H100 SXM5: 989.4 dense bf16 / 494.7 dense TF32 / 66.9 fp32 TFLOP/s, 3.35 TB/s HBM3.
//   H200 SXM:  same tensor-core peaks as H100, 4.8 TB/s HBM3e.
//   NVLink 4 + NVSwitch: 450 GB/s per direction per GPU nominal -> 360 GB/s achieved (80%).
//   InfiniBand NDR: 400 Gb/s = 50 GB/s per GPU (one NIC per GPU) -> 45 GB/s achieved (90%).
// Estimates, not measurements (docs/simulator.md): forward-backward reaches 45% of the bf16 peak
// (MFU of Megatron dense models at this scale), the optimizer's fp32 GEMMs 50% of the TF32 peak,
// each optimizer task costs 50 us of launches and small kernels, and eigh / QR (cuSOLVER, fp32,
// n ~ 1-10K) reach 5 TFLOP/s.
#include "canzona/sim/cluster.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::sim {

Precision parse_precision(const std::string& name) {
  if (name == "bf16") return Precision::kBf16;
  if (name == "tf32") return Precision::kTf32;
  if (name == "fp32") return Precision::kFp32;
  throw UsageError(str("unknown precision '", name, "' (expected bf16, tf32 or fp32)"));
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp32:
      return "fp32";
  }
  return "?";
}

double Device::optimizer_flops_per_s() const {
  double peak = optimizer_precision == Precision::kBf16   ? bf16_tflops
                : optimizer_precision == Precision::kTf32 ? tf32_tflops
                                                          : fp32_tflops;
  return peak * 1e12 * optimizer_efficiency;
}

double Device::fwd_bwd_flops_per_s() const {
  return bf16_tflops * 1e12 * matmul_efficiency;
}

namespace {

Cluster h100_node(const std::string& name) {
  Cluster c;
  c.name = name;
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  c.intra_node = {360.0, 3.0};
  c.inter_node = {45.0, 8.0};
  c.device.name = "H100 SXM5 80GB";
  c.device.bf16_tflops = 989.4;
  c.device.tf32_tflops = 494.7;
  c.device.fp32_tflops = 66.9;
  c.device.hbm_GBps = 3350.0;
  c.device.matmul_efficiency = 0.45;
  c.device.optimizer_efficiency = 0.5;
  c.device.optimizer_precision = Precision::kTf32;
  c.device.optimizer_task_overhead_us = 50.0;
  c.device.factorization_tflops = 5.0;
  return c;
}

}  // namespace

std::vector<std::string> cluster_preset_names() {
  return {"h100-8", "h200-8"};
}

Cluster cluster_preset(const std::string& name) {
  if (name == "h100-8") return h100_node(name);
  if (name == "h200-8") {
    Cluster c = h100_node(name);
    c.device.name = "H200 SXM 141GB";
    c.device.hbm_GBps = 4800.0;
    return c;
  }
  std::string known;
  for (const auto& n : cluster_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError(str("unknown cluster preset '", name, "' (known: ", known,
                       "; or give a path to a JSON file)"));
}

nlohmann::json to_json(const Cluster& c) {
  auto link = [](const Link& l) {
    return nlohmann::json{{"bandwidth_GBps", l.bandwidth_GBps}, {"latency_us", l.latency_us}};
  };
  const Device& d = c.device;
  return {{"name", c.name},
          {"gpus_per_node", c.gpus_per_node},
          {"nics_per_node", c.nics_per_node},
          {"intra_node", link(c.intra_node)},
          {"inter_node", link(c.inter_node)},
          {"device",
           {{"name", d.name},
            {"bf16_tflops", d.bf16_tflops},
            {"tf32_tflops", d.tf32_tflops},
            {"fp32_tflops", d.fp32_tflops},
            {"hbm_GBps", d.hbm_GBps},
            {"matmul_efficiency", d.matmul_efficiency},
            {"optimizer_efficiency", d.optimizer_efficiency},
            {"optimizer_precision", to_string(d.optimizer_precision)},
            {"optimizer_task_overhead_us", d.optimizer_task_overhead_us},
            {"factorization_tflops", d.factorization_tflops}}}};
}

namespace {

// Reads the fields of one JSON object against defaults from a base preset (if any). Every error
// names `where` and the dotted key.
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& object, const nlohmann::json* base, std::string where,
               std::string prefix)
      : object_(object), base_(base), where_(std::move(where)), prefix_(std::move(prefix)) {
    if (!object_.is_object()) fail("", "expected an object");
  }

  const nlohmann::json& field(const std::string& key) {
    seen_.insert(key);
    if (object_.contains(key)) return object_.at(key);
    if (base_ != nullptr && base_->contains(key)) return base_->at(key);
    fail(key, "missing (give it, or \"base\": \"<preset>\" to inherit it)");
  }

  // The number at `key`; fails unless it is finite and lies in [lo, hi], naming `limit`.
  double number(const std::string& key, double lo, double hi, const char* limit) {
    const auto& v = field(key);
    if (!v.is_number()) fail(key, "expected a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      fail(key, str("value ", x, " must lie in [", lo, ", ", hi, "] (", limit, ")"));
    }
    return x;
  }

  // The string at `key`; fails unless it has 1..kMaxClusterNameChars bytes and no control
  // characters (UTF-8 is fine).
  std::string string(const std::string& key) {
    const auto& v = field(key);
    if (!v.is_string()) fail(key, "expected a string");
    std::string text = v.get<std::string>();
    if (text.empty() || text.size() > kMaxClusterNameChars) {
      fail(key, str("length ", text.size(), " must lie in [1, ", kMaxClusterNameChars,
                    "] (kMaxClusterNameChars)"));
    }
    for (unsigned char c : text) {
      if (c < 0x20 || c == 0x7f) fail(key, "control characters are not allowed");
    }
    return text;
  }

  // Throws for keys neither read nor listed in `also_allowed`.
  void reject_unknown(const std::set<std::string>& also_allowed = {}) {
    for (const auto& item : object_.items()) {
      if (!seen_.count(item.key()) && !also_allowed.count(item.key())) {
        fail(item.key(), "unknown key");
      }
    }
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    std::string name = prefix_ + key;
    if (!name.empty() && name.back() == '.') name.pop_back();
    throw UsageError(str(where_, ": key '", name.empty() ? "<root>" : name, "': ", problem));
  }

 private:
  const nlohmann::json& object_;
  const nlohmann::json* base_;
  std::string where_;
  std::string prefix_;
  std::set<std::string> seen_;
};

Link read_link(ObjectReader& parent, const std::string& key, const nlohmann::json* base,
               const std::string& where) {
  const auto& obj = parent.field(key);
  const nlohmann::json* sub = base != nullptr && base->contains(key) ? &base->at(key) : nullptr;
  ObjectReader r(obj, sub, where, key + ".");
  Link link;
  link.bandwidth_GBps = r.number("bandwidth_GBps", kMinBandwidthGBps, kMaxBandwidthGBps,
                                 "kMinBandwidthGBps, kMaxBandwidthGBps");
  link.latency_us = r.number("latency_us", 0.0, kMaxLatencyUs, "kMaxLatencyUs");
  r.reject_unknown();
  return link;
}

}  // namespace

Cluster cluster_from_json(const nlohmann::json& value, const std::string& where) {
  nlohmann::json base_json;
  const nlohmann::json* base = nullptr;
  if (value.is_object() && value.contains("base")) {
    if (!value.at("base").is_string()) {
      throw UsageError(str(where, ": key 'base': expected a preset name"));
    }
    base_json = to_json(cluster_preset(value.at("base").get<std::string>()));
    base = &base_json;
  }
  ObjectReader root(value, base, where, "");
  Cluster c;
  c.name = root.string("name");
  const double gpus = root.number("gpus_per_node", 1.0, kMaxGpusPerNode, "kMaxGpusPerNode");
  if (gpus != std::floor(gpus)) root.fail("gpus_per_node", "expected an integer");
  c.gpus_per_node = static_cast<int>(gpus);
  // Optional, and never inherited from a base (whose gpus_per_node may differ): one NIC per GPU
  // unless the file says otherwise.
  c.nics_per_node = c.gpus_per_node;
  if (value.contains("nics_per_node")) {
    const double nics = root.number("nics_per_node", 1.0, gpus, "1, gpus_per_node");
    if (nics != std::floor(nics)) root.fail("nics_per_node", "expected an integer");
    c.nics_per_node = static_cast<int>(nics);
  }
  c.intra_node = read_link(root, "intra_node", base, where);
  c.inter_node = read_link(root, "inter_node", base, where);

  const nlohmann::json* dev_base = base != nullptr ? &base->at("device") : nullptr;
  ObjectReader dev(root.field("device"), dev_base, where, "device.");
  Device& d = c.device;
  d.name = dev.string("name");
  d.bf16_tflops = dev.number("bf16_tflops", kMinTflops, kMaxTflops, "kMinTflops, kMaxTflops");
  d.tf32_tflops = dev.number("tf32_tflops", kMinTflops, kMaxTflops, "kMinTflops, kMaxTflops");
  d.fp32_tflops = dev.number("fp32_tflops", kMinTflops, kMaxTflops, "kMinTflops, kMaxTflops");
  d.hbm_GBps = dev.number("hbm_GBps", kMinBandwidthGBps, kMaxBandwidthGBps,
                          "kMinBandwidthGBps, kMaxBandwidthGBps");
  d.matmul_efficiency = dev.number("matmul_efficiency", kMinEfficiency, 1.0, "kMinEfficiency, 1");
  d.optimizer_efficiency =
      dev.number("optimizer_efficiency", kMinEfficiency, 1.0, "kMinEfficiency, 1");
  try {
    d.optimizer_precision = parse_precision(dev.string("optimizer_precision"));
  } catch (const UsageError& e) {
    dev.fail("optimizer_precision", e.what());
  }
  d.optimizer_task_overhead_us =
      dev.number("optimizer_task_overhead_us", 0.0, kMaxTaskOverheadUs, "kMaxTaskOverheadUs");
  d.factorization_tflops =
      dev.number("factorization_tflops", kMinTflops, kMaxTflops, "kMinTflops, kMaxTflops");
  dev.reject_unknown();
  root.reject_unknown({"base"});
  return c;
}

Cluster load_cluster(const std::string& arg) {
  const auto names = cluster_preset_names();
  if (std::find(names.begin(), names.end(), arg) != names.end()) return cluster_preset(arg);
  if (!std::filesystem::exists(arg)) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw UsageError(
        str("--cluster '", arg, "' is neither a preset (", known, ") nor an existing JSON file"));
  }
  return cluster_from_json(read_json_file(arg), arg);
}

Link tp_link(const Cluster& cluster, int tp) {
  CANZONA_REQUIRE(tp >= 1 && tp <= cluster.gpus_per_node, "tp=", tp, " must lie in [1, ",
                  cluster.gpus_per_node, "] (a TP group stays inside one node of cluster '",
                  cluster.name, "')");
  return cluster.intra_node;
}

Link dp_link(const Cluster& cluster, int dp, int tp) {
  if (static_cast<long long>(dp) * tp <= cluster.gpus_per_node) return cluster.intra_node;
  Link link = cluster.inter_node;
  link.ranks_per_node = std::max(1, cluster.gpus_per_node / std::max(1, tp));
  link.nic_share = static_cast<double>(std::min(tp, cluster.gpus_per_node)) / cluster.nics_per_node;
  return link;
}

Link pp_link(const Cluster& cluster, int dp, int tp) {
  return 2LL * dp * tp <= cluster.gpus_per_node ? cluster.intra_node : cluster.inter_node;
}

}  // namespace canzona::sim
