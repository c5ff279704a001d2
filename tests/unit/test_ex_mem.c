/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_mem: ex_mem_copy with streaming stores at every
 * destination and source offset within a cache line and lengths around the
 * vector widths (the 16-byte SSE2 and the 32-byte AVX2 paths, their heads
 * and tails), against memcpy, touching no byte outside the destination;
 * ex_mem_fan to up to 9 destinations at equal and unequal line offsets; and
 * ex_mem_sum_f32 (the 64-float AVX-512 path, its head and tail) against a
 * plain sum in input order, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ex_mem_int.h"

#define SPAN 1024

static void test_ex_mem_copy_streaming_matches_memcpy(void **state)
{
    (void)state;
    static unsigned char src[SPAN + 64], dst[SPAN + 192], want[SPAN + 192];
    static const size_t lens[] = {0, 1, 3, 4, 15, 16, 17, 63, 64, 65, 127, 128, 129,
                                  191, 192, 200, 255, 256, 500, 1000};
    for (size_t i = 0; i < sizeof src; i++) {
        src[i] = (unsigned char)(i * 7u + 1u);
    }
    for (size_t so = 0; so < 64; so += 3) {
        for (size_t doff = 0; doff < 64; doff++) {
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                size_t len = lens[l];
                memset(dst, 0xA5, sizeof dst);
                memset(want, 0xA5, sizeof want);
                memcpy(want + 64 + doff, src + so, len);
                ex_mem_copy(dst + 64 + doff, src + so, len, true);
                ex_mem_fence();
                if (memcmp(dst, want, sizeof dst) != 0) {
                    fail_msg("src offset %zu, dst offset %zu, %zu bytes", so, doff, len);
                }
            }
        }
    }
}

#define FAN_SPAN 2048
#define FAN_MAX  9

static void test_ex_mem_fan_matches_memcpy(void **state)
{
    (void)state;
    static unsigned char src[FAN_SPAN + 64];
    static unsigned char dst[FAN_MAX][FAN_SPAN + 192], want[FAN_SPAN + 192];
    static const size_t lens[] = {0, 5, 64, 255, 256, 257, 319, 320, 383, 700, 1024, 2000};
    for (size_t i = 0; i < sizeof src; i++) {
        src[i] = (unsigned char)(i * 13u + 5u);
    }
    for (uint32_t n = 1; n <= FAN_MAX; n++) {
        for (size_t doff = 0; doff < 64; doff += 5) {
            for (int skew = 0; skew < 2; skew++) { /* skew: member 1 one line offset apart */
                for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                    size_t len = lens[l], so = (doff * 7u) % 64u;
                    char *to[FAN_MAX];
                    size_t at[FAN_MAX];
                    for (uint32_t j = 0; j < n; j++) {
                        at[j] = 64 + doff + (skew && j == 1 ? 4u : 0u);
                        to[j] = (char *)dst[j] + at[j];
                    }
                    for (int stream = 0; stream < 2; stream++) {
                        for (uint32_t j = 0; j < n; j++) {
                            memset(dst[j], 0xA5, sizeof dst[j]);
                        }
                        ex_mem_fan(to, n, src + so, len, stream != 0);
                        ex_mem_fence();
                        for (uint32_t j = 0; j < n; j++) {
                            memset(want, 0xA5, sizeof want);
                            memcpy(want + at[j], src + so, len);
                            if (memcmp(dst[j], want, sizeof want) != 0) {
                                fail_msg("%u destinations, member %u, dst offset %zu, skew %d, "
                                         "%zu bytes, stream %d",
                                         n, j, doff, skew, len, stream);
                            }
                        }
                    }
                }
            }
        }
    }
}

#define SUM_N 700

static void test_ex_mem_sum_f32_matches_ordered_sum(void **state)
{
    (void)state;
    static float in[FAN_MAX][SUM_N + 16], out[3][SUM_N + 32];
    static const size_t lens[] = {1, 17, 63, 64, 65, 80, 127, 128, 129, 200, 640, SUM_N};
    for (uint32_t k = 0; k < FAN_MAX; k++) {
        for (size_t i = 0; i < SUM_N + 16; i++) {
            /* Values whose f32 sum depends on the order of the additions. */
            in[k][i] = (float)((i * 37u + k * 11u) % 101u) * (k % 2 ? 1e-7f : 1e3f) - 17.25f;
        }
    }
    for (uint32_t n_in = 1; n_in <= FAN_MAX; n_in += 2) {
        for (uint32_t n_out = 1; n_out <= 3; n_out++) {
            for (size_t off = 0; off < 16; off += 3) {
                for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                    size_t n = lens[l];
                    const float *ip[FAN_MAX];
                    float *op[3];
                    for (uint32_t k = 0; k < n_in; k++) {
                        ip[k] = in[k] + (off + k) % 16u;
                    }
                    for (uint32_t j = 0; j < n_out; j++) {
                        memset(out[j], 0, sizeof out[j]);
                        op[j] = out[j] + off;
                    }
                    ex_mem_sum_f32(op, n_out, ip, n_in, n, true);
                    ex_mem_fence();
                    for (uint32_t j = 0; j < n_out; j++) {
                        for (size_t i = 0; i < SUM_N + 32; i++) {
                            float want = 0;
                            if (i >= off && i < off + n) {
                                want = ip[0][i - off];
                                for (uint32_t k = 1; k < n_in; k++) {
                                    want += ip[k][i - off];
                                }
                            }
                            if (memcmp(&out[j][i], &want, sizeof want) != 0) {
                                fail_msg("%u inputs, %u outputs, offset %zu, %zu floats: "
                                         "element %zu is %.9g, want %.9g",
                                         n_in, n_out, off, n, i, (double)out[j][i], (double)want);
                            }
                        }
                    }
                }
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_mem_copy_streaming_matches_memcpy),
        cmocka_unit_test(test_ex_mem_fan_matches_memcpy),
        cmocka_unit_test(test_ex_mem_sum_f32_matches_ordered_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
