#include "page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::engine {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace

PageBuffer::PageBuffer(std::int64_t numel, DType dtype) : numel_(numel), dtype_(dtype) {
  CANZONA_CHECK(numel >= 0, "PageBuffer of ", numel, " elements");
  if (numel == 0) return;
  mapped_ = static_cast<std::size_t>(numel * dtype_bytes(dtype));
  // Map 2 MiB more than needed and keep a 2 MiB-aligned window, so that transparent huge pages
  // (asked for with MADV_HUGEPAGE; a hint the kernel may ignore) can back it: a gathered bucket
  // then faults in once per 2 MiB instead of once per 4 KiB page.
  const std::size_t extra = kHugePage;
  void* p =
      mmap(nullptr, mapped_ + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CANZONA_CHECK(p != MAP_FAILED, "cannot map ", mapped_, " bytes: ", std::strerror(errno));
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) munmap(p, aligned - base);
  const std::size_t tail = base + mapped_ + extra - (aligned + mapped_);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + mapped_), tail);
  data_ = reinterpret_cast<std::byte*>(aligned);
  if (mapped_ >= kHugePage) madvise(data_, mapped_, MADV_HUGEPAGE);
}

PageBuffer::~PageBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      numel_(std::exchange(other.numel_, 0)),
      dtype_(other.dtype_),
      mapped_(std::exchange(other.mapped_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    numel_ = std::exchange(other.numel_, 0);
    dtype_ = other.dtype_;
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

std::int64_t PageBuffer::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const std::size_t page = page_bytes();
  const std::size_t pages = (mapped_ + page - 1) / page;
  std::vector<unsigned char> in(pages);
  const int rc = mincore(data_, mapped_, in.data());
  CANZONA_CHECK(rc == 0, "mincore of ", mapped_, " bytes: ", std::strerror(errno));
  std::int64_t resident = 0;
  for (unsigned char v : in) resident += (v & 1) ? static_cast<std::int64_t>(page) : 0;
  return resident;
}

std::int64_t PageBuffer::release(std::int64_t begin, std::int64_t end) {
  CANZONA_CHECK(0 <= begin && begin <= end && end <= numel_, "PageBuffer::release [", begin, ", ",
                end, ") of ", numel_);
  if (begin == end) return 0;
  const std::uintptr_t page = page_bytes();
  const std::int64_t size = dtype_bytes(dtype_);
  const auto first = reinterpret_cast<std::uintptr_t>(data_ + begin * size);
  const auto last = reinterpret_cast<std::uintptr_t>(data_ + end * size);
  const std::uintptr_t inner_begin = (first + page - 1) / page * page;
  const std::uintptr_t inner_end = last / page * page;
  if (inner_begin >= inner_end) {  // no whole page inside
    std::memset(data_ + begin * size, 0, static_cast<std::size_t>((end - begin) * size));
    return 0;
  }
  std::memset(reinterpret_cast<void*>(first), 0, inner_begin - first);
  std::memset(reinterpret_cast<void*>(inner_end), 0, last - inner_end);
  const int rc =
      madvise(reinterpret_cast<void*>(inner_begin), inner_end - inner_begin, MADV_DONTNEED);
  CANZONA_CHECK(rc == 0, "madvise(MADV_DONTNEED) of ", inner_end - inner_begin,
                " bytes: ", std::strerror(errno));
  return static_cast<std::int64_t>(inner_end - inner_begin);
}

}  // namespace canzona::engine
