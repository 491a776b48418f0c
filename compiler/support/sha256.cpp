#include "compiler/support/sha256.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define KPC_SHA_NI 1
#endif

namespace kpc {
namespace {

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

constexpr bool kLittleEndian = std::endian::native == std::endian::little;
inline uint32_t big_endian(uint32_t v) { return kLittleEndian ? __builtin_bswap32(v) : v; }
inline uint64_t big_endian(uint64_t v) { return kLittleEndian ? __builtin_bswap64(v) : v; }

void block(uint32_t h[8], const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

#ifdef KPC_SHA_NI
// The same compression function with the x86 SHA extensions (chain names are hashed
// ~130k times per 10k-service compile). Selected at run time; the portable block()
// above is the reference it is tested against (tests/unit/sha256_test.cpp).
__attribute__((target("sha,sse4.1"))) void block_shani(uint32_t h[8], const uint8_t* p) {
  const __m128i kShuffle = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[0])), 0xB1);  // CDAB
  __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[4])), 0x1B);  // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);      // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);           // CDGH
  const __m128i abef = state0, cdgh = state1;
  __m128i m[4];
  for (int g = 0; g < 16; ++g) {
    __m128i w;
    if (g < 4) {
      w = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), kShuffle);
    } else {  // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four words at a time
      __m128i t = _mm_sha256msg1_epu32(m[g % 4], m[(g + 1) % 4]);
      t = _mm_add_epi32(t, _mm_alignr_epi8(m[(g + 3) % 4], m[(g + 2) % 4], 4));
      w = _mm_sha256msg2_epu32(t, m[(g + 3) % 4]);
    }
    m[g % 4] = w;
    __m128i msg = _mm_add_epi32(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kK[4 * g])));
    state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
    state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(msg, 0x0E));
  }
  state0 = _mm_add_epi32(state0, abef);
  state1 = _mm_add_epi32(state1, cdgh);
  tmp = _mm_shuffle_epi32(state0, 0x1B);     // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);  // DCHG
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[0]), _mm_blend_epi16(tmp, state1, 0xF0));  // DCBA
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[4]), _mm_alignr_epi8(state1, tmp, 8));    // HGFE
}

bool cpu_has_sha_ni() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b >> 29) & 1;
}
#endif

using BlockFn = void (*)(uint32_t*, const uint8_t*);

BlockFn select_block(bool allow_accelerated) {
#ifdef KPC_SHA_NI
  static const bool has = cpu_has_sha_ni();
  if (allow_accelerated && has) return block_shani;
#endif
  return block;
}

std::array<uint8_t, 32> sha256_with(std::string_view data, BlockFn fn) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t n = data.size();
  size_t full = n / 64 * 64;
  for (size_t i = 0; i < full; i += 64) fn(h, p + i);
  // Padding: 0x80, zeros, the bit length big-endian. Chain-name inputs fit one block, so
  // this tail is most of the work besides the compression: whole-word stores, not bytes.
  uint8_t tail[128];
  size_t rem = n - full;
  size_t tail_len = rem + 9 <= 64 ? 64 : 128;
  std::memcpy(tail, p + full, rem);
  tail[rem] = 0x80;
  std::memset(tail + rem + 1, 0, tail_len - 8 - rem - 1);
  uint64_t bits = big_endian(uint64_t(n) * 8);
  std::memcpy(tail + tail_len - 8, &bits, 8);
  for (size_t i = 0; i < tail_len; i += 64) fn(h, tail + i);
  std::array<uint8_t, 32> out;
  for (int i = 0; i < 8; ++i) {
    uint32_t be = big_endian(h[i]);
    std::memcpy(out.data() + 4 * i, &be, 4);
  }
  return out;
}

}  // namespace

std::array<uint8_t, 32> sha256(std::string_view data) {
  static const BlockFn fn = select_block(true);
  return sha256_with(data, fn);
}

std::array<uint8_t, 32> sha256_portable(std::string_view data) { return sha256_with(data, block); }

bool sha256_accelerated() { return select_block(true) != select_block(false); }

std::string base32(const uint8_t* data, size_t len) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (size_t i = 0; i < len; ++i) {
    buffer = (buffer << 8) | data[i];
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  while (out.size() % 8) out += '=';
  return out;
}

}  // namespace kpc
