// Element types of the data plane: fp32 and bf16 (docs/precision.md).
//
// Terms. A *dtype* is the element type of a buffer or a collective's data: DType::kF32 (IEEE
// binary32, 4 bytes) or DType::kBF16 (bfloat16: the top 16 bits of a binary32, 2 bytes). A *run
// precision* is the dtype of a run's params and gradients (--precision fp32 | bf16); main params
// and optimizer state are fp32 either way. Casting fp32 to bf16 rounds to nearest, ties to even,
// and turns every NaN into the quiet NaN 0x7FC0, exactly as c10::BFloat16's constructor does;
// bf16 to fp32 is exact (the 16 bits become the top half). A *typed span* names a buffer by its
// first element, its number of elements and its dtype, so one function can serve both dtypes;
// TypedSpan::as<T>() gives the std::span back and throws canzona::Error when the dtype differs.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace canzona {

enum class DType : std::uint8_t { kF32, kBF16 };
constexpr int kNumDTypes = 2;

// Bytes per element: 4 or 2.
constexpr std::int64_t dtype_bytes(DType dtype) {
  return dtype == DType::kBF16 ? 2 : 4;
}
// "fp32" | "bf16": the --precision spelling, also used in reports and JSON.
const char* to_string(DType dtype);
// "fp32" | "bf16"; throws UsageError naming `flag` (e.g. "--precision") otherwise.
DType parse_precision(const std::string& name, const char* flag = "--precision");

// One bfloat16 value, by its bits.
struct bf16 {
  std::uint16_t bits = 0;
  friend bool operator==(bf16, bf16) = default;
};

// Round to nearest even (NaN -> 0x7FC0), as c10::BFloat16(float).
inline bf16 to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16{0x7FC0};
  const std::uint32_t bias = ((u >> 16) & 1u) + 0x7FFFu;
  return bf16{static_cast<std::uint16_t>((u + bias) >> 16)};
}
inline float to_float(bf16 x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16);
}
// Element-wise casts between spans of the same size (Error otherwise).
void cast(std::span<const float> from, std::span<bf16> to);
void cast(std::span<const bf16> from, std::span<float> to);
// x rounded to bf16 and back: the value a bf16 buffer keeps of x.
inline float round_to_bf16(float x) {
  return to_float(to_bf16(x));
}

class ConstTypedSpan;

// A typed pointer: the first element of some elements of `dtype` (their count is the caller's).
class TypedPtr {
 public:
  TypedPtr() = default;
  TypedPtr(void* data, DType dtype) : data_(static_cast<std::byte*>(data)), dtype_(dtype) {}
  TypedPtr(float* p) : TypedPtr(p, DType::kF32) {}
  TypedPtr(bf16* p) : TypedPtr(p, DType::kBF16) {}
  std::byte* data() const { return data_; }
  DType dtype() const { return dtype_; }
  // n elements further on.
  TypedPtr operator+(std::int64_t n) const { return {data_ + n * dtype_bytes(dtype_), dtype_}; }
  template <typename T>
  T* as() const;

 private:
  std::byte* data_ = nullptr;
  DType dtype_ = DType::kF32;
};

class ConstTypedPtr {
 public:
  ConstTypedPtr() = default;
  ConstTypedPtr(const void* data, DType dtype)
      : data_(static_cast<const std::byte*>(data)), dtype_(dtype) {}
  ConstTypedPtr(TypedPtr p) : ConstTypedPtr(p.data(), p.dtype()) {}
  ConstTypedPtr(const float* p) : ConstTypedPtr(p, DType::kF32) {}
  ConstTypedPtr(const bf16* p) : ConstTypedPtr(p, DType::kBF16) {}
  ConstTypedPtr(float* p) : ConstTypedPtr(static_cast<const float*>(p)) {}
  ConstTypedPtr(bf16* p) : ConstTypedPtr(static_cast<const bf16*>(p)) {}
  const std::byte* data() const { return data_; }
  DType dtype() const { return dtype_; }
  ConstTypedPtr operator+(std::int64_t n) const {
    return {data_ + n * dtype_bytes(dtype_), dtype_};
  }
  template <typename T>
  const T* as() const;

 private:
  const std::byte* data_ = nullptr;
  DType dtype_ = DType::kF32;
};

