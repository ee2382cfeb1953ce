// Fused element-wise kernels of the decoder (fused.h).
#include "fused.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// 1 / sqrt(mean(u^2) + eps) over n values, the sum in double.
float inverse_rms(const float* u, std::int64_t n, double eps) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(u[i]) * u[i];
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
}

// RMSNorm backward of one row: gx = r w gy - x r^3 / n * sum(gy w x); gw += gy x r.
void rms_norm_row_backward(const float* x, const float* w, const float* gy, float r, std::int64_t n,
                           float* gx, double* gw) {
  double dot = 0.0;
  for (std::int64_t i = 0; i < n; ++i) dot += static_cast<double>(gy[i]) * w[i] * x[i];
  const float coef =
      static_cast<float>(static_cast<double>(r) * r * r * dot / static_cast<double>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    gx[i] = r * w[i] * gy[i] - x[i] * coef;
    gw[i] += static_cast<double>(gy[i]) * x[i] * r;
  }
}

torch::Tensor to_float(const std::vector<double>& sums) {
  torch::Tensor out = torch::empty({static_cast<std::int64_t>(sums.size())}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  for (std::size_t i = 0; i < sums.size(); ++i) o[i] = static_cast<float>(sums[i]);
  return out;
}

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, double eps) {
    const torch::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
    const std::int64_t n = weight.numel(), rows = x.numel() / n;
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor rstd = torch::empty({rows}, torch::kFloat32);
    const float *xp = x.data_ptr<float>(), *w = weight.data_ptr<float>();
    float *yp = y.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    for (std::int64_t row = 0; row < rows; ++row) {
      const float* xr = xp + row * n;
      float* yr = yp + row * n;
      const float r = rp[row] = inverse_rms(xr, n, eps);
      for (std::int64_t i = 0; i < n; ++i) yr[i] = xr[i] * r * w[i];
    }
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const torch::Tensor gy = grads[0].contiguous();
    const std::int64_t n = weight.numel(), rows = x.numel() / n;
    torch::Tensor gx = torch::empty_like(x);
    std::vector<double> gw(static_cast<std::size_t>(n), 0.0);
    const float *xp = x.data_ptr<float>(), *w = weight.data_ptr<float>(), *g = gy.data_ptr<float>(),
                *rp = rstd.data_ptr<float>();
    float* gxp = gx.data_ptr<float>();
    for (std::int64_t row = 0; row < rows; ++row)
      rms_norm_row_backward(xp + row * n, w, g + row * n, rp[row], n, gxp + row * n, gw.data());
    return {gx, to_float(gw), torch::Tensor()};
  }
};

struct SwiGlu : torch::autograd::Function<SwiGlu> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& fc1_in) {
    const torch::Tensor fc1 = fc1_in.contiguous();
    const std::int64_t width = fc1.size(-1), f = width / 2, rows = fc1.numel() / width;
    std::vector<std::int64_t> shape = fc1.sizes().vec();
    shape.back() = f;
    torch::Tensor out = torch::empty(shape, torch::kFloat32);
    torch::Tensor sig = torch::empty({rows, f}, torch::kFloat32);
    const float* in = fc1.data_ptr<float>();
    float *o = out.data_ptr<float>(), *sp = sig.data_ptr<float>();
    for (std::int64_t row = 0; row < rows; ++row) {
      const float *a = in + row * width, *b = a + f;
      float *orow = o + row * f, *srow = sp + row * f;
      for (std::int64_t j = 0; j < f; ++j) {
        const float s = 1.0f / (1.0f + std::exp(-a[j]));
        srow[j] = s;
        orow[j] = a[j] * s * b[j];
      }
    }
    ctx->save_for_backward({fc1, sig});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &fc1 = saved[0], &sig = saved[1];
    const torch::Tensor g = grads[0].contiguous();
    const std::int64_t width = fc1.size(-1), f = width / 2, rows = fc1.numel() / width;
    torch::Tensor grad = torch::empty_like(fc1);
    const float *in = fc1.data_ptr<float>(), *sp = sig.data_ptr<float>(), *gp = g.data_ptr<float>();
    float* out = grad.data_ptr<float>();
    for (std::int64_t row = 0; row < rows; ++row) {
      const float *a = in + row * width, *b = a + f, *s = sp + row * f, *go = gp + row * f;
      float *ga = out + row * width, *gb = ga + f;
      for (std::int64_t j = 0; j < f; ++j) {
        // d silu(a) / da = s (1 + a (1 - s)) with s = sigmoid(a).
        ga[j] = go[j] * b[j] * s[j] * (1.0f + a[j] * (1.0f - s[j]));
        gb[j] = go[j] * a[j] * s[j];
      }
    }
    return {grad};
  }
};

