// Fused element-wise kernels of the decoder (fused.h).
#include "fused.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "canzona/common/dtype.h"
#include "canzona/common/error.h"

namespace canzona::train {
namespace {

using c10::BFloat16;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Every kernel is a template over the element type T of its activations and weights (float, or
// c10::BFloat16 under --precision bf16). Values are loaded as float (exact), all arithmetic is
// float (double where noted), and a bf16 output is rounded once as it is stored (c10::BFloat16's
// constructor: to nearest, ties to even). Never use c10::BFloat16's own operators here: they round
// every intermediate.
template <typename T>
float ld(T v) {
  return static_cast<float>(v);
}
// Loads and stores of bf16 by their bits, with canzona's conversions (common/dtype.h): the same
// values as c10::BFloat16's (to nearest even, NaN -> 0x7FC0), written without its branch on NaN,
// so the compiler vectorises the loops.
template <>
float ld(BFloat16 v) {
  return to_float(bf16{v.x});
}
template <typename T>
T st(float v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16(to_bf16(v).bits, BFloat16::from_bits());
  } else {
    return v;
  }
}

// exp(x) as 2^k p(r), r = x - k ln 2 in [-ln2/2, ln2/2], p its degree-6 Taylor polynomial: within
// 3e-7 of exp relative (4 fp32 ulps) where the result is normal, 0 below 2^-126 and +Inf above
// 2^128. Plain arithmetic and integer selects, so a loop of it vectorises (std::exp does not);
// used where the result is rounded to bf16 (8 significant bits).
inline float exp_bf16_path(float x) {
  const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
  const float r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  std::int32_t k = static_cast<std::int32_t>(kf);
  k = k < 128 ? k : 128;    // 2^128: the exponent of +Inf
  k = k > -127 ? k : -127;  // 2^-127 as 0
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23);
}

// Calls fn with a value of the element type of `t` (float or c10::BFloat16).
template <typename F>
auto dispatch(const torch::Tensor& t, F&& fn) {
  if (t.scalar_type() == torch::kBFloat16) return fn(BFloat16());
  return fn(0.0f);
}

// sum of (x_i y_i) z_i (z = nullptr: of x_i y_i) over n values in double: in order for fp32
// (its bits as they always were); for bf16 in 8 interleaved partial sums added pairwise, which
// breaks the chain of dependent double additions (4x faster; the result rounds to bf16).
template <typename A, typename B, typename C>
double dot3(const A* x, const B* y, const C* z, std::int64_t n) {
  const auto term = [&](std::int64_t i) {
    const double xy = static_cast<double>(ld(x[i])) * ld(y[i]);
    return z == nullptr ? xy : xy * ld(z[i]);
  };
  if constexpr (!std::is_same_v<A, BFloat16> && !std::is_same_v<B, BFloat16>) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += term(i);
    return sum;
  } else {
    double part[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) part[k] += term(i + k);
    for (; i < n; ++i) part[0] += term(i);
    return ((part[0] + part[1]) + (part[2] + part[3])) +
           ((part[4] + part[5]) + (part[6] + part[7]));
  }
}

// 1 / sqrt(mean(u^2) + eps) over n values, the sum in double.
template <typename T>
float inverse_rms(const T* u, std::int64_t n, double eps) {
  const double sum = dot3(u, u, static_cast<const T*>(nullptr), n);
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
}

// RMSNorm backward of one row: gx = r w gy - x r^3 / n * sum(gy w x); gw += gy x r.
template <typename X, typename G, typename O>
void rms_norm_row_backward(const X* x, const X* w, const G* gy, float r, std::int64_t n, O* gx,
                           double* gw) {
  const double dot = dot3(gy, w, x, n);  // (gy w) x, as it always was in fp32
  const float coef =
      static_cast<float>(static_cast<double>(r) * r * r * dot / static_cast<double>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    gx[i] = st<O>(r * ld(w[i]) * ld(gy[i]) - ld(x[i]) * coef);
    gw[i] += static_cast<double>(ld(gy[i])) * ld(x[i]) * r;
  }
}

