/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): memory primitives of the shared-memory collectives
 * (ex_coll.c): large buffers that fault in as transparent huge pages, copies
 * that bypass the cache with streaming stores when the data written exceeds
 * it, and an f32 sum of several inputs written to several outputs in one
 * pass. They know nothing about modules, shardings or workers.
 * Thread contract: every function is reentrant. Streaming stores are weakly
 * ordered: a thread calls ex_mem_fence before another thread may read what
 * it wrote (before the barrier that ends a collective). */
#ifndef EX_MEM_INT_H
#define EX_MEM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Buffers of at least this many bytes are advised to the kernel as huge
 * page candidates (ex_mem_alloc). */
#define EX_MEM_HUGE_MIN ((size_t)4 << 20)

/* n elements of esz bytes through cm_alloc (zero: cm_calloc), freed with
 * cm_free. A buffer of EX_MEM_HUGE_MIN bytes or more is advised
 * MADV_HUGEPAGE before its first touch: 2 MiB pages fault 512 times less
 * often than 4 KiB ones (a first 64 MiB all-gather spent seconds in page
 * faults). NULL when out of memory or when n * esz overflows. */
void *ex_mem_alloc(size_t n, size_t esz, bool zero);

/* memcpy of len bytes; stream: with streaming (non-temporal) stores, which
 * skip reading the destination into the cache and do not evict what is in
 * it. For copies whose written bytes exceed the cache. */
void ex_mem_copy(void *dst, const void *src, size_t len, bool stream);

/* Most destinations of one ex_mem_fan call. */
#define EX_MEM_FAN_MAX 64

/* ex_mem_copy of src to each of dst[0..n_dst) (n_dst <= EX_MEM_FAN_MAX),
 * reading src once: with streaming stores, each 64-byte line of it is
 * loaded into registers and stored to every destination, which runs the
 * all-gather's one-read, many-writes pattern at this machine's write rate
 * (docs/executor.md). Destinations must not overlap src. */
void ex_mem_fan(char *const *dst, uint32_t n_dst, const void *src, size_t len, bool stream);

/* out[j][i] = in[0][i] + in[1][i] + ... + in[n_in - 1][i] for i < n and every
 * j < n_out, summed in input order in f32 (every output gets the same bits),
 * reading each input once and writing each output once (stream: streaming
 * stores). n_in >= 1. Outputs must not overlap inputs. */
void ex_mem_sum_f32(float *const *out, uint32_t n_out, const float *const *in, uint32_t n_in,
                    size_t n, bool stream);

/* Orders this thread's streaming stores before its later stores (sfence). */
void ex_mem_fence(void);

#endif /* EX_MEM_INT_H */
