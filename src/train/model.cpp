// The tensor-parallel Qwen3 decoder (model.h).
#include "canzona/train/model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "attention.h"
#include "canzona/common/error.h"
#include "canzona/common/fnv.h"
#include "canzona/common/splitmix.h"
#include "fused.h"

namespace canzona::train {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The local experts of EP rank ep.rank: [first, first + count).
std::pair<int, int> local_experts(const model::TransformerConfig& c, const EpGroup& ep) {
  const int count = c.num_experts / ep.size;
  return {ep.rank * count, count};
}

std::string expert_prefix(const std::string& layer, int e) {
  return layer + "mlp.experts.local_experts." + std::to_string(e) + ".";
}

// The params the model reads, in Megatron registration order, with TP-local shapes: of a MoE
// layer's experts only this EP rank's.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected_params(
    const model::TransformerConfig& c, std::int64_t padded_vocab, int tp, const EpGroup& ep) {
  const std::int64_t h = c.hidden, d = c.head_dim, f = c.ffn_hidden;
  const std::int64_t qkv = (c.num_heads + 2LL * c.num_query_groups) * d;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  out.push_back({"embedding.word_embeddings.weight", {padded_vocab / tp, h}});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    out.push_back({p + "self_attention.linear_proj.weight", {h, c.num_heads * d / tp}});
    out.push_back({p + "self_attention.linear_qkv.layer_norm_weight", {h}});
    out.push_back({p + "self_attention.linear_qkv.weight", {qkv / tp, h}});
    if (c.qkv_bias) out.push_back({p + "self_attention.linear_qkv.bias", {qkv / tp}});
    if (c.qk_norm) {
      out.push_back({p + "self_attention.q_layernorm.weight", {d}});
      out.push_back({p + "self_attention.k_layernorm.weight", {d}});
    }
    if (c.moe_layer(i)) {
      const std::int64_t fe = c.moe_ffn_hidden;
      out.push_back({p + "pre_mlp_layernorm.weight", {h}});
      out.push_back({p + "mlp.router.weight", {c.num_experts, h}});
      const auto [first, count] = local_experts(c, ep);
      for (int e = first; e < first + count; ++e) {
        out.push_back({expert_prefix(p, e) + "linear_fc1.weight", {2 * fe, h}});
        out.push_back({expert_prefix(p, e) + "linear_fc2.weight", {h, fe}});
      }
      continue;
    }
    out.push_back({p + "mlp.linear_fc1.layer_norm_weight", {h}});
    out.push_back({p + "mlp.linear_fc1.weight", {2 * f / tp, h}});
    out.push_back({p + "mlp.linear_fc2.weight", {h, f / tp}});
  }
  out.push_back({"decoder.final_layernorm.weight", {h}});
  if (!c.tied_embeddings) out.push_back({"output_layer.weight", {padded_vocab / tp, h}});
  return out;
}

// The layer of a "decoder.layers.<i>." param, -1 for the others.
int layer_of(const std::string& name) {
  static const std::string prefix = "decoder.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  return std::stoi(name.substr(prefix.size()));
}

