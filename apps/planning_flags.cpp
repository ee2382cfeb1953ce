#include "planning_flags.h"

#include <charconv>

#include "canzona/common/checked.h"
#include "canzona/common/error.h"
#include "canzona/layout/layout.h"

namespace canzona::apps {

void add_planning_flags(CLI::App* sub, PlanningFlags& f, PlanningCommand command) {
  const bool run = command == PlanningCommand::kRun;
  sub->add_option("--dp", f.dims.dp, "Data-parallel degree")->capture_default_str();
  sub->add_option("--tp", f.dims.tp,
                  command == PlanningCommand::kSimulate ? "Tensor-parallel degree (inside one node)"
                                                        : "Tensor-parallel degree")
      ->capture_default_str();
  sub->add_option("--pp", f.dims.pp,
                  "Pipeline stages (layers split evenly unless --pp-layout; the first stage holds "
                  "the embedding, the last the output layer)")
      ->capture_default_str();
  sub->add_option("--pp-layout", f.pp_layout,
                  "Layers of each pipeline stage, e.g. 3,4,4,5 (Megatron's "
                  "--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 5)")
      ->delimiter(',');
  sub->add_option("--ep", f.dims.ep,
                  "Expert parallelism (MoE models): each EP rank holds num_experts / ep experts; "
                  "expert DP = dp x tp / (ep x etp)")
      ->capture_default_str();
  sub->add_option("--etp", f.dims.etp, "Expert tensor parallelism (MoE models)")
      ->capture_default_str();
  sub->add_option("--planner", f.planner,
                  "lb-asc planner: canzona (ours) | megatron-canzona (the authors' code) | paper "
                  "(Algorithms 1 and 2 as written)")
      ->capture_default_str();
  sub->add_option("--layerwise-tp", f.layerwise_tp,
                  "layerwise TP mode: duplicated (Megatron's default) | layer-sharded (one home "
                  "TP rank per weight)")
      ->capture_default_str();
  sub->add_option("--layerwise-buckets", f.layerwise_buckets,
                  "layerwise buckets: soft-min (Megatron-LM today: Muon params in soft-minimum "
                  "shard-aligned buckets, the rest in the distributed optimizer's) | fixed (the "
                  "earlier fixed buckets, one buffer)")
      ->capture_default_str();
  sub->add_option("--bucket-order", f.bucket_order,
                  "lb-asc (canzona): free (params of a bucket may be laid out by owner) | keep")
      ->capture_default_str();
  sub->add_option("--optimizer", f.optimizer, "Matrix optimizer: muon | shampoo | soap")
      ->capture_default_str();
  sub->add_option("--cost", f.cost,
                  run ? "Cost model: numel | flops | memory"
                      : "Cost model: numel | flops | memory | calibrated")
      ->capture_default_str();
  if (!run) {
    sub->add_option("--calibration", f.calibration,
                    "Calibration JSON from `canzona bench-kernels --calibration`, for --cost "
                    "calibrated");
  }
  sub->add_option("--alpha", f.alpha, "Algorithm 1 blend in [0, 1]")->capture_default_str();
  sub->add_option("--cmax-mb", f.cmax_mb, "Fused all-to-all capacity per host per micro group, MiB")
      ->capture_default_str();
  sub->add_option("--bucket-size", f.bucket_size,
                  "DP bucket size in elements (0 = Megatron default max(40M, 1M x dp); under "
                  "--zero-stage 3 the largest layer's)")
      ->capture_default_str();
  if (!run) {
    sub->add_option("--zero-stage", f.zero_stage,
                    "1: ZeRO-1 (optimizer state sharded); 3: ZeRO-3 (params and gradients too; "
                    "the memory model counts them, buckets of one layer)")
        ->capture_default_str();
  }
  f.precision_flag =
      sub->add_option("--precision", f.precision,
                      "fp32 | bf16: params and gradients in bf16, fp32 main params and optimizer "
                      "state (docs/precision.md)")
          ->capture_default_str();
  f.grad_fp32_flag = sub->add_flag("--grad-reduce-in-fp32", f.grad_reduce_in_fp32,
                                   "Under --precision bf16: keep, scale and reduce gradients in "
                                   "fp32 (Megatron's grad_reduce_in_fp32)");
  sub->add_option("--ns-dtype", f.ns_dtype,
                  "Muon's Newton-Schulz products: fp32 | bf16 (operands rounded to bf16, fp32 "
                  "sums; default fp32)");
  sub->add_option("--ns-algorithm", f.ns_algorithm,
                  "Muon's Newton-Schulz iteration: standard | gram (on the Gram matrix, where it "
                  "saves FLOPs; default standard)");
  sub->add_option("--split-qkv", f.split_qkv, "Split fused QKV: none | qkv | head")
      ->capture_default_str();
  sub->add_flag("--split-fc1", f.split_fc1, "Split fc1 into gate and up tasks");
}

void check_bucket_size(std::int64_t bucket_size) {
  CANZONA_REQUIRE(bucket_size >= 0, "--bucket-size must be >= 0, 0 = Megatron default (got ",
                  bucket_size, ")");
  require_in_range(bucket_size, 0, layout::kMaxBucketSize, "--bucket-size", "kMaxBucketSize");
}

plan::PlanOptions to_plan_options(const PlanningFlags& f) {
  check_bucket_size(f.bucket_size);
  launch::JobOptions job;
  launch::apply_planning_args(f, job);
  return launch::plan_options(job, plan::PlanOptions{}.strategy);
}

model::BuildOptions to_build_options(const PlanningFlags& f) {
  launch::JobOptions job;
  launch::apply_planning_args(f, job);
  return launch::build_options(job);
}

void apply_planning_flags(const PlanningFlags& f, const char* command, launch::JobOptions& o) {
  launch::apply_planning_args(f, o);
  CANZONA_REQUIRE(o.cost != cost::CostKind::kCalibrated, "--cost calibrated is not supported by ",
                  command, " (use numel, flops or memory)");
}

std::uint64_t parse_seed(const std::string& text) {
  std::uint64_t seed = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, seed);
  CANZONA_REQUIRE(!text.empty() && error == std::errc() && at == end,
                  "--seed must be an integer in [0, 18446744073709551615] (got '", text, "')");
  return seed;
}

}  // namespace canzona::apps
