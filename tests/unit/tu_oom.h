/* SPDX-License-Identifier: Apache-2.0
 * Test helper (not a test): the OOM loop of STYLE.md ("Tests"), written once.
 * Attempt n makes the (n+1)th allocation through cm_alloc fail while the
 * calls under test run (cm_alloc_fail_after); the loop tries n = 0, 1, ...
 * until an attempt succeeds. Failures are cmocka assertions; ASan checks that no attempt
 * leaks. */
#ifndef TU_OOM_H
#define TU_OOM_H

#include "cm.h"

/* What one attempt does, in three phases around the armed allocator; ctx is
 * the test's own state, handed to each. */
typedef struct tu_oom {
    void (*setup)(void *ctx);              /* failures off: prepares the attempt; NULL: none */
    cm_status (*run)(void *ctx);           /* failures armed: the calls under test */
    void (*done)(void *ctx, cm_status st); /* failures off: checks and frees; NULL: none */
} tu_oom;

/* Runs attempts n = 0, 1, ... of t until run returns CM_OK. Each failed
 * attempt must have failed with CM_ENOMEM, and success must come before
 * max_n attempts. Returns the n that succeeded (0 when nothing needed an
 * allocation). */
long tu_oom_loop(const tu_oom *t, void *ctx, long max_n);

#endif /* TU_OOM_H */