// Whether `stage` reads param `name`: its layers' params, the embedding on the first stage (and
// the last stage's copy of a tied one), the final norm and output layer on the last.
bool stage_reads(const model::TransformerConfig& c, const PipelineStage& stage,
                 const std::vector<int>& bounds, const std::string& name) {
  const int layer = layer_of(name);
  if (layer >= 0)
    return layer >= bounds[static_cast<std::size_t>(stage.index)] &&
           layer < bounds[static_cast<std::size_t>(stage.index) + 1];
  if (name == "embedding.word_embeddings.weight")
    return stage.first() || (stage.last() && c.tied_embeddings);
  return stage.last();
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::string t(suffix);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Counter-based N(0, 1): splitmix64 of (seed, name hash, index), Box-Muller.
std::uint64_t name_hash(const std::string& name) {
  return fnv1a(name.data(), name.size());
}

double normal(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t a = splitmix64(key ^ splitmix64(2 * index));
  const std::uint64_t b = splitmix64(key ^ splitmix64(2 * index + 1));
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace

void init_param(const model::ParamSpec& param, const model::TransformerConfig& config, int tp,
                int tp_rank, std::uint64_t seed, std::span<float> out) {
  CANZONA_REQUIRE(static_cast<std::int64_t>(out.size()) == param.local_numel(tp), "init of ",
                  param.name, ": ", out.size(), " elements given, local numel is ",
                  param.local_numel(tp));
  const std::string& n = param.name;
  if (ends_with(n, "layer_norm_weight") || ends_with(n, "layernorm.weight")) {
    for (float& x : out) x = 1.0f;
    return;
  }
  if (ends_with(n, ".bias")) {
    for (float& x : out) x = 0.0f;
    return;
  }
  double stddev = 0.02;
  if (ends_with(n, "linear_proj.weight") || ends_with(n, "linear_fc2.weight"))
    stddev /= std::sqrt(2.0 * config.num_layers);
  const std::uint64_t key = splitmix64(seed) ^ name_hash(n);
  const std::vector<std::int64_t> local = param.local_shape(tp);
  const std::int64_t rows = local[0], cols = local.size() > 1 ? local[1] : 1;
  const std::int64_t global_cols = param.cols();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t gr = model::logical_row(param, tp, tp_rank, r);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t gc = param.tp_split_dim == 1 ? tp_rank * cols + c : c;
      out[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(
          stddev * normal(key, static_cast<std::uint64_t>(gr * global_cols + gc)));
    }
  }
}

std::vector<float> shard_of(const model::ParamSpec& param, int tp, int tp_rank,
                            std::span<const float> global) {
  CANZONA_CHECK_EQ(static_cast<std::int64_t>(global.size()), param.numel());
  const std::vector<std::int64_t> local = param.local_shape(tp);
  const std::int64_t rows = local[0], cols = local.size() > 1 ? local[1] : 1;
  const std::int64_t global_cols = param.cols();
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t gr = model::logical_row(param, tp, tp_rank, r);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t gc = param.tp_split_dim == 1 ? tp_rank * cols + c : c;
      out[static_cast<std::size_t>(r * cols + c)] =
          global[static_cast<std::size_t>(gr * global_cols + gc)];
    }
  }
  return out;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Identity whose backward first calls the segment's before_backward hook: autograd reaches it
// right before the segment's own backward nodes.
struct SegmentBoundary : torch::autograd::Function<SegmentBoundary> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const std::function<void(int)>* hook, std::int64_t segment) {
    ctx->saved_data["hook"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(hook));
    ctx->saved_data["segment"] = segment;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* hook = reinterpret_cast<const std::function<void(int)>*>(
        static_cast<std::intptr_t>(ctx->saved_data["hook"].toInt()));
    (*hook)(static_cast<int>(ctx->saved_data["segment"].toInt()));
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

struct Qwen3Model::Impl {
  model::TransformerConfig config;
  TpGroup tp;
  std::int64_t padded_vocab = 0;
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;  // [spec index] leaf tensors (undefined until bound)
  std::vector<std::vector<std::int64_t>> shapes;  // [spec index] TP-local shapes
  DType dtype = DType::kF32;  // of the params, their gradients and the activations
  // [spec index] the memory of unbound params and their gradients (Storage::kOwned)
  std::vector<torch::Tensor> owned, owned_grads;
  // [spec index] a bf16 param's fp32 gradient buffer (bind with an fp32 grad: Megatron's
  // main_grad), and the accumulation hooks that add each backward's gradient into it.
  std::vector<torch::Tensor> main_grads;
  std::vector<decltype(torch::autograd::impl::grad_accumulator(torch::Tensor()))> main_hooks;
  std::vector<char> held;                  // [spec index] 0: another EP rank's expert
  std::map<std::string, int> index;        // name -> spec index
  std::vector<std::vector<int>> segments;  // forward_segments()
  SegmentHooks hooks;
  int segment = -1;                  // the segment the forward is in
  torch::Tensor rope_cos, rope_sin;  // [S, d] cache
  std::int64_t rope_len = 0;

  EpGroup ep;
  std::vector<Routing> routings;  // the last forward's MoE layers
  PipelineStage stage;
  int first_layer = 0, end_layer = 0;  // the stage's layers [first_layer, end_layer)

  const torch::Tensor& use(const std::string& name) {
    const int p = index.at(name);
    const std::vector<int>& in = segments.at(static_cast<std::size_t>(segment));
    CANZONA_CHECK(std::find(in.begin(), in.end(), p) != in.end(), "param ", name,
                  " read outside its forward segment ", segment);
    if (hooks.poll) hooks.poll();
    return params[static_cast<std::size_t>(p)];
  }