// A weight's gradient from its double sums: rounded to fp32, then (bf16 weights) to bf16.
torch::Tensor weight_grad(const std::vector<double>& sums, torch::ScalarType type) {
  torch::Tensor out = torch::empty({static_cast<std::int64_t>(sums.size())}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  for (std::size_t i = 0; i < sums.size(); ++i) o[i] = static_cast<float>(sums[i]);
  return type == torch::kFloat32 ? out : out.to(type);
}

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, double eps) {
    const torch::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
    const std::int64_t n = weight.numel(), rows = x.numel() / n;
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor rstd = torch::empty({rows}, torch::kFloat32);
    dispatch(x, [&](auto tag) {
      using T = decltype(tag);
      const T *xp = x.data_ptr<T>(), *w = weight.data_ptr<T>();
      T* yp = y.data_ptr<T>();
      float* rp = rstd.data_ptr<float>();
      for (std::int64_t row = 0; row < rows; ++row) {
        const T* xr = xp + row * n;
        T* yr = yp + row * n;
        const float r = rp[row] = inverse_rms(xr, n, eps);
        for (std::int64_t i = 0; i < n; ++i) yr[i] = st<T>(ld(xr[i]) * r * ld(w[i]));
      }
    });
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const torch::Tensor gy = grads[0].to(x.scalar_type()).contiguous();
    const std::int64_t n = weight.numel(), rows = x.numel() / n;
    torch::Tensor gx = torch::empty_like(x);
    std::vector<double> gw(static_cast<std::size_t>(n), 0.0);
    dispatch(x, [&](auto tag) {
      using T = decltype(tag);
      const T *xp = x.data_ptr<T>(), *w = weight.data_ptr<T>(), *g = gy.data_ptr<T>();
      const float* rp = rstd.data_ptr<float>();
      T* gxp = gx.data_ptr<T>();
      for (std::int64_t row = 0; row < rows; ++row)
        rms_norm_row_backward(xp + row * n, w, g + row * n, rp[row], n, gxp + row * n, gw.data());
    });
    return {gx, weight_grad(gw, weight.scalar_type()), torch::Tensor()};
  }
};

struct SwiGlu : torch::autograd::Function<SwiGlu> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& fc1_in) {
    const torch::Tensor fc1 = fc1_in.contiguous();
    const std::int64_t width = fc1.size(-1), f = width / 2, rows = fc1.numel() / width;
    std::vector<std::int64_t> shape = fc1.sizes().vec();
    shape.back() = f;
    torch::Tensor out = torch::empty(shape, fc1.options());
    torch::Tensor sig = torch::empty({rows, f}, torch::kFloat32);
    dispatch(fc1, [&](auto tag) {
      using T = decltype(tag);
      const T* in = fc1.data_ptr<T>();
      T* o = out.data_ptr<T>();
      float* sp = sig.data_ptr<float>();
      for (std::int64_t row = 0; row < rows; ++row) {
        const T *a = in + row * width, *b = a + f;
        T* orow = o + row * f;
        float* srow = sp + row * f;
        if constexpr (std::is_same_v<T, BFloat16>) {
          // bf16: the sigmoid through exp_bf16_path (vectorised), the product in a second pass.
          for (std::int64_t j = 0; j < f; ++j) srow[j] = 1.0f / (1.0f + exp_bf16_path(-ld(a[j])));
          for (std::int64_t j = 0; j < f; ++j) orow[j] = st<T>(ld(a[j]) * srow[j] * ld(b[j]));
        } else {
          for (std::int64_t j = 0; j < f; ++j) {
            const float s = 1.0f / (1.0f + std::exp(-ld(a[j])));
            srow[j] = s;
            orow[j] = st<T>(ld(a[j]) * s * ld(b[j]));
          }
        }
      }
    });
    ctx->save_for_backward({fc1, sig});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &fc1 = saved[0], &sig = saved[1];
    const torch::Tensor g = grads[0].to(fc1.scalar_type()).contiguous();
    const std::int64_t width = fc1.size(-1), f = width / 2, rows = fc1.numel() / width;
    torch::Tensor grad = torch::empty_like(fc1);
    dispatch(fc1, [&](auto tag) {
      using T = decltype(tag);
      const T *in = fc1.data_ptr<T>(), *gp = g.data_ptr<T>();
      const float* sp = sig.data_ptr<float>();
      T* out = grad.data_ptr<T>();
      for (std::int64_t row = 0; row < rows; ++row) {
        const T *a = in + row * width, *b = a + f, *go = gp + row * f;
        const float* s = sp + row * f;
        T *ga = out + row * width, *gb = ga + f;
        for (std::int64_t j = 0; j < f; ++j) {
          // d silu(a) / da = s (1 + a (1 - s)) with s = sigmoid(a).
          ga[j] = st<T>(ld(go[j]) * ld(b[j]) * s[j] * (1.0f + ld(a[j]) * (1.0f - s[j])));
          gb[j] = st<T>(ld(go[j]) * ld(a[j]) * s[j]);
        }
      }
    });
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
template <typename I, typename O>
void rope_forward(const I* x, const float* cos, const float* sin, std::int64_t d, O* out) {
  const std::int64_t half = d / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    out[i] = st<O>(ld(x[i]) * cos[i] - ld(x[i + half]) * sin[i]);
    out[i + half] = st<O>(ld(x[i + half]) * cos[i + half] + ld(x[i]) * sin[i + half]);
  }
}

