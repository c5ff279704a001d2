/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_mem: ex_mem_copy with streaming stores at every
 * destination and source offset within a cache line and lengths around the
 * vector widths (the 16-byte SSE2 and the 32-byte AVX2 paths, their heads
 * and tails), against memcpy, touching no byte outside the destination. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_mem_copy_streaming_matches_memcpy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