  void enter(int s) {
    segment = s;
    if (hooks.before_forward) hooks.before_forward(s);
  }

  // The segment's output, through the boundary whose backward calls before_backward.
  torch::Tensor leave(torch::Tensor y) {
    if (hooks.after_forward) hooks.after_forward(segment);
    if (hooks.before_backward && torch::GradMode::is_enabled() && y.requires_grad())
      y = SegmentBoundary::apply(y, &hooks.before_backward, static_cast<std::int64_t>(segment));
    return y;
  }

  // forward_segments, in the order run_stage() enters them.
  void build_segments(const model::TransformerConfig& c) {
    auto list = [&](const std::vector<std::string>& names) {
      std::vector<int> out;
      for (const std::string& n : names) out.push_back(index.at(n));
      segments.push_back(std::move(out));
    };
    if (stage.first()) list({"embedding.word_embeddings.weight"});
    for (int i = first_layer; i < end_layer; ++i) {
      const std::string p = "decoder.layers." + std::to_string(i) + ".self_attention.";
      std::vector<std::string> attn = {p + "linear_qkv.layer_norm_weight", p + "linear_qkv.weight"};
      if (c.qkv_bias) attn.push_back(p + "linear_qkv.bias");
      if (c.qk_norm) attn.insert(attn.end(), {p + "q_layernorm.weight", p + "k_layernorm.weight"});
      attn.push_back(p + "linear_proj.weight");
      list(attn);
      const std::string layer = "decoder.layers." + std::to_string(i) + ".";
      if (c.moe_layer(i)) {
        std::vector<std::string> moe = {layer + "pre_mlp_layernorm.weight",
                                        layer + "mlp.router.weight"};
        const auto [first, count] = local_experts(c, ep);
        for (int e = first; e < first + count; ++e)
          moe.insert(moe.end(), {expert_prefix(layer, e) + "linear_fc1.weight",
                                 expert_prefix(layer, e) + "linear_fc2.weight"});
        list(moe);
        continue;
      }
      const std::string m = layer + "mlp.";
      list({m + "linear_fc1.layer_norm_weight", m + "linear_fc1.weight", m + "linear_fc2.weight"});
    }
    if (stage.last())
      list({"decoder.final_layernorm.weight",
            c.tied_embeddings ? "embedding.word_embeddings.weight" : "output_layer.weight"});
  }

  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
    return fused_rms_norm(x, weight, config.rms_norm_eps);
  }

  void build_rope(std::int64_t seq_len) {
    if (rope_len == seq_len) return;
    const std::int64_t d = config.head_dim;
    const torch::Tensor exponents =
        torch::arange(0, d, 2, torch::kFloat64) / static_cast<double>(d);
    const torch::Tensor inv_freq = torch::pow(config.rope_theta, -exponents);
    const torch::Tensor positions = torch::arange(seq_len, torch::kFloat64);
    const torch::Tensor freqs = torch::outer(positions, inv_freq);
    const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    rope_cos = emb.cos().to(torch::kFloat32);
    rope_sin = emb.sin().to(torch::kFloat32);
    rope_len = seq_len;
  }

  torch::Tensor attention(const torch::Tensor& x, const std::string& p) {
    const std::int64_t b = x.size(0), s = x.size(1), d = config.head_dim;
    const std::int64_t groups = config.num_query_groups / tp.size;
    const std::int64_t per_group = config.num_heads / config.num_query_groups;
    const torch::Tensor normed =
        rms_norm(x, use(p + "self_attention.linear_qkv.layer_norm_weight"));
    const torch::Tensor bias =
        config.qkv_bias ? use(p + "self_attention.linear_qkv.bias") : torch::Tensor();
    const torch::Tensor qkv =
        column_parallel_linear(normed, use(p + "self_attention.linear_qkv.weight"), bias, tp);
    torch::Tensor q_norm, k_norm;
    if (config.qk_norm) {
      q_norm = copy_to_tp(use(p + "self_attention.q_layernorm.weight"), tp);
      k_norm = copy_to_tp(use(p + "self_attention.k_layernorm.weight"), tp);
    }
    // q [B, G, S, P, d], k and v [B, G, S, d]: split, qk-norm and RoPE in one pass.
    const AttentionHeads heads = fused_attention_heads(qkv, groups, per_group, d, q_norm, k_norm,
                                                       config.rms_norm_eps, rope_cos, rope_sin);
    const torch::Tensor context = causal_attention(heads.q, heads.k, heads.v)
                                      .permute({0, 2, 1, 3, 4})
                                      .reshape({b, s, groups * per_group * d});
    return row_parallel_linear(context, use(p + "self_attention.linear_proj.weight"), tp);
  }

