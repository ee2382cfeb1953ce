#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "canzona/common/error.h"
#include "canzona/model/load.h"
#include "test_util.h"

namespace canzona::model {
namespace {

using ::testing::AllOf;
using testing::data_path;
using ::testing::HasSubstr;
using testing::scratch_file;
using ::testing::ThrowsMessage;

constexpr const char* kValid = R"({"model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 300)";

// kValid with one more key/value pair (", \"key\": value"), replacing the key when kValid has it
// (the reader refuses duplicate keys).
std::string config_with(const std::string& extra) {
  nlohmann::json config = nlohmann::json::parse(std::string(kValid) + "}");
  if (!extra.empty())
    config.update(nlohmann::json::parse(std::string("{").append(extra.substr(1)).append("}")));
  return config.dump();
}

void expect_config_error(const std::string& text, const std::string& message) {
  const std::string path = scratch_file("config.json", text);
  EXPECT_THAT([&] { read_hf_config(path); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr(path), HasSubstr(message))));
}

TEST(HfConfig, ReadsQwen3) {
  const TransformerConfig c = read_hf_config(data_path("Qwen3-0.6B/config.json"));
  EXPECT_EQ(c.name, "Qwen3-0.6B");
  EXPECT_EQ(c.hidden, 1024);
  EXPECT_EQ(c.ffn_hidden, 3072);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_query_groups, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
}

TEST(HfConfig, Qwen3ConfigBuildsSameParamsAsPreset) {
  const ModelSpec from_file =
      build_transformer(read_hf_config(data_path("Qwen3-0.6B/config.json")), {});
  const ModelSpec from_preset = build_transformer(preset("qwen3-0.6b"), {});
  ASSERT_EQ(from_file.params.size(), from_preset.params.size());
  for (std::size_t i = 0; i < from_file.params.size(); ++i) {
    EXPECT_EQ(from_file.params[i].name, from_preset.params[i].name);
    EXPECT_EQ(from_file.params[i].shape, from_preset.params[i].shape);
  }
  EXPECT_EQ(from_file.total_numel(), 596'049'920LL);
}

TEST(HfConfig, ReadsQwen2WithQkvBias) {
  const TransformerConfig c = read_hf_config(data_path("qwen2_config.json"));
  EXPECT_EQ(c.name, "qwen2_config");
  EXPECT_EQ(c.hidden, 896);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_query_groups, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tied_embeddings);
  const ModelSpec m = build_transformer(c, {});
  EXPECT_EQ(m.params[4].name, "decoder.layers.0.self_attention.linear_qkv.bias");
  EXPECT_EQ(m.params[4].shape, (std::vector<std::int64_t>{(14 + 2 * 2) * 64}));
  EXPECT_EQ(m.total_numel(), 494'032'768LL);  // Qwen2-0.5B as reported by transformers
}

