/* SPDX-License-Identifier: Apache-2.0
 * executor: memory primitives of the collectives (see ex_mem_int.h). The
 * streaming paths use SSE2, which every x86-64 has, 32-byte AVX2 stores for
 * copies and 64-byte AVX-512 stores and sums where the CPU has them (chosen
 * at run time); elsewhere they fall back to memcpy and plain loops with the
 * same results. */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE (Linux) */
#include "ex_mem_int.h"

#include <string.h>
#include <sys/mman.h>

#include "cm.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)

void *ex_mem_alloc(size_t n, size_t esz, bool zero)
{
    if (esz != 0 && n > SIZE_MAX / esz) {
        return NULL;
    }
    size_t len = n * esz;
    void *p = zero ? cm_calloc(n, esz) : cm_alloc(len);
#if defined(MADV_HUGEPAGE)
    if (p != NULL && len >= EX_MEM_HUGE_MIN) {
        /* Only whole aligned 2 MiB pages inside the buffer can be huge. A
         * refusal (THP off) leaves ordinary pages: not an error. */
        uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1u) & ~(HUGE_PAGE - 1u);
        uintptr_t e = ((uintptr_t)p + len) & ~(HUGE_PAGE - 1u);
        if (e > a) {
            (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
        }
    }
#endif
    return p;
}

#if defined(__SSE2__) && defined(__GNUC__) && defined(__x86_64__)
#define STREAM_AVX2 1
/* n bytes (a multiple of 64) with 32-byte streaming stores; d is 32-byte
 * aligned. Compiled for AVX2 whatever the build's flags; called only when
 * the CPU has it. */
__attribute__((target("avx2"))) static void stream_avx2(char *d, const char *s, size_t n)
{
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32));
        _mm256_stream_si256((__m256i *)(void *)d, a);
        _mm256_stream_si256((__m256i *)(void *)(d + 32), b);
    }
}
#endif

void ex_mem_copy(void *dst, const void *src, size_t len, bool stream)
{
#if defined(__SSE2__)
    if (stream && len >= 64) {
        char *d = dst;
        const char *s = src;
        /* Up to 16-byte alignment of the destination: 4-byte streaming
         * stores when it is 4-byte aligned (f32, i32 data), so the line's
         * other bytes are not fetched into the cache. */
        while (((uintptr_t)d & 15u) != 0) {
            if (((uintptr_t)d & 3u) == 0) {
                int w;
                memcpy(&w, s, 4);
                _mm_stream_si32((int *)(void *)d, w);
                d += 4;
                s += 4;
                len -= 4;
            } else {
                *d++ = *s++;
                len--;
            }
        }
#if defined(STREAM_AVX2)
        /* 32-byte streaming stores where the CPU has them: 13% faster for
         * the 64 MiB all-gather, 15% for the all-to-all (docs/executor.md). */
        if (len >= 128 && __builtin_cpu_supports("avx2")) {
            if (((uintptr_t)d & 31u) != 0) {
                _mm_stream_si128((__m128i *)(void *)d,
                                 _mm_loadu_si128((const __m128i *)(const void *)s));
                d += 16;
                s += 16;
                len -= 16;
            }
            size_t n = len & ~(size_t)63u;
            stream_avx2(d, s, n);
            d += n;
            s += n;
            len -= n;
        }
#endif
        for (; len >= 64; len -= 64, d += 64, s += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
            _mm_stream_si128((__m128i *)(void *)d, a);
            _mm_stream_si128((__m128i *)(void *)(d + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + 48), e);
        }
        for (; len >= 16; len -= 16, d += 16, s += 16) {
            _mm_stream_si128((__m128i *)(void *)d,
                             _mm_loadu_si128((const __m128i *)(const void *)s));
        }
        for (; len >= 4; len -= 4, d += 4, s += 4) {
            int w;
            memcpy(&w, s, 4);
            _mm_stream_si32((int *)(void *)d, w);
        }
        memcpy(d, s, len);
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, len);
}