  torch::Tensor mlp(const torch::Tensor& x, const std::string& p) {
    const torch::Tensor normed = rms_norm(x, use(p + "mlp.linear_fc1.layer_norm_weight"));
    const torch::Tensor fc1 =
        column_parallel_linear(normed, use(p + "mlp.linear_fc1.weight"), torch::Tensor(), tp);
    return row_parallel_linear(fused_swiglu(fc1), use(p + "mlp.linear_fc2.weight"), tp);
  }

  // Qwen3-MoE's sparse block (moe.h): every TP rank normalises and routes all tokens (the
  // activation is replicated over TP, so are the routing and the router's gradient); the experts
  // then see this TP rank's share of the tokens only, dispatched over the EP group, and the
  // outputs are gathered back over TP.
  torch::Tensor moe_mlp(const torch::Tensor& x, const std::string& p) {
    const std::int64_t h = x.size(-1);
    const torch::Tensor normed = rms_norm(x, use(p + "pre_mlp_layernorm.weight")).reshape({-1, h});
    const std::int64_t n = normed.size(0);
    Routing routing = route(normed, use(p + "mlp.router.weight"), config.experts_per_token,
                            config.norm_topk_prob);
    std::vector<torch::Tensor> fc1, fc2;
    const auto [first, count] = local_experts(config, ep);
    for (int e = first; e < first + count; ++e) {
      fc1.push_back(use(expert_prefix(p, e) + "linear_fc1.weight"));
      fc2.push_back(use(expert_prefix(p, e) + "linear_fc2.weight"));
    }
    const auto [begin, rows] = tp_rows(n, tp);
    Routing mine;
    mine.experts = routing.experts.slice(0, begin, begin + rows);
    mine.weights = split_rows_to_tp(routing.weights, tp);
    const torch::Tensor out =
        moe_experts(split_rows_to_tp(normed, tp), mine, fc1, fc2, config.num_experts, ep);
    routings.push_back(std::move(routing));
    return gather_rows_from_tp(out, n, tp).reshape(x.sizes());
  }

  // The stage's forward: tokens [B, S] (first stage) or hidden [B, S, h] in; hidden out, or on
  // the last stage this rank's logits columns [B, S, V/T].
  torch::Tensor run_stage(const torch::Tensor& input) {
    build_rope(input.size(1));
    routings.clear();
    const std::int64_t vocab_start = tp.rank * (padded_vocab / tp.size);
    int s = 0;
    torch::Tensor x = input;
    if (stage.first()) {
      enter(s++);
      x = leave(vocab_parallel_embedding(input, use("embedding.word_embeddings.weight"),
                                         vocab_start, tp));
    }
    for (int i = first_layer; i < end_layer; ++i) {
      const std::string p = "decoder.layers." + std::to_string(i) + ".";
      enter(s++);
      x = x + leave(attention(x, p));
      enter(s++);
      x = x + leave(config.moe_layer(i) ? moe_mlp(x, p) : mlp(x, p));
    }
    if (!stage.last()) {
      segment = -1;
      return x;
    }
    enter(s++);
    x = rms_norm(x, use("decoder.final_layernorm.weight"));
    const torch::Tensor& output =
        use(config.tied_embeddings ? "embedding.word_embeddings.weight" : "output_layer.weight");
    torch::Tensor out = leave(column_parallel_linear(x, output, torch::Tensor(), tp));
    segment = -1;
    return out;
  }
};

