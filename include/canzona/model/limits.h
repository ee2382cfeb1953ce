// Bounds on every size a model source (preset, Hugging Face config.json, param list) may ask for.
// A tiny file must not make us allocate without bound or overflow int64, so each count, dimension
// and product is checked against these limits before anything is built; the UsageError names the
// limit ("num_hidden_layers = 1000000000 must lie in [1, 4096] (kMaxLayers)").
//
// Why these values. The largest dense models we know (Llama-3.1-405B: hidden 16384, ffn 53248,
// 126 layers, 128 heads, 8 KV heads, head_dim 128, vocab 128256; Qwen3-32B: 64 layers, 64 heads,
// vocab 151936) sit one to two orders of magnitude inside every bound. The element caps keep every
// derived count far from int64: a stage buffer (< kMaxModelNumel plus padding) times a rank count
// (< 2^20) stays below 2^63, and byte counts (x 4 bytes x a few optimizer states) below 2^50.
#pragma once

#include <cstdint>

namespace canzona::model {

inline constexpr std::int64_t kMaxLayers = 4096;                      // transformer layers
inline constexpr std::int64_t kMaxExperts = 4096;                     // experts per MoE layer
inline constexpr std::int64_t kMaxHeads = std::int64_t{1} << 16;      // attention heads, KV heads
inline constexpr std::int64_t kMaxHeadDim = std::int64_t{1} << 12;    // 4096 (real: 64 ... 256)
inline constexpr std::int64_t kMaxHidden = std::int64_t{1} << 17;     // 131072 (real: <= 16384)
inline constexpr std::int64_t kMaxFfnHidden = std::int64_t{1} << 20;  // intermediate_size
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;      // before padding
inline constexpr std::int64_t kMaxPositions = std::int64_t{1}
                                              << 24;  // max_position_embeddings (real: 2k ... 1M)
inline constexpr std::int64_t kMaxDim = std::int64_t{1} << 32;  // any dimension of a param shape
inline constexpr int kMaxTensorDims = 8;  // dims of a param's own tensor shape (PyTorch: 0-D...)
inline constexpr std::int64_t kMaxParamNumel = std::int64_t{1} << 40;  // elements of one param
inline constexpr std::int64_t kMaxModelNumel = std::int64_t{1} << 42;  // elements of all params
inline constexpr std::int64_t kMaxParams = std::int64_t{1} << 20;      // params in one model
inline constexpr std::int64_t kMaxPieces = std::int64_t{1} << 20;     // pieces (tasks) in one model
inline constexpr std::int64_t kMaxRowRanges = std::int64_t{1} << 22;  // piece row ranges, model

}  // namespace canzona::model
