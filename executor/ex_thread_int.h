/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): a group of threads that start together or not at
 * all. The device workers (ex_run.c) and the calibration threads
 * (ex_calib.c) meet at barriers that count every thread of their group, so
 * a group in which one thread could not be created would wait forever:
 * here no thread runs its function until all exist, and when one cannot be
 * created the others return without running it.
 * Thread contract: one owner starts and joins a group. */
#ifndef EX_THREAD_INT_H
#define EX_THREAD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cm.h"

typedef struct ex_threads ex_threads;

/* Creates n threads (n >= 1), the i-th running fn((char *)args + i * stride)
 * (stride 0: each gets args), pinned to CPU cpus[i % n_cpus] when cpus is
 * not NULL; none calls fn before all n exist. When one cannot be created or
 * pinned, those already created return without calling fn and are joined,
 * *out is NULL and the call fails: CM_ENOMEM (out of memory or of threads),
 * CM_EIO (a thread cannot be pinned to its CPU), CM_EINTERNAL (any other
 * refusal). On success *out is released by ex_threads_join. */
cm_status ex_threads_start(uint32_t n, void *(*fn)(void *arg), void *args, size_t stride,
                           const size_t *cpus, uint32_t n_cpus, ex_threads **out,
                           cm_error *err);

/* Waits for every thread of t to return and frees t (NULL: nothing). */
void ex_threads_join(ex_threads *t);

#endif /* EX_THREAD_INT_H */
