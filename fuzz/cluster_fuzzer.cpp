// Fuzz target: the cluster file reader behind --cluster FILE (sim::load_cluster: json_io's strict
// reader, then cluster_from_json with "base" presets). A cluster that loads must have positive
// rates and bandwidths, efficiencies in (0, 1], non-negative latencies and gpus_per_node >= 1
// (cluster.h), and must survive to_json -> cluster_from_json, tp_link and dp_link.
// Seeds: fuzz/corpus/cluster/ (tests/sim/data and the built-in presets written out).
#include "canzona/sim/cluster.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"

using namespace canzona;

namespace {
bool positive(double x) {
  return std::isfinite(x) && x > 0.0;
}
bool efficiency(double x) {
  return std::isfinite(x) && x > 0.0 && x <= 1.0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::scratch_file("cluster", data, size);
  fuzz::expect_success_or_usage_error("load_cluster", [&] {
    const sim::Cluster c = sim::load_cluster(path);
    const sim::Device& d = c.device;
    if (c.gpus_per_node < 1) fuzz::finding("gpus_per_node < 1 accepted");
    if (!positive(c.intra_node.bandwidth_GBps) || !positive(c.inter_node.bandwidth_GBps)) {
      fuzz::finding("non-positive or non-finite bandwidth accepted");
    }
    if (!(c.intra_node.latency_us >= 0.0) || !(c.inter_node.latency_us >= 0.0) ||
        !std::isfinite(c.intra_node.latency_us) || !std::isfinite(c.inter_node.latency_us)) {
      fuzz::finding("negative or non-finite latency accepted");
    }
    if (!positive(d.bf16_tflops) || !positive(d.tf32_tflops) || !positive(d.fp32_tflops) ||
        !positive(d.hbm_GBps) || !positive(d.factorization_tflops)) {
      fuzz::finding("non-positive or non-finite device rate accepted");
    }
    if (!efficiency(d.matmul_efficiency) || !efficiency(d.optimizer_efficiency)) {
      fuzz::finding("efficiency outside (0, 1] accepted");
    }
    const sim::Cluster again = sim::cluster_from_json(sim::to_json(c), "round trip");
    if (again.gpus_per_node != c.gpus_per_node) fuzz::finding("to_json round trip changed it");
    for (int tp : {1, 2, 8}) {
      fuzz::expect_success_or_usage_error("tp_link", [&] { (void)sim::tp_link(c, tp); });
      fuzz::expect_success_or_usage_error("dp_link", [&] { (void)sim::dp_link(c, 64, tp); });
    }
  });
  return 0;
}
