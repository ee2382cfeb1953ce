// Cluster presets, JSON reading (errors name the key) and rank placement (cluster.h).
#include "canzona/sim/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "canzona/common/error.h"
#include "canzona/common/json_io.h"

namespace canzona::sim {
namespace {

using ::testing::HasSubstr;

// Runs cluster_from_json and returns the UsageError message ("" when it parsed).
std::string error_of(const nlohmann::json& value) {
  try {
    cluster_from_json(value, "c.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Cluster, PresetsRoundTripThroughJson) {
  for (const auto& name : cluster_preset_names()) {
    Cluster c = cluster_preset(name);
    EXPECT_EQ(to_json(cluster_from_json(to_json(c), name)), to_json(c)) << name;
    EXPECT_EQ(c.gpus_per_node, 8);
    EXPECT_GT(c.intra_node.bandwidth_GBps, c.inter_node.bandwidth_GBps);
  }
}

TEST(Cluster, InfinibandIs400GbitPerGpuNominal) {
  // 400 Gb/s = 50 GB/s; the preset uses an achieved 90%.
  EXPECT_DOUBLE_EQ(cluster_preset("h100-8").inter_node.bandwidth_GBps, 45.0);
}

TEST(Cluster, OptimizerRateIsPeakOfItsPrecisionTimesEfficiency) {
  Device d = cluster_preset("h100-8").device;
  EXPECT_DOUBLE_EQ(d.optimizer_flops_per_s(), 494.7e12 * 0.5);
  d.optimizer_precision = Precision::kBf16;
  EXPECT_DOUBLE_EQ(d.optimizer_flops_per_s(), 989.4e12 * 0.5);
  EXPECT_DOUBLE_EQ(d.fwd_bwd_flops_per_s(), 989.4e12 * 0.45);
}

TEST(Cluster, UnknownPresetListsKnownOnes) {
  try {
    cluster_preset("a100-4");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("h100-8"));
    EXPECT_THAT(e.what(), HasSubstr("h200-8"));
  }
}

TEST(Cluster, MissingKeyWithoutBaseNamesTheKey) {
  nlohmann::json j = to_json(cluster_preset("h100-8"));
  j["inter_node"].erase("latency_us");
  EXPECT_THAT(error_of(j), HasSubstr("c.json: key 'inter_node.latency_us': missing"));
  j = to_json(cluster_preset("h100-8"));
  j.erase("device");
  EXPECT_THAT(error_of(j), HasSubstr("key 'device': missing"));
}

TEST(Cluster, BadValuesNameTheKey) {
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* key;
  };
  const Case cases[] = {
      {"/intra_node/bandwidth_GBps", 0.0, "'intra_node.bandwidth_GBps'"},
      {"/intra_node/bandwidth_GBps", "fast", "'intra_node.bandwidth_GBps': expected a number"},
      {"/inter_node/latency_us", -1.0, "'inter_node.latency_us'"},
      {"/device/matmul_efficiency", 1.5, "'device.matmul_efficiency'"},
      {"/device/optimizer_efficiency", 0.0, "'device.optimizer_efficiency'"},
      {"/device/optimizer_precision", "fp8", "'device.optimizer_precision'"},
      {"/device/bf16_tflops", -3.0, "'device.bf16_tflops'"},
      {"/device/factorization_tflops", 0.0, "'device.factorization_tflops'"},
      {"/gpus_per_node", 2.5, "'gpus_per_node': expected an integer"},
      {"/name", 7, "'name': expected a string"},
      {"/inter_node", 45, "'inter_node': expected an object"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = to_json(cluster_preset("h100-8"));
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    EXPECT_THAT(error_of(j), HasSubstr(c.key)) << c.pointer;
  }
}

TEST(Cluster, UnknownKeysAreErrors) {
  nlohmann::json j = to_json(cluster_preset("h100-8"));
  j["device"]["bf16_tflop"] = 1.0;
  EXPECT_THAT(error_of(j), HasSubstr("key 'device.bf16_tflop': unknown key"));
  j = to_json(cluster_preset("h100-8"));
  j["nvlink"] = 1.0;
  EXPECT_THAT(error_of(j), HasSubstr("key 'nvlink': unknown key"));
}

TEST(Cluster, BaseFillsMissingKeys) {
  nlohmann::json j = {{"base", "h200-8"},
                      {"name", "slow-ib"},
                      {"inter_node", {{"bandwidth_GBps", 25.0}}},
                      {"device", {{"matmul_efficiency", 0.4}}}};
  Cluster c = cluster_from_json(j, "c.json");
  EXPECT_EQ(c.name, "slow-ib");
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth_GBps, 25.0);
  EXPECT_DOUBLE_EQ(c.inter_node.latency_us, cluster_preset("h200-8").inter_node.latency_us);
  EXPECT_DOUBLE_EQ(c.device.matmul_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(c.device.hbm_GBps, 4800.0);
  EXPECT_THAT(error_of({{"base", "tpu"}}), HasSubstr("unknown cluster preset 'tpu'"));
}

TEST(Cluster, LoadClusterReadsPresetOrFile) {
  EXPECT_EQ(load_cluster("h100-8").name, "h100-8");
  auto path = (std::filesystem::temp_directory_path() / "canzona_cluster_test.json").string();
  write_json_file(path, {{"base", "h100-8"}, {"name", "mine"}});
  EXPECT_EQ(load_cluster(path).name, "mine");
  write_text_file(path, "{\"base\": \"h100-8\", \"device\": {\"hbm_GBps\": \"x\"}}");
  try {
    load_cluster(path);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": key 'device.hbm_GBps'"));
  }
  std::remove(path.c_str());
  try {
    load_cluster("/nonexistent/cluster.json");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/cluster.json' is neither a preset (h100-8"));
  }
}

TEST(Cluster, PlacementKeepsTpInsideANode) {
  Cluster c = cluster_preset("h100-8");
  EXPECT_DOUBLE_EQ(tp_link(c, 8).bandwidth_GBps, c.intra_node.bandwidth_GBps);
  EXPECT_THROW(tp_link(c, 16), UsageError);
  // The DP ring leaves the node once dp * tp GPUs exceed it.
  EXPECT_DOUBLE_EQ(dp_link(c, 1, 8).bandwidth_GBps, c.intra_node.bandwidth_GBps);
  EXPECT_DOUBLE_EQ(dp_link(c, 4, 2).bandwidth_GBps, c.intra_node.bandwidth_GBps);
  EXPECT_DOUBLE_EQ(dp_link(c, 2, 8).bandwidth_GBps, c.inter_node.bandwidth_GBps);
  EXPECT_DOUBLE_EQ(dp_link(c, 8, 2).bandwidth_GBps, c.inter_node.bandwidth_GBps);
  // Across nodes: 8 / tp ranks of a DP group per node, tp groups over the node's 8 NICs.
  EXPECT_EQ(dp_link(c, 8, 2).ranks_per_node, 4);
  EXPECT_DOUBLE_EQ(dp_link(c, 8, 2).nic_share, 0.25);
  EXPECT_EQ(dp_link(c, 2, 8).ranks_per_node, 1);
  EXPECT_DOUBLE_EQ(dp_link(c, 2, 8).nic_share, 1.0);
  EXPECT_EQ(dp_link(c, 4, 2).ranks_per_node, 0);  // one node
}

// nics_per_node: optional (a NIC per GPU when absent), an integer in [1, gpus_per_node].
TEST(Cluster, NicsPerNodeDefaultsToOnePerGpu) {
  nlohmann::json j = to_json(cluster_preset("h100-8"));
  EXPECT_EQ(j["nics_per_node"], 8);
  j.erase("nics_per_node");
  EXPECT_EQ(cluster_from_json(j, "c.json").nics_per_node, 8);
  j["gpus_per_node"] = 2;
  j["nics_per_node"] = 1;
  const Cluster one_nic = cluster_from_json(j, "c.json");
  EXPECT_EQ(one_nic.nics_per_node, 1);
  // DP 4 over two such nodes: 2 ranks per node, both through the one NIC.
  EXPECT_EQ(dp_link(one_nic, 4, 1).ranks_per_node, 2);
  EXPECT_DOUBLE_EQ(dp_link(one_nic, 4, 1).nic_share, 1.0);
  j["nics_per_node"] = 3;
  EXPECT_THAT(error_of(j), HasSubstr("key 'nics_per_node': value 3 must lie in [1, 2]"));
  j["nics_per_node"] = 1.5;
  EXPECT_THAT(error_of(j), HasSubstr("key 'nics_per_node': expected an integer"));
  // A base's NICs are not inherited: fewer GPUs per node than the preset's is one NIC per GPU.
  const Cluster smaller =
      cluster_from_json({{"base", "h100-8"}, {"name", "x"}, {"gpus_per_node", 4}}, "c.json");
  EXPECT_EQ(smaller.nics_per_node, 4);
  // At most gpus_per_node groups share a node's NICs, however many ranks the group spans
  // (an expert DP group of ep x etp = 16 on 8-GPU nodes).
  EXPECT_DOUBLE_EQ(dp_link(cluster_preset("h100-8"), 4, 16).nic_share, 1.0);
}

}  // namespace
}  // namespace canzona::sim