Qwen3Model::Qwen3Model(const model::TransformerConfig& config, const model::ModelSpec& spec,
                       TpGroup tp, Storage storage, EpGroup ep, PipelineStage stage, DType dtype)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.config = config;
  m.tp = tp;
  m.ep = ep;
  CANZONA_REQUIRE(stage.count >= 1 && stage.index >= 0 && stage.index < stage.count, "model '",
                  spec.name, "': pipeline stage ", stage.index, " of ", stage.count);
  const std::vector<int> bounds =
      model::stage_bounds(spec.name, config.num_layers, stage.count, stage.layout);
  m.stage = stage;
  m.first_layer = bounds[static_cast<std::size_t>(stage.index)];
  m.end_layer = bounds[static_cast<std::size_t>(stage.index) + 1];
  CANZONA_REQUIRE(ep.size == 1 || config.is_moe(), "model '", spec.name,
                  "': expert parallelism needs a mixture-of-experts model");
  CANZONA_REQUIRE(ep.size >= 1 && (!config.is_moe() || config.num_experts % ep.size == 0) &&
                      ep.rank >= 0 && ep.rank < ep.size,
                  "model '", spec.name, "': EP rank ", ep.rank, " of ", ep.size,
                  " does not hold a whole share of ", config.num_experts, " experts");
  m.padded_vocab = spec.arch.padded_vocab_size;
  CANZONA_REQUIRE(tp.size >= 1 && m.padded_vocab > 0 && m.padded_vocab % tp.size == 0, "model '",
                  spec.name, "': padded vocabulary ", m.padded_vocab,
                  " is not divisible by tp=", tp.size);
  CANZONA_REQUIRE(config.head_dim % 2 == 0, "model '", spec.name, "': head_dim ", config.head_dim,
                  " must be even for RoPE");
  const auto expected = expected_params(config, m.padded_vocab, tp.size, ep);
  std::map<std::string, std::vector<std::int64_t>> wanted(expected.begin(), expected.end());
  const auto [first_expert, local_count] =
      config.is_moe() ? local_experts(config, ep) : std::pair<int, int>{0, 0};
  m.held.assign(spec.params.size(), 1);
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    const model::ParamSpec& ps = spec.params[p];
    const int e = model::is_expert_param(ps) ? model::expert_index(ps) : -1;
    if (e >= 0 && e < config.num_experts && (e < first_expert || e >= first_expert + local_count)) {
      m.held[p] = 0;  // another EP rank's expert
      continue;
    }
    const auto it = wanted.find(ps.name);
    CANZONA_REQUIRE(it != wanted.end(), "model '", spec.name, "': param ", ps.name,
                    " of the plan is not a param of the Qwen3 training model");
    if (!stage_reads(config, stage, bounds, ps.name)) {
      m.held[p] = 0;  // another pipeline stage's
      wanted.erase(it);
      continue;
    }
    const std::vector<std::int64_t> local = ps.local_shape(tp.size);
    CANZONA_REQUIRE(local == it->second, "model '", spec.name, "': param ", ps.name,
                    " has TP-local shape ", shape_text(local), " in the plan, the model needs ",
                    shape_text(it->second));
    m.index[ps.name] = static_cast<int>(p);
    wanted.erase(it);
  }
  CANZONA_REQUIRE(wanted.empty(), "model '", spec.name, "': the plan lacks param ",
                  wanted.empty() ? "" : wanted.begin()->first);
  m.build_segments(config);
  m.params.resize(spec.params.size());
  m.dtype = dtype;
  m.owned.resize(spec.params.size());
  m.owned_grads.resize(spec.params.size());
  m.main_grads.resize(spec.params.size());
  m.shapes.resize(spec.params.size());
  for (std::size_t p = 0; p < spec.params.size(); ++p) {
    m.names.push_back(spec.params[p].name);
    m.shapes[p] = spec.params[p].local_shape(tp.size);
    if (storage == Storage::kBound || !m.held[p]) continue;
    m.owned[p] = torch::zeros(m.shapes[p], torch_dtype(dtype));
    m.owned_grads[p] = torch::zeros(m.shapes[p], torch_dtype(dtype));
    m.params[p] = m.owned[p].detach().set_requires_grad(true);
    m.params[p].mutable_grad() = m.owned_grads[p];
  }
}

Qwen3Model::~Qwen3Model() = default;

int Qwen3Model::num_params() const {
  return static_cast<int>(impl_->params.size());
}

torch::Tensor& Qwen3Model::param(int p) {
  CANZONA_CHECK(holds(p), "param ", impl_->names.at(static_cast<std::size_t>(p)),
                " is another EP rank's expert");
  return impl_->params.at(static_cast<std::size_t>(p));
}

const PipelineStage& Qwen3Model::stage() const {
  return impl_->stage;
}

bool Qwen3Model::holds(int p) const {
  return impl_->held.at(static_cast<std::size_t>(p)) != 0;
}

StageRouting Qwen3Model::stage_routing() const {
  return train::stage_routing(impl_->routings, impl_->config.num_experts);
}

torch::Tensor Qwen3Model::load_balancing_loss() const {
  if (impl_->routings.empty()) return {};
  return train::load_balancing_loss(impl_->routings, impl_->config.num_experts);
}

