// The SHA-NI block compression of sha256.cpp (sha256_x86.cpp), used when the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace canzona::ckpt::detail {

// True on x86-64 CPUs with the SHA extensions (and SSSE3, SSE4.1).
bool have_sha_ni();
// Mixes `blocks` 64-byte blocks at `m` into h[0..7] (FIPS 180-4 section 6.2.2, constants k).
void compress_sha_ni(std::uint32_t h[8], const std::uint8_t* m, std::size_t blocks,
                     const std::uint32_t k[64]);

}  // namespace canzona::ckpt::detail