#if defined(STREAM_AVX2)
/* Every dst[j] + o gets the 64-byte line src + o, for o < n (a multiple of
 * 64): the line is read once, into registers, and streamed to each
 * destination; every dst[j] is 64-byte aligned. One 64-byte store where the
 * CPU has AVX-512, else two 32-byte ones (fan_avx2). */
__attribute__((target("avx512f"))) static void fan_avx512(char *const *dst, uint32_t n_dst,
                                                         const char *src, size_t n)
{
    for (size_t o = 0; o < n; o += 64) {
        __m512i a = _mm512_loadu_si512((const void *)(src + o));
        for (uint32_t j = 0; j < n_dst; j++) {
            _mm512_stream_si512((void *)(dst[j] + o), a);
        }
    }
}

__attribute__((target("avx2"))) static void fan_avx2(char *const *dst, uint32_t n_dst,
                                                     const char *src, size_t n)
{
    for (size_t o = 0; o < n; o += 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(src + o));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + o + 32));
        for (uint32_t j = 0; j < n_dst; j++) {
            _mm256_stream_si256((__m256i *)(void *)(dst[j] + o), a);
            _mm256_stream_si256((__m256i *)(void *)(dst[j] + o + 32), b);
        }
    }
}
#endif

/* True when every dst[j] has the same address modulo 64 (so one head brings
 * them all to a line boundary). */
static bool same_line_offset(char *const *dst, uint32_t n_dst)
{
    for (uint32_t j = 1; j < n_dst; j++) {
        if ((((uintptr_t)dst[j] ^ (uintptr_t)dst[0]) & 63u) != 0) {
            return false;
        }
    }
    return true;
}

void ex_mem_fan(char *const *dst, uint32_t n_dst, const void *src, size_t len, bool stream)
{
    const char *s = src;
    size_t head = (64u - ((uintptr_t)dst[0] & 63u)) & 63u;
#if defined(STREAM_AVX2)
    bool wide = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
#else
    bool wide = false, avx2 = false;
#endif
    if (!stream || n_dst < 2 || !(wide || avx2) || len < head + 256 ||
        !same_line_offset(dst, n_dst)) {
        for (uint32_t j = 0; j < n_dst; j++) {
            ex_mem_copy(dst[j], s, len, stream);
        }
        return;
    }
    char *at[EX_MEM_FAN_MAX];
    for (uint32_t j = 0; j < n_dst; j++) {
        ex_mem_copy(dst[j], s, head, true);
        at[j] = dst[j] + head;
    }
    size_t body = (len - head) & ~(size_t)63u;
#if defined(STREAM_AVX2)
    if (wide) {
        fan_avx512(at, n_dst, s + head, body);
    } else {
        fan_avx2(at, n_dst, s + head, body);
    }
#endif
    for (uint32_t j = 0; j < n_dst; j++) {
        ex_mem_copy(at[j] + body, s + head + body, len - head - body, true);
    }
}

void ex_mem_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/* A block of the sum lives here (L1) between the reads and the writes. */
#define TILE 1024

static void sum_tiles(float *const *out, uint32_t n_out, const float *const *in, uint32_t n_in,
                      size_t n, bool stream)
{
    float tile[TILE];
    for (size_t b = 0; b < n; b += TILE) {
        size_t m = n - b < TILE ? n - b : TILE;
        size_t i = 0;
#if defined(__SSE2__)
        /* 16 floats at a time in registers: each input read once. (Adding
         * one input at a time into the tile, for longer runs per input,
         * measured slower.) */
        for (; i + 16 <= m; i += 16) {
            const float *s = in[0] + b + i;
            __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + 4);
            __m128 r2 = _mm_loadu_ps(s + 8), r3 = _mm_loadu_ps(s + 12);
            for (uint32_t k = 1; k < n_in; k++) {
                s = in[k] + b + i;
                r0 = _mm_add_ps(r0, _mm_loadu_ps(s));
                r1 = _mm_add_ps(r1, _mm_loadu_ps(s + 4));
                r2 = _mm_add_ps(r2, _mm_loadu_ps(s + 8));
                r3 = _mm_add_ps(r3, _mm_loadu_ps(s + 12));
            }
            _mm_storeu_ps(tile + i, r0);
            _mm_storeu_ps(tile + i + 4, r1);
            _mm_storeu_ps(tile + i + 8, r2);
            _mm_storeu_ps(tile + i + 12, r3);
        }
#endif
        for (; i < m; i++) {
            float acc = in[0][b + i];
            for (uint32_t k = 1; k < n_in; k++) {
                acc += in[k][b + i];
            }
            tile[i] = acc;
        }
        for (uint32_t j = 0; j < n_out; j++) {
            ex_mem_copy(out[j] + b, tile, m * sizeof(float), stream);
        }
    }
}