TEST(HfConfig, ReadsLlamaWithImplicitHeadDimAndKvHeads) {
  const TransformerConfig c = read_hf_config(data_path("llama_config.json"));
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_query_groups, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(build_transformer(c, {}).total_numel(), 6'738'415'616LL);  // Llama-2-7B
}

TEST(HfConfig, ReadsMistralWithNullHeadDim) {
  const TransformerConfig c = read_hf_config(data_path("mistral_config.json"));
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.ffn_hidden, 14336);
  EXPECT_EQ(c.num_query_groups, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(build_transformer(c, {}).total_numel(), 7'241'732'096LL);  // Mistral-7B
}

TEST(HfConfig, LlamaRespectsAttentionBias) {
  const std::string path = scratch_file("config.json", config_with(R"(, "attention_bias": true)"));
  EXPECT_TRUE(read_hf_config(path).qkv_bias);
  const std::string off = scratch_file("off.json", config_with(R"(, "attention_bias": false)"));
  EXPECT_FALSE(read_hf_config(off).qkv_bias);
}

TEST(HfConfig, ReadsRopeThetaAndRmsEpsWithHfDefaults) {
  const TransformerConfig qwen3 = read_hf_config(data_path("Qwen3-0.6B/config.json"));
  EXPECT_EQ(qwen3.rope_theta, 1000000.0);  // the file's values
  EXPECT_EQ(qwen3.rms_norm_eps, 1e-6);
  const TransformerConfig plain = read_hf_config(scratch_file("config.json", config_with("")));
  EXPECT_EQ(plain.rope_theta, 10000.0);  // transformers' defaults when the keys are absent
  EXPECT_EQ(plain.rms_norm_eps, 1e-6);
  const TransformerConfig set = read_hf_config(
      scratch_file("set.json", config_with(R"(, "rope_theta": 500000, "rms_norm_eps": 1e-05)")));
  EXPECT_EQ(set.rope_theta, 500000.0);
  EXPECT_EQ(set.rms_norm_eps, 1e-5);
  expect_config_error(config_with(R"(, "rope_theta": -1)"),
                      "rope_theta must be a positive finite number (got -1)");
  expect_config_error(config_with(R"(, "rms_norm_eps": "small")"),
                      "rms_norm_eps must be a positive finite number");
}

// transformers 5's save_pretrained writes the RoPE base inside rope_parameters (a Qwen3Config
// saved by transformers 5.23: "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}).
TEST(HfConfig, ReadsTransformers5RopeParametersAndNamesScaledRope) {
  const TransformerConfig v5 = read_hf_config(scratch_file(
      "v5.json",
      config_with(R"(, "rope_parameters": {"rope_theta": 250000.0, "rope_type": "default"},)"
                  R"( "rope_scaling": null)")));
  EXPECT_EQ(v5.rope_theta, 250000.0);
  const TransformerConfig both = read_hf_config(scratch_file(
      "both.json",
      config_with(R"(, "rope_theta": 5e5, "rope_parameters": {"rope_theta": 500000})")));
  EXPECT_EQ(both.rope_theta, 500000.0);
  EXPECT_EQ(v5.unsupported_rope, "");
  // A scaled RoPE plans like any other (the plan does not depend on it) and is named for train.
  const TransformerConfig yarn = read_hf_config(scratch_file(
      "yarn.json",
      config_with(
          R"(, "rope_parameters": {"rope_theta": 1e6, "rope_type": "yarn", "factor": 4})")));
  EXPECT_EQ(yarn.unsupported_rope, "rope_parameters.rope_type 'yarn'");
  EXPECT_EQ(yarn.rope_theta, 1e6);
  const TransformerConfig linear = read_hf_config(scratch_file(
      "linear.json", config_with(R"(, "rope_scaling": {"rope_type": "linear", "factor": 2})")));
  EXPECT_EQ(linear.unsupported_rope, R"(rope_scaling {"factor":2,"rope_type":"linear"})");
  expect_config_error(config_with(R"(, "rope_theta": 1e6, "rope_parameters": {"rope_theta": 1e4})"),
                      "rope_theta 1e+06 and rope_parameters.rope_theta 10000 disagree");
  expect_config_error(config_with(R"(, "rope_parameters": {"rope_theta": 0})"),
                      "rope_parameters.rope_theta must be a positive finite number (got 0)");
  expect_config_error(config_with(R"(, "rope_parameters": 7)"),
                      "rope_parameters must be an object (got 7)");
}

TEST(HfConfig, ExplicitHeadDimOverridesHiddenOverHeads) {
  const std::string path = scratch_file("config.json", config_with(R"(, "head_dim": 32)"));
  EXPECT_EQ(read_hf_config(path).head_dim, 32);
}

TEST(HfConfig, RejectsMissingKeys) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size", "model_type"}) {
    SCOPED_TRACE(key);
    nlohmann::json j = nlohmann::json::parse(config_with(""));
    j.erase(key);
    expect_config_error(j.dump(), std::string("key '") + key + "' missing");
  }
}

TEST(HfConfig, RejectsWrongTypedOrNonPositiveKeys) {
  expect_config_error(config_with(R"(, "hidden_size": "64")"),
                      "key 'hidden_size' must be a positive integer");
  expect_config_error(config_with(R"(, "num_hidden_layers": 0)"),
                      "key 'num_hidden_layers' must be a positive integer");
  expect_config_error(config_with(R"(, "vocab_size": -5)"),
                      "key 'vocab_size' must be a positive integer");
  expect_config_error(config_with(R"(, "intermediate_size": 12.5)"),
                      "key 'intermediate_size' must be a positive integer");
  expect_config_error(config_with(R"(, "num_key_value_heads": 0)"),
                      "key 'num_key_value_heads' must be a positive integer");
  expect_config_error(config_with(R"(, "head_dim": true)"),
                      "key 'head_dim' must be a positive integer");
  expect_config_error(config_with(R"(, "num_attention_heads": 4294967296)"),
                      "key 'num_attention_heads' = 4294967296 must lie in [1, 65536] (kMaxHeads)");
  expect_config_error(config_with(R"(, "num_hidden_layers": 1000000000)"),
                      "key 'num_hidden_layers' = 1000000000 must lie in [1, 4096] (kMaxLayers)");
  expect_config_error(
      config_with(R"(, "vocab_size": 18446744073709551615)"),
      "key 'vocab_size' = 18446744073709551615 must lie in [1, 16777216] (kMaxVocab)");
  expect_config_error(config_with(R"(, "tie_word_embeddings": 1)"),
                      "key 'tie_word_embeddings' must be true or false");
  expect_config_error(config_with(R"(, "model_type": 3)"), "key 'model_type' must be a string");
}

TEST(HfConfig, RejectsUnknownModelType) {
  expect_config_error(config_with(R"(, "model_type": "gpt2")"),
                      "unsupported model_type 'gpt2' (supported: qwen3, qwen3_moe, qwen2, llama, "
                      "mistral)");
}