// The geometry of fused_attention_heads, kept through autograd as integers.
struct Heads {
  std::int64_t batch, seq, groups, per_group, d;
  std::int64_t slots() const { return per_group + 2; }
  // Offset of head slot `slot` (0..P-1 query, P key, P+1 value) of (b, s, g) in qkv.
  std::int64_t qkv_at(std::int64_t b, std::int64_t s, std::int64_t g, std::int64_t slot) const {
    return (((b * seq + s) * groups + g) * slots() + slot) * d;
  }
  std::int64_t q_at(std::int64_t b, std::int64_t s, std::int64_t g, std::int64_t p) const {
    return (((b * groups + g) * seq + s) * per_group + p) * d;
  }
  std::int64_t kv_at(std::int64_t b, std::int64_t s, std::int64_t g) const {
    return ((b * groups + g) * seq + s) * d;
  }
};

// RoPE of one head at one position: out = x * cos + [-x2, x1] * sin.
void rope_forward(const float* x, const float* cos, const float* sin, std::int64_t d, float* out) {
  const std::int64_t half = d / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    out[i] = x[i] * cos[i] - x[i + half] * sin[i];
    out[i + half] = x[i + half] * cos[i + half] + x[i] * sin[i + half];
  }
}

// Its transpose: gx = g * cos + [g2 * sin2, -g1 * sin1].
void rope_backward(const float* g, const float* cos, const float* sin, std::int64_t d, float* gx) {
  const std::int64_t half = d / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    gx[i] = g[i] * cos[i] + g[i + half] * sin[i + half];
    gx[i + half] = g[i + half] * cos[i + half] - g[i] * sin[i];
  }
}

struct AttentionHeadsFn : torch::autograd::Function<AttentionHeadsFn> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& qkv_in,
                               const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                               const torch::Tensor& cos_in, const torch::Tensor& sin_in,
                               std::int64_t groups, std::int64_t per_group, std::int64_t d,
                               double eps) {
    const torch::Tensor qkv = qkv_in.contiguous(), cos = cos_in.contiguous(),
                        sin = sin_in.contiguous();
    const Heads h{qkv.size(0), qkv.size(1), groups, per_group, d};
    const bool norm = q_norm.numel() > 0;  // empty: no qk-norm
    const torch::Tensor qw = norm ? q_norm.contiguous() : torch::Tensor();
    const torch::Tensor kw = norm ? k_norm.contiguous() : torch::Tensor();
    torch::Tensor q = torch::empty({h.batch, groups, h.seq, per_group, d}, torch::kFloat32);
    torch::Tensor k = torch::empty({h.batch, groups, h.seq, d}, torch::kFloat32);
    torch::Tensor v = torch::empty({h.batch, groups, h.seq, d}, torch::kFloat32);
    const float *in = qkv.data_ptr<float>(), *cp = cos.data_ptr<float>(),
                *sp = sin.data_ptr<float>();
    const float* qwp = norm ? qw.data_ptr<float>() : nullptr;
    const float* kwp = norm ? kw.data_ptr<float>() : nullptr;
    float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    std::vector<float> normed(static_cast<std::size_t>(d));
    for (std::int64_t b = 0; b < h.batch; ++b) {
      for (std::int64_t s = 0; s < h.seq; ++s) {
        const float *c = cp + s * d, *sn = sp + s * d;
        for (std::int64_t g = 0; g < groups; ++g) {
          for (std::int64_t slot = 0; slot <= per_group; ++slot) {
            const float* u = in + h.qkv_at(b, s, g, slot);
            const float* w = slot < per_group ? qwp : kwp;
            const float* x = u;
            if (norm) {
              const float r = inverse_rms(u, d, eps);
              for (std::int64_t i = 0; i < d; ++i) normed[i] = u[i] * r * w[i];
              x = normed.data();
            }
            float* dst = slot < per_group ? qp + h.q_at(b, s, g, slot) : kp + h.kv_at(b, s, g);
            rope_forward(x, c, sn, d, dst);
          }
          const float* u = in + h.qkv_at(b, s, g, per_group + 1);
          std::copy(u, u + d, vp + h.kv_at(b, s, g));
        }
      }
    }
    ctx->save_for_backward({qkv, norm ? qw : q_norm, norm ? kw : k_norm, cos, sin});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["per_group"] = per_group;
    ctx->saved_data["d"] = d;
    ctx->saved_data["eps"] = eps;
    return {q, k, v};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &qkv = saved[0], &qw = saved[1], &kw = saved[2], &cos = saved[3],
                        &sin = saved[4];
    const Heads h{qkv.size(0), qkv.size(1), ctx->saved_data["groups"].toInt(),
                  ctx->saved_data["per_group"].toInt(), ctx->saved_data["d"].toInt()};
    const double eps = ctx->saved_data["eps"].toDouble();
    const std::int64_t d = h.d;
    const bool norm = qw.numel() > 0;
    // An output the loss does not use has an undefined gradient: zeros.
    const auto grad_or_zero = [&](std::size_t i, std::vector<std::int64_t> shape) {
      return grads[i].defined() ? grads[i].contiguous() : torch::zeros(shape, torch::kFloat32);
    };
    const torch::Tensor gq = grad_or_zero(0, {h.batch, h.groups, h.seq, h.per_group, d});
    const torch::Tensor gk = grad_or_zero(1, {h.batch, h.groups, h.seq, d});
    const torch::Tensor gv = grad_or_zero(2, {h.batch, h.groups, h.seq, d});
    torch::Tensor gqkv = torch::empty_like(qkv);
    std::vector<double> gqw(norm ? static_cast<std::size_t>(d) : 0, 0.0), gkw(gqw);
    const float *in = qkv.data_ptr<float>(), *cp = cos.data_ptr<float>(),
                *sp = sin.data_ptr<float>(), *gqp = gq.data_ptr<float>(),
                *gkp = gk.data_ptr<float>(), *gvp = gv.data_ptr<float>();
    const float* qwp = norm ? qw.data_ptr<float>() : nullptr;
    const float* kwp = norm ? kw.data_ptr<float>() : nullptr;
    float* out = gqkv.data_ptr<float>();
    std::vector<float> gn(static_cast<std::size_t>(d));
    for (std::int64_t b = 0; b < h.batch; ++b) {
      for (std::int64_t s = 0; s < h.seq; ++s) {
        const float *c = cp + s * d, *sn = sp + s * d;
        for (std::int64_t g = 0; g < h.groups; ++g) {
          for (std::int64_t slot = 0; slot <= h.per_group; ++slot) {
            const bool is_q = slot < h.per_group;
            const float* go = is_q ? gqp + h.q_at(b, s, g, slot) : gkp + h.kv_at(b, s, g);
            float* gu = out + h.qkv_at(b, s, g, slot);
            if (!norm) {
              rope_backward(go, c, sn, d, gu);
              continue;
            }
            rope_backward(go, c, sn, d, gn.data());
            const float* u = in + h.qkv_at(b, s, g, slot);
            rms_norm_row_backward(u, is_q ? qwp : kwp, gn.data(), inverse_rms(u, d, eps), d, gu,
                                  is_q ? gqw.data() : gkw.data());
          }
          const float* gvr = gvp + h.kv_at(b, s, g);
          std::copy(gvr, gvr + d, out + h.qkv_at(b, s, g, h.per_group + 1));
        }
      }
    }
    const torch::Tensor none;
    return {gqkv,
            norm ? to_float(gqw) : none,
            norm ? to_float(gkw) : none,
            none,
            none,
            none,
            none,
            none,
            none};
  }
};

}  // namespace

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  CANZONA_REQUIRE(weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) &&
                      x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                  "fused_rms_norm takes fp32 x [..., h] and weight [h]");
  return RmsNorm::apply(x, weight, eps);
}