// Its transpose: gx = g * cos + [g2 * sin2, -g1 * sin1].
template <typename G, typename O>
void rope_backward(const G* g, const float* cos, const float* sin, std::int64_t d, O* gx) {
  const std::int64_t half = d / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    gx[i] = st<O>(ld(g[i]) * cos[i] + ld(g[i + half]) * sin[i + half]);
    gx[i + half] = st<O>(ld(g[i + half]) * cos[i + half] - ld(g[i]) * sin[i]);
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
    torch::Tensor q = torch::empty({h.batch, groups, h.seq, per_group, d}, qkv.options());
    torch::Tensor k = torch::empty({h.batch, groups, h.seq, d}, qkv.options());
    torch::Tensor v = torch::empty({h.batch, groups, h.seq, d}, qkv.options());
    dispatch(qkv, [&](auto tag) {
      using T = decltype(tag);
      const T* in = qkv.data_ptr<T>();
      const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
      const T* qwp = norm ? qw.data_ptr<T>() : nullptr;
      const T* kwp = norm ? kw.data_ptr<T>() : nullptr;
      T *qp = q.data_ptr<T>(), *kp = k.data_ptr<T>(), *vp = v.data_ptr<T>();
      std::vector<float> normed(static_cast<std::size_t>(d));
      for (std::int64_t b = 0; b < h.batch; ++b) {
        for (std::int64_t s = 0; s < h.seq; ++s) {
          const float *c = cp + s * d, *sn = sp + s * d;
          for (std::int64_t g = 0; g < groups; ++g) {
            for (std::int64_t slot = 0; slot <= per_group; ++slot) {
              const T* u = in + h.qkv_at(b, s, g, slot);
              T* dst = slot < per_group ? qp + h.q_at(b, s, g, slot) : kp + h.kv_at(b, s, g);
              if (!norm) {
                rope_forward(u, c, sn, d, dst);
                continue;
              }
              const T* w = slot < per_group ? qwp : kwp;
              const float r = inverse_rms(u, d, eps);
              for (std::int64_t i = 0; i < d; ++i) normed[i] = ld(u[i]) * r * ld(w[i]);
              rope_forward(normed.data(), c, sn, d, dst);
            }
            const T* u = in + h.qkv_at(b, s, g, per_group + 1);
            std::copy(u, u + d, vp + h.kv_at(b, s, g));
          }
        }
      }
    });
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
      return grads[i].defined() ? grads[i].to(qkv.scalar_type()).contiguous()
                                : torch::zeros(shape, qkv.options());
    };
    const torch::Tensor gq = grad_or_zero(0, {h.batch, h.groups, h.seq, h.per_group, d});
    const torch::Tensor gk = grad_or_zero(1, {h.batch, h.groups, h.seq, d});
    const torch::Tensor gv = grad_or_zero(2, {h.batch, h.groups, h.seq, d});
    torch::Tensor gqkv = torch::empty_like(qkv);
    std::vector<double> gqw(norm ? static_cast<std::size_t>(d) : 0, 0.0), gkw(gqw);
    dispatch(qkv, [&](auto tag) {
      using T = decltype(tag);
      const T *in = qkv.data_ptr<T>(), *gqp = gq.data_ptr<T>(), *gkp = gk.data_ptr<T>(),
              *gvp = gv.data_ptr<T>();
      const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
      const T* qwp = norm ? qw.data_ptr<T>() : nullptr;
      const T* kwp = norm ? kw.data_ptr<T>() : nullptr;
      T* out = gqkv.data_ptr<T>();
      std::vector<float> gn(static_cast<std::size_t>(d));
      for (std::int64_t b = 0; b < h.batch; ++b) {
        for (std::int64_t s = 0; s < h.seq; ++s) {
          const float *c = cp + s * d, *sn = sp + s * d;
          for (std::int64_t g = 0; g < h.groups; ++g) {
            for (std::int64_t slot = 0; slot <= h.per_group; ++slot) {
              const bool is_q = slot < h.per_group;
              const T* go = is_q ? gqp + h.q_at(b, s, g, slot) : gkp + h.kv_at(b, s, g);
              T* gu = out + h.qkv_at(b, s, g, slot);
              if (!norm) {
                rope_backward(go, c, sn, d, gu);
                continue;
              }
              rope_backward(go, c, sn, d, gn.data());
              const T* u = in + h.qkv_at(b, s, g, slot);
              rms_norm_row_backward(u, is_q ? qwp : kwp, gn.data(), inverse_rms(u, d, eps), d, gu,
                                    is_q ? gqw.data() : gkw.data());
            }
            const T* gvr = gvp + h.kv_at(b, s, g);
            std::copy(gvr, gvr + d, out + h.qkv_at(b, s, g, h.per_group + 1));
          }
        }
      }
    });
    const torch::Tensor none;
    return {gqkv,
            norm ? weight_grad(gqw, qw.scalar_type()) : none,
            norm ? weight_grad(gkw, kw.scalar_type()) : none,
            none,
            none,
            none,
            none,
            none,
            none};
  }
};