// A mutable buffer of `size` elements of `dtype` at `data`.
class TypedSpan {
 public:
  TypedSpan() = default;
  TypedSpan(void* data, std::int64_t size, DType dtype) : data_(data), size_(size), dtype_(dtype) {}
  TypedSpan(std::span<float> s) : TypedSpan(s.data(), std::ssize(s), DType::kF32) {}
  TypedSpan(std::span<bf16> s) : TypedSpan(s.data(), std::ssize(s), DType::kBF16) {}
  TypedSpan(std::vector<float>& v) : TypedSpan(std::span<float>(v)) {}
  TypedSpan(std::vector<bf16>& v) : TypedSpan(std::span<bf16>(v)) {}

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  DType dtype() const { return dtype_; }
  std::int64_t size_bytes() const { return size_ * dtype_bytes(dtype_); }
  TypedPtr ptr() const { return {data_, dtype_}; }
  // Elements [offset, offset + count); Error when outside.
  TypedSpan subspan(std::int64_t offset, std::int64_t count) const;
  template <typename T>
  std::span<T> as() const;

 private:
  void* data_ = nullptr;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

// A read-only buffer of `size` elements of `dtype` at `data`.
class ConstTypedSpan {
 public:
  ConstTypedSpan() = default;
  ConstTypedSpan(const void* data, std::int64_t size, DType dtype)
      : data_(data), size_(size), dtype_(dtype) {}
  ConstTypedSpan(TypedSpan s) : ConstTypedSpan(s.data(), s.size(), s.dtype()) {}
  ConstTypedSpan(std::span<const float> s) : ConstTypedSpan(s.data(), std::ssize(s), DType::kF32) {}
  ConstTypedSpan(std::span<const bf16> s) : ConstTypedSpan(s.data(), std::ssize(s), DType::kBF16) {}
  ConstTypedSpan(std::span<float> s) : ConstTypedSpan(std::span<const float>(s)) {}
  ConstTypedSpan(std::span<bf16> s) : ConstTypedSpan(std::span<const bf16>(s)) {}
  ConstTypedSpan(const std::vector<float>& v) : ConstTypedSpan(std::span<const float>(v)) {}
  ConstTypedSpan(const std::vector<bf16>& v) : ConstTypedSpan(std::span<const bf16>(v)) {}

  const std::byte* data() const { return static_cast<const std::byte*>(data_); }
  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  DType dtype() const { return dtype_; }
  std::int64_t size_bytes() const { return size_ * dtype_bytes(dtype_); }
  ConstTypedPtr ptr() const { return {data_, dtype_}; }
  ConstTypedSpan subspan(std::int64_t offset, std::int64_t count) const;
  template <typename T>
  std::span<const T> as() const;

 private:
  const void* data_ = nullptr;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::kBF16;
}

namespace detail {
[[noreturn]] void throw_dtype_mismatch(DType have, DType want);
}

template <typename T>
std::span<T> TypedSpan::as() const {
  if (dtype_ != dtype_of<T>()) detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return {static_cast<T*>(data_), static_cast<std::size_t>(size_)};
}

template <typename T>
T* TypedPtr::as() const {
  if (dtype_ != dtype_of<T>()) detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return reinterpret_cast<T*>(data_);
}

template <typename T>
const T* ConstTypedPtr::as() const {
  if (dtype_ != dtype_of<T>()) detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return reinterpret_cast<const T*>(data_);
}

template <typename T>
std::span<const T> ConstTypedSpan::as() const {
  if (dtype_ != dtype_of<T>()) detail::throw_dtype_mismatch(dtype_, dtype_of<T>());
  return {static_cast<const T*>(data_), static_cast<std::size_t>(size_)};
}

// Copies `from` into `to` (same size), casting when the dtypes differ (fp32 -> bf16 rounds to
// nearest even).
void copy_cast(ConstTypedSpan from, TypedSpan to);
// The same for n elements at typed pointers.
void copy_cast(ConstTypedPtr from, TypedPtr to, std::int64_t n);
// out[j] = fp32 value of x[j]: reads either dtype into fp32.
void read_f32(ConstTypedSpan x, std::span<float> out);
// The index of the first NaN or infinity of x, -1 when every element is finite (an element is
// non-finite when its exponent bits are all ones; the scan is a vectorisable bit test).
std::int64_t first_non_finite(ConstTypedSpan x);

// Sums P equal blocks element-wise in rank order, ((x_0 + x_1) + x_2) + ... in fp32, and writes
// the result in the blocks' dtype (bf16: the fp32 sum rounded once, to nearest even). `blocks`
// holds P * block_len elements, block q at q * block_len; `out` has block_len elements of the
// same dtype. The deterministic sum of every collective (comm/communicator.h).
void sum_in_rank_order(ConstTypedSpan blocks, int num_blocks, TypedSpan out);

}  // namespace canzona
