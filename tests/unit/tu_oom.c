/* SPDX-License-Identifier: Apache-2.0
 * Test helper: the OOM loop (tu_oom.h). */
#include "tu_oom.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

long tu_oom_loop(const tu_oom *t, void *ctx, long max_n)
{
    for (long n = 0;; n++) {
        if (t->setup != NULL) {
            t->setup(ctx);
        }
        cm_alloc_fail_after(n);
        cm_status st = t->run(ctx);
        cm_alloc_fail_after(-1);
        if (t->done != NULL) {
            t->done(ctx, st);
        }
        if (st == CM_OK) {
            return n;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_true(n < max_n);
    }
}