bool is_bf16(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16;
}

bool fp32_or_bf16(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat32 || is_bf16(t);
}

}  // namespace

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  CANZONA_REQUIRE(weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) &&
                      x.scalar_type() == weight.scalar_type() && fp32_or_bf16(x),
                  "fused_rms_norm takes fp32 or bf16 x [..., h] and weight [h] of one dtype");
  return RmsNorm::apply(x, weight, eps);
}

torch::Tensor fused_swiglu(const torch::Tensor& fc1) {
  CANZONA_REQUIRE(fc1.dim() >= 1 && fc1.size(-1) % 2 == 0 && fp32_or_bf16(fc1),
                  "fused_swiglu takes fp32 or bf16 [..., 2f]");
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
                      fp32_or_bf16(qkv) &&
                      (!q_norm.defined() || q_norm.scalar_type() == qkv.scalar_type()) &&
                      (!k_norm.defined() || k_norm.scalar_type() == qkv.scalar_type()),
                  "fused_attention_heads takes fp32 or bf16 qkv [B, S, groups * (per_group + 2) "
                  "* d] and qk-norm weights of its dtype");
  CANZONA_REQUIRE(
      q_norm.defined() == k_norm.defined() &&
          (!q_norm.defined() || (q_norm.numel() == head_dim && k_norm.numel() == head_dim)),
      "fused_attention_heads: q_norm and k_norm are both [d] or both absent");
  CANZONA_REQUIRE(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) >= qkv.size(1) &&
                      cos.size(1) == head_dim && cos.scalar_type() == torch::kFloat32 &&
                      sin.scalar_type() == torch::kFloat32,
                  "fused_attention_heads: fp32 RoPE tables [S, d] do not cover the sequence");
  const torch::Tensor c = cos.narrow(0, 0, qkv.size(1)), s = sin.narrow(0, 0, qkv.size(1));
  // Autograd records every tensor input's device, so "no qk-norm" travels as empty tensors.
  const torch::Tensor none = torch::empty({0}, qkv.options());
  const variable_list out = AttentionHeadsFn::apply(qkv, q_norm.defined() ? q_norm : none,
                                                    k_norm.defined() ? k_norm : none, c, s, groups,
                                                    per_group, head_dim, eps);
  return {out[0], out[1], out[2]};
}

}  // namespace canzona::train