torch::Tensor fused_swiglu(const torch::Tensor& fc1) {
  CANZONA_REQUIRE(fc1.dim() >= 1 && fc1.size(-1) % 2 == 0 && fc1.scalar_type() == torch::kFloat32,
                  "fused_swiglu takes fp32 [..., 2f]");
  return SwiGlu::apply(fc1);
}

AttentionHeads fused_attention_heads(const torch::Tensor& qkv, std::int64_t groups,
                                     std::int64_t per_group, std::int64_t head_dim,
                                     const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                                     double eps, const torch::Tensor& cos,
                                     const torch::Tensor& sin) {
  CANZONA_REQUIRE(groups >= 1 && per_group >= 1 && head_dim >= 2 && head_dim % 2 == 0,
                  "fused_attention_heads: groups ", groups, ", heads per group ", per_group,
                  ", head_dim ", head_dim, " (even) must be positive");
  CANZONA_REQUIRE(qkv.dim() == 3 && qkv.size(2) == groups * (per_group + 2) * head_dim &&
                      qkv.scalar_type() == torch::kFloat32,
                  "fused_attention_heads takes fp32 qkv [B, S, groups * (per_group + 2) * d]");
  CANZONA_REQUIRE(
      q_norm.defined() == k_norm.defined() &&
          (!q_norm.defined() || (q_norm.numel() == head_dim && k_norm.numel() == head_dim)),
      "fused_attention_heads: q_norm and k_norm are both [d] or both absent");
  CANZONA_REQUIRE(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) >= qkv.size(1) &&
                      cos.size(1) == head_dim,
                  "fused_attention_heads: RoPE tables [S, d] do not cover the sequence");
  const torch::Tensor c = cos.narrow(0, 0, qkv.size(1)), s = sin.narrow(0, 0, qkv.size(1));
  // Autograd records every tensor input's device, so "no qk-norm" travels as empty tensors.
  const torch::Tensor none = torch::empty({0}, torch::kFloat32);
  const variable_list out = AttentionHeadsFn::apply(qkv, q_norm.defined() ? q_norm : none,
                                                    k_norm.defined() ? k_norm : none, c, s, groups,
                                                    per_group, head_dim, eps);
  return {out[0], out[1], out[2]};
}

}  // namespace canzona::train
