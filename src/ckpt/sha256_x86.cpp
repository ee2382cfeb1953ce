// SHA-256 block compression with the x86 SHA extensions (SHA-NI: Intel Goldmont / Ice Lake and
// later, AMD Zen and later). The same FIPS 180-4 rounds as the portable code in sha256.cpp, four
// message words per 128-bit register: sha256msg1 / sha256msg2 build the schedule
// W_t = s1(W_t-2) + W_t-7 + s0(W_t-15) + W_t-16 four words at a time, sha256rnds2 runs two rounds
// on the working variables kept as {a, b, e, f} and {c, d, g, h}.
#include "sha256_x86.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

namespace canzona::ckpt::detail {

bool have_sha_ni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool sha = (ebx >> 29) & 1;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
  return sha && ssse3 && sse41;
}

__attribute__((target("sha,sse4.1,ssse3"))) void compress_sha_ni(std::uint32_t h[8],
                                                                 const std::uint8_t* m,
                                                                 std::size_t blocks,
                                                                 const std::uint32_t k[64]) {
  // Big-endian words: reverse the bytes of each 32-bit lane.
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  // h = {a..h} -> abef = {f, e, b, a} and cdgh = {h, g, d, c} (lane 0 first), the order
  // sha256rnds2 expects.
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)), 0xB1);
  __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4)), 0x1B);
  __m128i abef = _mm_alignr_epi8(tmp, cdgh, 8);
  cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);
  for (; blocks > 0; --blocks, m += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];  // the schedule, words 4j..4j+3 in w[j mod 4]
    for (int j = 0; j < 16; ++j) {
      if (j < 4)
        w[j] =
            _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * j)), swap);
      __m128i wk =
          _mm_add_epi32(w[j & 3], _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + 4 * j)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);  // rounds 4j, 4j + 1
      if (j >= 3 && j <= 14) {
        // w[j + 1] = msg2(msg1(W_j-3, W_j-2) + alignr(W_j, W_j-1), W_j): words 4j + 4..4j + 7.
        const __m128i t = _mm_alignr_epi8(w[j & 3], w[(j - 1) & 3], 4);
        w[(j + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[(j + 1) & 3], t), w[j & 3]);
      }
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);  // rounds 4j + 2, 4j + 3
      if (j >= 1 && j <= 12) w[(j - 1) & 3] = _mm_sha256msg1_epu32(w[(j - 1) & 3], w[j & 3]);
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  tmp = _mm_shuffle_epi32(abef, 0x1B);
  cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm_blend_epi16(tmp, cdgh, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), _mm_alignr_epi8(cdgh, tmp, 8));
}

}  // namespace canzona::ckpt::detail

#else

namespace canzona::ckpt::detail {
bool have_sha_ni() {
  return false;
}
void compress_sha_ni(std::uint32_t*, const std::uint8_t*, std::size_t, const std::uint32_t*) {}
}  // namespace canzona::ckpt::detail

#endif