TEST(HfConfig, RejectsHeadsNotDivisibleByKvHeads) {
  expect_config_error(config_with(R"(, "num_key_value_heads": 3)"),
                      "num_attention_heads 4 not divisible by num_key_value_heads 3");
}

TEST(HfConfig, RejectsHiddenNotDivisibleByHeadsWithoutHeadDim) {
  expect_config_error(config_with(R"(, "hidden_size": 66)"),
                      "hidden_size 66 not divisible by num_attention_heads 4");
}

TEST(HfConfig, RejectsMalformedFiles) {
  expect_config_error("[1, 2]", "expected a JSON object");
  expect_config_error("{\"hidden_size\": ", "malformed JSON");
  EXPECT_THAT([] { read_hf_config("/nonexistent/config.json"); },
              ThrowsMessage<UsageError>(HasSubstr("/nonexistent/config.json: cannot read file")));
}

// Qwen3-30B-A3B's published config.json (tests/model/data) reads as the preset: the same keys
// and the same Megatron params.
TEST(HfConfig, ReadsQwen3MoeAsThePreset) {
  const TransformerConfig c = read_hf_config(data_path("Qwen3-30B-A3B/config.json"));
  EXPECT_EQ(c.name, "Qwen3-30B-A3B");
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.moe_ffn_hidden, 768);
  EXPECT_EQ(c.sparse_step, 1);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.router_aux_loss_coef, 0.001);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_query_groups, 4);
  const ModelSpec from_file = build_transformer(c, {});
  const ModelSpec from_preset = build_transformer(preset("qwen3-30b-a3b"), {});
  ASSERT_EQ(from_file.params.size(), from_preset.params.size());
  for (std::size_t i = 0; i < from_file.params.size(); ++i) {
    EXPECT_EQ(from_file.params[i].name, from_preset.params[i].name);
    EXPECT_EQ(from_file.params[i].shape, from_preset.params[i].shape);
  }
}

// decoder_sparse_step and mlp_only_layers pick the MoE layers as HF Qwen3-MoE does: layer i has
// experts when (i + 1) % step == 0 and i is not listed. Step 2 with [3] in 4 layers: only layer 1
// (layer 3 is listed; 0 and 2 fail the step). Qwen3MoeConfig's defaults when keys are absent.
TEST(HfConfig, Qwen3MoeSparseStepAndMlpOnlyLayers) {
  const std::string moe = R"(, "model_type": "qwen3_moe", "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32)";
  const TransformerConfig d = read_hf_config(scratch_file("moe.json", config_with(moe)));
  EXPECT_EQ(d.sparse_step, 1);
  EXPECT_FALSE(d.norm_topk_prob);
  EXPECT_EQ(d.router_aux_loss_coef, 0.001);
  const TransformerConfig c = read_hf_config(scratch_file(
      "moe_step.json",
      config_with(
          moe + R"(, "num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3])")));
  EXPECT_EQ(c.mlp_only_layers, std::vector<int>{3});
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_FALSE(c.moe_layer(2));
  EXPECT_FALSE(c.moe_layer(3));
  const ModelSpec m = build_transformer(c, {});
  int routers = 0, experts = 0, dense_fc1 = 0;
  for (const ParamSpec& p : m.params) {
    routers += p.name.ends_with("mlp.router.weight");
    experts += p.name.find(".mlp.experts.local_experts.") != std::string::npos;
    dense_fc1 += p.name.ends_with("mlp.linear_fc1.weight");
  }
  EXPECT_EQ(routers, 1);
  EXPECT_EQ(experts, 8);  // 4 experts x (fc1, fc2)
  EXPECT_EQ(dense_fc1, 3);
}

TEST(HfConfig, RejectsBadQwen3MoeKeys) {
  const std::string moe = R"(, "model_type": "qwen3_moe", "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32)";
  nlohmann::json j = nlohmann::json::parse(config_with(moe));
  j.erase("num_experts");
  expect_config_error(j.dump(), "key 'num_experts' missing");
  expect_config_error(config_with(moe + R"(, "num_experts_per_tok": 5)"),
                      "key 'num_experts_per_tok' = 5 must lie in [1, 4] (num_experts)");
  expect_config_error(config_with(moe + R"(, "mlp_only_layers": [2])"),
                      "key 'mlp_only_layers' = 2 must lie in [0, 1] (num_hidden_layers - 1)");
  expect_config_error(config_with(moe + R"(, "mlp_only_layers": 1)"),
                      "mlp_only_layers must be an array of layer indices");
  expect_config_error(config_with(moe + R"(, "router_aux_loss_coef": -1)"),
                      "router_aux_loss_coef must be a finite number >= 0");
}

}  // namespace
}  // namespace canzona::model
