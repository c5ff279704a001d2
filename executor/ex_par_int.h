/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): a small fork-join pool that lets one device worker
 * spread a flat loop over the cores it has to itself. With fewer workers
 * than cores (one device on this 2-core machine), a worker's element-wise
 * ops, converts, compares, selects and copies would otherwise run on one
 * core while the others idle; its sgemms already use every core through
 * OpenBLAS. The helpers sleep on a condition variable between jobs, so
 * they take no core from OpenBLAS's threads.
 * Thread contract: one owner thread calls ex_par_run; the helpers are the
 * pool's own. */
#ifndef EX_PAR_INT_H
#define EX_PAR_INT_H

#include <stdint.h>

#include "cm.h"

/* Most threads of one job (the owner included). */
#define EX_PAR_MAX 16

typedef struct ex_par ex_par;

/* A pool with `helpers` threads (1 .. EX_PAR_MAX - 1). CM_ENOMEM, CM_EIO
 * when a thread cannot be started. */
cm_status ex_par_start(uint32_t helpers, ex_par **out);
void ex_par_stop(ex_par *p);

/* Threads of a job: helpers + 1. */
uint32_t ex_par_width(const ex_par *p);

/* Calls fn(ctx, part, parts) for every part < parts (parts = the width) on
 * the owner and the helpers, and returns when all have returned. */
void ex_par_run(ex_par *p, void (*fn)(void *ctx, uint32_t part, uint32_t parts), void *ctx);

/* The part-th of parts slices of [0, n), at multiples of align elements
 * (the last slice ends at n). */
void ex_par_slice(size_t n, size_t align, uint32_t part, uint32_t parts, size_t *lo,
                  size_t *hi);

#endif /* EX_PAR_INT_H */