namespace {

// Adds a bf16 param's gradient into its fp32 buffer and drops it, after autograd accumulated it
// (Megatron's main_grad hook: param.main_grad.add_(param.grad); param.grad = None).
struct IntoMainGrad : torch::autograd::FunctionPostHook {
  IntoMainGrad(torch::Tensor param, torch::Tensor main) : param_(param), main_(main) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    torch::Tensor& grad = param_.mutable_grad();
    if (grad.defined()) {
      main_.add_(grad);
      grad.reset();
    }
    return outputs;
  }
  torch::Tensor param_, main_;
};

}  // namespace

DType Qwen3Model::dtype() const {
  return impl_->dtype;
}

void Qwen3Model::bind(int p, TypedSpan value, TypedSpan grad) {
  torch::Tensor& t = param(p);
  const std::size_t i = static_cast<std::size_t>(p);
  const std::vector<std::int64_t>& shape = impl_->shapes.at(i);
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  CANZONA_CHECK(value.size() == numel && grad.size() == numel, "bind of ", impl_->names[i],
                ": sizes ", value.size(), " / ", grad.size(), " for ", numel, " elements");
  CANZONA_CHECK(value.dtype() == impl_->dtype &&
                    (grad.dtype() == impl_->dtype || grad.dtype() == DType::kF32),
                "bind of ", impl_->names[i], ": a ", to_string(value.dtype()), " param with a ",
                to_string(grad.dtype()), " gradient in a ", to_string(impl_->dtype), " model");
  t = torch::from_blob(value.data(), shape, torch_dtype(value.dtype())).set_requires_grad(true);
  torch::Tensor g = torch::from_blob(grad.data(), shape, torch_dtype(grad.dtype()));
  if (grad.dtype() == value.dtype()) {
    t.mutable_grad() = g;
    impl_->main_grads[i] = torch::Tensor();
  } else {
    impl_->main_grads[i] = g;
    auto accumulator = torch::autograd::impl::grad_accumulator(t);
    accumulator->add_post_hook(std::make_unique<IntoMainGrad>(t, g));
    impl_->main_hooks.push_back(std::move(accumulator));
  }
  // Release the model's own buffers: the engine's now back the param.
  impl_->owned[i] = torch::Tensor();
  impl_->owned_grads[i] = torch::Tensor();
}

void Qwen3Model::bind_value(int p, TypedSpan value) {
  torch::Tensor& t = param(p);
  const std::size_t i = static_cast<std::size_t>(p);
  const std::vector<std::int64_t>& shape = impl_->shapes.at(i);
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  CANZONA_CHECK(value.size() == numel && value.dtype() == impl_->dtype, "bind_value of ",
                impl_->names[i], ": ", value.size(), " ", to_string(value.dtype()), " elements");
  t = torch::from_blob(value.data(), shape, torch_dtype(value.dtype())).set_requires_grad(true);
  impl_->owned[i] = torch::Tensor();
  impl_->owned_grads[i] = torch::Tensor();
}

const std::vector<std::vector<int>>& Qwen3Model::forward_segments() const {
  return impl_->segments;
}

void Qwen3Model::set_segment_hooks(SegmentHooks hooks) {
  impl_->hooks = std::move(hooks);
}

torch::Tensor Qwen3Model::local_logits(const torch::Tensor& inputs) {
  CANZONA_CHECK(impl_->stage.count == 1, "local_logits of a pipeline stage");
  return impl_->run_stage(inputs);
}

torch::Tensor Qwen3Model::token_losses(const torch::Tensor& inputs, const torch::Tensor& targets) {
  CANZONA_CHECK(impl_->stage.count == 1, "token_losses of a pipeline stage (use stage_forward)");
  return stage_forward(inputs, targets);
}

torch::Tensor Qwen3Model::stage_forward(const torch::Tensor& input, const torch::Tensor& targets) {
  const torch::Tensor out = impl_->run_stage(input);
  if (!impl_->stage.last()) return out;
  const std::int64_t local_vocab = out.size(-1);
  // The loss in fp32 (bf16 logits widened first, as Hugging Face's logits.float()).
  return vocab_parallel_cross_entropy(out.reshape({-1, local_vocab}).to(torch::kFloat32),
                                      targets.reshape({-1}), impl_->tp.rank * local_vocab,
                                      impl_->tp);
}

}  // namespace canzona::train