#if defined(STREAM_AVX2)
/* 64 floats at a time in four 64-byte registers, summed in input order and
 * streamed straight to every output (no tile): n is a multiple of 64 and
 * every out[j] is 64-byte aligned. */
__attribute__((target("avx512f"))) static void sum_avx512(float *const *out, uint32_t n_out,
                                                         const float *const *in, uint32_t n_in,
                                                         size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        const float *s = in[0] + i;
        __m512 r0 = _mm512_loadu_ps(s), r1 = _mm512_loadu_ps(s + 16);
        __m512 r2 = _mm512_loadu_ps(s + 32), r3 = _mm512_loadu_ps(s + 48);
        for (uint32_t k = 1; k < n_in; k++) {
            s = in[k] + i;
            r0 = _mm512_add_ps(r0, _mm512_loadu_ps(s));
            r1 = _mm512_add_ps(r1, _mm512_loadu_ps(s + 16));
            r2 = _mm512_add_ps(r2, _mm512_loadu_ps(s + 32));
            r3 = _mm512_add_ps(r3, _mm512_loadu_ps(s + 48));
        }
        for (uint32_t j = 0; j < n_out; j++) {
            float *d = out[j] + i;
            _mm512_stream_ps(d, r0);
            _mm512_stream_ps(d + 16, r1);
            _mm512_stream_ps(d + 32, r2);
            _mm512_stream_ps(d + 48, r3);
        }
    }
}
#endif

void ex_mem_sum_f32(float *const *out, uint32_t n_out, const float *const *in, uint32_t n_in,
                    size_t n, bool stream)
{
#if defined(STREAM_AVX2)
    /* Streaming sums on AVX-512: the head up to the outputs' next line
     * boundary and the tail go through the tiles. */
    size_t head = ((64u - ((uintptr_t)out[0] & 63u)) & 63u) / sizeof(float);
    bool same = ((uintptr_t)out[0] & 3u) == 0;
    for (uint32_t j = 1; same && j < n_out; j++) {
        same = (((uintptr_t)out[j] ^ (uintptr_t)out[0]) & 63u) == 0;
    }
    if (stream && same && n_out <= EX_MEM_FAN_MAX && n_in <= EX_MEM_FAN_MAX && n >= head + 64 &&
        __builtin_cpu_supports("avx512f")) {
        sum_tiles(out, n_out, in, n_in, head, true);
        size_t body = (n - head) & ~(size_t)63u;
        const float *ib[EX_MEM_FAN_MAX] = {NULL};
        float *ob[EX_MEM_FAN_MAX] = {NULL};
        for (uint32_t k = 0; k < n_in; k++) {
            ib[k] = in[k] + head;
        }
        for (uint32_t j = 0; j < n_out; j++) {
            ob[j] = out[j] + head;
        }
        sum_avx512(ob, n_out, ib, n_in, body);
        for (uint32_t k = 0; k < n_in; k++) {
            ib[k] += body;
        }
        for (uint32_t j = 0; j < n_out; j++) {
            ob[j] += body;
        }
        sum_tiles(ob, n_out, ib, n_in, n - head - body, true);
        return;
    }
#endif
    sum_tiles(out, n_out, in, n_in, n, stream);
}
