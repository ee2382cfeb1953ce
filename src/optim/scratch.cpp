#include "scratch.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace canzona::optim::detail {
namespace {

constexpr std::size_t kAlign = 64;

struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};

struct Block {
  std::unique_ptr<std::byte, FreeAligned> memory;
  std::size_t size = 0;
};

// One per thread. `block`/`offset` is the bump pointer; `in_use` counts bytes taken by open
// frames and `high_water` its maximum, which sizes the single block the arena keeps.
struct Arena {
  std::vector<Block> blocks;
  std::size_t block = 0;
  std::size_t offset = 0;
  std::size_t in_use = 0;
  std::size_t high_water = 0;
  int depth = 0;

  void add_block(std::size_t bytes) {
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) throw std::bad_alloc();
    blocks.push_back(
        Block{std::unique_ptr<std::byte, FreeAligned>(static_cast<std::byte*>(p)), size});
  }
};

Arena& arena() {
  thread_local Arena a;
  return a;
}

}  // namespace

Scratch::Scratch() {
  Arena& a = arena();
  block_mark_ = a.block;
  offset_mark_ = a.offset;
  in_use_mark_ = a.in_use;
  ++a.depth;
}

Scratch::~Scratch() {
  Arena& a = arena();
  a.block = block_mark_;
  a.offset = offset_mark_;
  a.in_use = in_use_mark_;
  if (--a.depth == 0 && a.blocks.size() > 1) {
    // Several blocks were needed: replace them by one that holds the high-water mark, so the
    // next frame of the same size allocates nothing.
    a.blocks.clear();
    a.block = 0;
    a.offset = 0;
    try {
      a.add_block(a.high_water);
    } catch (const std::bad_alloc&) {
      // Destructors never throw; the next take() allocates on demand.
    }
  }
}

void* Scratch::take(std::size_t bytes) {
  Arena& a = arena();
  bytes = std::max<std::size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  while (a.block < a.blocks.size() && a.offset + bytes > a.blocks[a.block].size) {
    ++a.block;
    a.offset = 0;
  }
  if (a.block == a.blocks.size()) {
    std::size_t total = 0;
    for (const Block& b : a.blocks) total += b.size;
    a.add_block(std::max(bytes, total));
    a.offset = 0;
  }
  std::byte* p = a.blocks[a.block].memory.get() + a.offset;
  a.offset += bytes;
  a.in_use += bytes;
  a.high_water = std::max(a.high_water, a.in_use);
  return p;
}

}  // namespace canzona::optim::detail
