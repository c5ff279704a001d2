/* SPDX-License-Identifier: Apache-2.0
 * common: SHA-256 (FIPS 180-4) for content hashes: a portable block
 * function, and on x86-64 processors with the SHA extensions one built on
 * them (about 8x faster; the server hashes every request body, input and
 * plan key), chosen once at run time. Nothing here allocates or fails. */
#include "cm.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI 1
#endif

static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

static void compress(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] +
                      w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

/* n whole blocks at p, portably. */
static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        compress(h, p + 64 * i);
    }
}

#ifdef HAVE_SHA_NI
/* n whole blocks at p with SHA-NI. The instructions keep the state as two
 * vectors, {A,B,E,F} and {C,D,G,H} (highest lane first); each
 * sha256rnds2 does two rounds from the two low words of its message+K
 * operand, and sha256msg1/msg2 extend the message schedule four words at a
 * time: W[t..t+3] from W[t-16..t-1]. */
__attribute__((target("sha,sse4.1"))) static void blocks_sha_ni(uint32_t h[8], const uint8_t *p,
                                                                 size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)(const void *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)(const void *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (size_t b = 0; b < n; b++, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w[4];
        for (int g = 0; g < 16; g++) {
            __m128i m;
            if (g < 4) {
                m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * g)),
                                     bswap);
            } else {
                /* w[g%4] holds W of group g-4, w[(g+1)%4] g-3, w[(g+2)%4]
                 * g-2, w[(g+3)%4] g-1 */
                __m128i t = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
                t = _mm_add_epi32(t, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
                m = _mm_sha256msg2_epu32(t, w[(g + 3) % 4]);
            }
            w[g % 4] = m;
            __m128i k = _mm_loadu_si128((const __m128i *)(const void *)&K[4 * g]);
            __m128i mk = _mm_add_epi32(m, k);
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, mk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(mk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    dcba = _mm_blend_epi16(feba, dchg, 0xF0);
    hgfe = _mm_alignr_epi8(dchg, feba, 8);
    _mm_storeu_si128((__m128i *)(void *)&h[0], dcba);
    _mm_storeu_si128((__m128i *)(void *)&h[4], hgfe);
}

/* Whether the processor has the SHA extensions (CPUID leaf 7, EBX bit 29)
 * and SSE4.1 (leaf 1, ECX bit 19). */
static bool cpu_has_sha_ni(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 19)) == 0) {
        return false;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) {
        return false;
    }
    return (b & (1u << 29)) != 0;
}
#endif

static _Atomic bool portable_only;

bool cm_sha256_accelerated(void)
{
#ifdef HAVE_SHA_NI
    static _Atomic int has_ni = -1; /* a benign race: all compute the same */
    int u = has_ni;
    if (u < 0) {
        u = cpu_has_sha_ni() ? 1 : 0;
        has_ni = u;
    }
    return u == 1 && !portable_only;
#else
    return false;
#endif
}

void cm_sha256_set_portable_only(bool on)
{
    portable_only = on;
}

/* n whole blocks at p, with the SHA extensions when the processor has them. */
static void blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#ifdef HAVE_SHA_NI
    if (cm_sha256_accelerated()) {
        blocks_sha_ni(h, p, n);
        return;
    }
#endif
    blocks_portable(h, p, n);
}

void cm_sha256_init(cm_sha256 *c)
{
    static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(c->h, iv, sizeof iv);
    c->n_bytes = 0;
    c->n_block = 0;
}

void cm_sha256_update(cm_sha256 *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->n_bytes += len;
    if (c->n_block > 0) {
        size_t take = 64 - c->n_block < len ? 64 - c->n_block : len;
        memcpy(c->block + c->n_block, p, take);
        c->n_block += take;
        p += take;
        len -= take;
        if (c->n_block < 64) {
            return;
        }
        blocks(c->h, c->block, 1);
        c->n_block = 0;
    }
    if (len >= 64) {
        blocks(c->h, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
    }
    if (len > 0) {
        memcpy(c->block, p, len);
        c->n_block = len;
    }
}

void cm_sha256_final(cm_sha256 *c, uint8_t out[CM_SHA256_LEN])
{
    uint64_t bits = c->n_bytes * 8u;
    uint8_t pad[72];
    size_t n = (c->n_block < 56 ? 56 : 120) - c->n_block;
    memset(pad, 0, sizeof pad);
    pad[0] = 0x80;
    for (int i = 0; i < 8; i++) {
        pad[n + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    uint64_t keep = c->n_bytes;
    cm_sha256_update(c, pad, n + 8);
    c->n_bytes = keep;
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void cm_sha256_to_hex(const uint8_t digest[CM_SHA256_LEN], char hex[2 * CM_SHA256_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < CM_SHA256_LEN; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * CM_SHA256_LEN] = '\0';
}

void cm_sha256_hex(const void *data, size_t len, char hex[2 * CM_SHA256_LEN + 1])
{
    cm_sha256 c;
    uint8_t d[CM_SHA256_LEN];
    cm_sha256_init(&c);
    cm_sha256_update(&c, data, len);
    cm_sha256_final(&c, d);
    cm_sha256_to_hex(d, hex);
}
