// Zeroed memory of its own pages, for `numel` elements of one dtype, (an anonymous private
// mapping), so that ranges of it can be handed back to the operating system while the addresses
// stay valid: ZeRO-3 keeps the engine's param and gradient buffers at fixed addresses (the model's
// tensors are views of them) and frees everything outside this rank's DP shard between uses. A
// released range reads as zeros; writing it again faults fresh pages in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "canzona/common/dtype.h"

namespace canzona::engine {

class PageBuffer {
 public:
  PageBuffer() = default;
  // Zeroed; throws Error when the mapping fails.
  PageBuffer(std::int64_t numel, DType dtype);
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  TypedSpan span() { return {data_, numel_, dtype_}; }
  ConstTypedSpan span() const { return {data_, numel_, dtype_}; }
  DType dtype() const { return dtype_; }
  std::int64_t size() const { return numel_; }

  // Elements [begin, end) become zero and every whole page inside them goes back to the system
  // (madvise MADV_DONTNEED); the parts of the two edge pages that lie inside are zeroed in place
  // (those pages stay resident: they hold neighbouring elements). Returns the bytes given back.
  std::int64_t release(std::int64_t begin, std::int64_t end);
  // Bytes of the buffer's pages resident in memory now (mincore): a measurement, not an account.
  std::int64_t resident_bytes() const;

 private:
  std::byte* data_ = nullptr;
  std::int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  std::size_t mapped_ = 0;  // bytes mapped
};

}  // namespace canzona::engine
