// Zeroed fp32 memory of its own pages (an anonymous private mapping), so that ranges of it can be
// handed back to the operating system while the addresses stay valid: ZeRO-3 keeps the engine's
// param and gradient buffers at fixed addresses (the model's tensors are views of them) and frees
// everything outside this rank's DP shard between uses. A released range reads as zeros; writing
// it again faults fresh pages in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace canzona::engine {

class PageBuffer {
 public:
  PageBuffer() = default;
  explicit PageBuffer(std::int64_t numel);  // zeroed; throws Error when the mapping fails
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::int64_t size() const { return numel_; }
  operator std::span<float>() { return {data_, static_cast<std::size_t>(numel_)}; }
  operator std::span<const float>() const { return {data_, static_cast<std::size_t>(numel_)}; }

  // Elements [begin, end) become zero and every whole page inside them goes back to the system
  // (madvise MADV_DONTNEED); the parts of the two edge pages that lie inside are zeroed in place
  // (those pages stay resident: they hold neighbouring elements). Returns the bytes given back.
  std::int64_t release(std::int64_t begin, std::int64_t end);
  // Bytes of the buffer's pages resident in memory now (mincore): a measurement, not an account.
  std::int64_t resident_bytes() const;

 private:
  float* data_ = nullptr;
  std::int64_t numel_ = 0;
  std::size_t mapped_ = 0;  // bytes mapped
};

}  // namespace canzona::engine
