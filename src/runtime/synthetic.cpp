#include "synthetic.h"

#include <vector>

#include "canzona/common/error.h"

namespace canzona::runtime {
namespace {

constexpr std::uint64_t kInitStream = 0x696e6974ULL;  // "init"
constexpr std::uint64_t kGradStream = 0x67726164ULL;  // "grad"

// Calls value(local_index, global_index) for every element of TP rank t's shard, local
// row-major.
template <typename F>
void for_each_local(const model::ParamSpec& p, int tp, int t, F&& value) {
  const std::int64_t rows = p.rows();
  const std::int64_t cols = p.cols();
  if (p.tp_split_dim < 0 || tp == 1) {
    for (std::int64_t i = 0; i < rows * cols; ++i) value(i, i);
    return;
  }
  CANZONA_REQUIRE((p.tp_split_dim == 0 ? rows : cols) % tp == 0, "param '", p.name,
                  "': split dim not divisible by tp=", tp);
  if (p.tp_split_dim == 0) {
    const std::int64_t local = rows / tp * cols;
    const std::int64_t base = t * local;
    for (std::int64_t i = 0; i < local; ++i) value(i, base + i);
    return;
  }
  const std::int64_t local_cols = cols / tp;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < local_cols; ++c)
      value(r * local_cols + c, r * cols + t * local_cols + c);
}

}  // namespace

std::uint64_t init_key(std::uint64_t seed, int param) {
  return splitmix64(splitmix64(splitmix64(seed) ^ kInitStream) ^ static_cast<std::uint64_t>(param));
}

std::uint64_t grad_key(std::uint64_t seed, int step, int dp_rank, int param) {
  std::uint64_t k = splitmix64(splitmix64(seed) ^ kGradStream);
  k = splitmix64(k ^ static_cast<std::uint64_t>(step));
  k = splitmix64(k ^ static_cast<std::uint64_t>(dp_rank));
  return splitmix64(k ^ static_cast<std::uint64_t>(param));
}

float unit_value(std::uint64_t key, std::int64_t element) {
  const std::uint64_t h = splitmix64(key ^ static_cast<std::uint64_t>(element));
  const std::int64_t k = static_cast<std::int64_t>(h >> 40);  // 24 bits
  return static_cast<float>(k - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
}

void fill_init(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
               std::uint64_t seed, std::span<float> out) {
  CANZONA_CHECK_EQ(static_cast<std::int64_t>(out.size()), param.local_numel(tp));
  const std::uint64_t key = init_key(seed, param_index);
  const bool matrix = param.shape.size() == 2;
  for_each_local(param, tp, tp_rank, [&](std::int64_t i, std::int64_t g) {
    const float u = unit_value(key, g);
    out[i] = matrix ? 0.02f * u : 1.0f + 0.02f * u;
  });
}

void fill_grad(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
               std::uint64_t seed, int step, int dp_rank, std::span<float> out) {
  CANZONA_CHECK_EQ(static_cast<std::int64_t>(out.size()), param.local_numel(tp));
  CANZONA_CHECK(step >= 1, "gradient step ", step);
  const std::uint64_t key = grad_key(seed, step, dp_rank, param_index);
  for_each_local(param, tp, tp_rank,
                 [&](std::int64_t i, std::int64_t g) { out[i] = unit_value(key, g); });
}

void fill_init_typed(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
                     std::uint64_t seed, TypedSpan out) {
  if (out.dtype() == DType::kF32)
    return fill_init(param, param_index, tp, tp_rank, seed, out.as<float>());
  std::vector<float> values(static_cast<std::size_t>(out.size()));
  fill_init(param, param_index, tp, tp_rank, seed, std::span<float>(values));
  copy_cast(ConstTypedSpan(values), out);
}

void fill_grad_typed(const model::ParamSpec& param, int param_index, int tp, int tp_rank,
                     std::uint64_t seed, int step, int dp_rank, DType model_dtype, TypedSpan out) {
  if (out.dtype() == DType::kF32) {
    const std::span<float> values = out.as<float>();
    fill_grad(param, param_index, tp, tp_rank, seed, step, dp_rank, values);
    if (model_dtype == DType::kBF16)
      for (float& x : values) x = round_to_bf16(x);
    return;
  }
  std::vector<float> values(static_cast<std::size_t>(out.size()));
  fill_grad(param, param_index, tp, tp_rank, seed, step, dp_rank, std::span<float>(values));
  copy_cast(ConstTypedSpan(values), out);
}

}  // namespace canzona::runtime
